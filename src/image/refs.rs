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
use super::fsutil::write_atomic;

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
            write_atomic(&self.tmp, &self.path, &data)?;
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
    fn garbage_is_reported_as_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("index.json"), b"{nope").unwrap();
        let refs = RefFile::new(dir.path(), dir.path().to_path_buf());
        let err = refs.read().unwrap_err();
        assert!(matches!(err, ImageError::Corrupt { .. }), "{err}");
    }
}
