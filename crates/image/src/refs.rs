//! `images/index.json`: which manifest each reference names, and when each was
//! last used. Read-modify-write cycles hold an exclusive flock on `images/lock`,
//! so the daemon and a concurrent `podhost load` never lose each other's updates;
//! the file itself is replaced atomically, so readers need no lock.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

use super::error::{ImageError, IoContext};
use super::fsutil::temp_name;

/// Version of the on-disk format.
const VERSION: u32 = 1;

/// One reference in the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RefEntry {
    /// Digest of the platform-specific image manifest.
    pub manifest: String,
    /// Digest of the image index the manifest was chosen from, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<String>,
    /// When the reference was (last) loaded.
    pub loaded: DateTime<Utc>,
    /// When a container last used the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_used: Option<DateTime<Utc>>,
    /// When this reference first named this manifest (image GC's minimum age); absent
    /// in indexes written before it existed, where `loaded` stands in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_detected: Option<DateTime<Utc>>,
    /// Never garbage-collected (`ImageStore::set_pinned`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub pinned: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl RefEntry {
    /// The entry of a reference (re)loaded or pulled `now` to name `manifest`: keeps
    /// the previous entry's last use and pin, and its first-detected time if it named
    /// the same manifest.
    pub(crate) fn renewed(
        previous: Option<&RefEntry>,
        manifest: &str,
        index: Option<String>,
        now: DateTime<Utc>,
    ) -> RefEntry {
        let same = previous.filter(|p| p.manifest == manifest);
        RefEntry {
            manifest: manifest.to_string(),
            index,
            loaded: now,
            last_used: previous.and_then(|p| p.last_used),
            first_detected: Some(same.map_or(now, RefEntry::first_detected)),
            pinned: previous.is_some_and(|p| p.pinned),
        }
    }

    /// When this reference first named its manifest.
    pub(crate) fn first_detected(&self) -> DateTime<Utc> {
        self.first_detected.unwrap_or(self.loaded)
    }
}

/// The whole `images/index.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct RefIndex {
    #[serde(default)]
    pub version: u32,
    /// Normalized reference → entry.
    #[serde(default)]
    pub images: BTreeMap<String, RefEntry>,
}

#[derive(Debug, Clone)]
pub(crate) struct RefFile {
    path: PathBuf,
    lock: PathBuf,
    tmp: PathBuf,
}

impl RefFile {
    /// `images_dir` is `<root>/images`.
    pub(crate) fn new(images_dir: &Path, tmp: PathBuf) -> Self {
        RefFile {
            path: images_dir.join("index.json"),
            lock: images_dir.join("lock"),
            tmp,
        }
    }

    /// Reads the index (an absent file is an empty index).
    pub(crate) fn read(&self) -> Result<RefIndex, ImageError> {
        let data = match fs::read(&self.path) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(RefIndex {
                    version: VERSION,
                    ..RefIndex::default()
                });
            }
            Err(e) => return Err(ImageError::io("read", &self.path, e)),
        };
        let index: RefIndex = serde_json::from_slice(&data).map_err(|e| ImageError::Corrupt {
            path: self.path.clone(),
            reason: e.to_string(),
        })?;
        if index.version > VERSION {
            return Err(ImageError::Corrupt {
                path: self.path.clone(),
                reason: format!(
                    "format version {} is newer than this podhost understands ({VERSION})",
                    index.version
                ),
            });
        }
        Ok(index)
    }

    /// Runs `f` on the index under the exclusive lock and writes the result back
    /// atomically if `f` returns `Ok(true)`.
    pub(crate) fn update<T>(
        &self,
        f: impl FnOnce(&mut RefIndex) -> Result<(T, bool), ImageError>,
    ) -> Result<T, ImageError> {
        let _guard = self.lock()?;
        let mut index = self.read()?;
        let (out, changed) = f(&mut index)?;
        if changed {
            index.version = VERSION;
            let mut data = serde_json::to_vec_pretty(&index).map_err(|e| ImageError::Corrupt {
                path: self.path.clone(),
                reason: e.to_string(),
            })?;
            data.push(b'\n');
            podhost_disk::write_atomic_via(&self.tmp.join(temp_name("write")), &self.path, &data)?;
        }
        Ok(out)
    }

    fn lock(&self) -> Result<Flock<File>, ImageError> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&self.lock)
            .ctx("open lock file", &self.lock)?;
        Flock::lock(file, FlockArg::LockExclusive)
            .map_err(|(_, errno)| ImageError::io("lock", &self.lock, io::Error::from(errno)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_round_trips_and_absent_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let refs = RefFile::new(dir.path(), dir.path().to_path_buf());
        assert!(refs.read().unwrap().images.is_empty());
        refs.update(|idx| {
            idx.images.insert(
                "localhost/a:latest".into(),
                RefEntry {
                    manifest: format!("sha256:{}", "0".repeat(64)),
                    index: None,
                    loaded: Utc::now(),
                    last_used: None,
                    first_detected: None,
                    pinned: false,
                },
            );
            Ok(((), true))
        })
        .unwrap();
        let idx = refs.read().unwrap();
        assert_eq!(idx.version, VERSION);
        assert!(idx.images.contains_key("localhost/a:latest"));
    }

    #[test]
    fn renewed_keeps_first_detection_for_the_same_manifest_and_the_pin() {
        let (a, b) = (
            format!("sha256:{}", "a".repeat(64)),
            format!("sha256:{}", "b".repeat(64)),
        );
        let t0 = Utc::now();
        let t1 = t0 + chrono::TimeDelta::minutes(5);
        let mut first = RefEntry::renewed(None, &a, None, t0);
        assert_eq!(first.first_detected(), t0);
        first.pinned = true;
        first.last_used = Some(t0);
        let again = RefEntry::renewed(Some(&first), &a, None, t1);
        assert_eq!(
            (again.first_detected(), again.loaded, again.pinned),
            (t0, t1, true)
        );
        let retagged = RefEntry::renewed(Some(&first), &b, None, t1);
        assert_eq!(
            (retagged.first_detected(), retagged.last_used),
            (t1, Some(t0))
        );
        // Indexes from before the field: `loaded` stands in.
        let old: RefEntry = serde_json::from_str(&format!(
            r#"{{"manifest":"{a}","loaded":"2024-01-01T00:00:00Z"}}"#
        ))
        .unwrap();
        assert_eq!(old.first_detected(), old.loaded);
        assert!(!old.pinned);
    }

    #[test]
    fn garbage_is_reported_as_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("index.json"), b"{nope").unwrap();
        let refs = RefFile::new(dir.path(), dir.path().to_path_buf());
        let err = refs.read().unwrap_err();
        assert!(matches!(err, ImageError::Corrupt { .. }), "{err}");
    }
}
