//! What content each image names (manifest, index, config and layer blobs, layer
//! snapshots), what is on disk, how big it is, and deleting what nothing names.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use serde::Deserialize;

use crate::chain_ids;
use crate::digest::sha256_hex;
use crate::error::{ImageError, IoContext};
use crate::fsutil::{fsync_dir, temp_name};

/// Largest manifest or config GC reads.
const MAX_JSON: u64 = 16 << 20;

/// One piece of stored content, by its 64-hex name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Item {
    /// `images/blobs/sha256/<hex>`.
    Blob(String),
    /// `snapshots/<chain id hex>/`.
    Snapshot(String),
}

/// The store's content directories.
#[derive(Debug, Clone)]
pub(crate) struct Dirs {
    pub blobs: PathBuf,
    pub snapshots: PathBuf,
}

impl Dirs {
    pub(crate) fn new(root_dir: &Path) -> Self {
        Dirs {
            blobs: root_dir.join("images").join("blobs").join("sha256"),
            snapshots: root_dir.join("snapshots"),
        }
    }

    pub(crate) fn path(&self, item: &Item) -> PathBuf {
        match item {
            Item::Blob(hex) => self.blobs.join(hex),
            Item::Snapshot(hex) => self.snapshots.join(hex),
        }
    }
}

#[derive(Deserialize)]
struct Descriptor {
    digest: String,
}

#[derive(Deserialize)]
struct Manifest {
    config: Descriptor,
    #[serde(default)]
    layers: Vec<Descriptor>,
}

#[derive(Deserialize)]
struct RootFs {
    #[serde(default)]
    diff_ids: Vec<String>,
}

#[derive(Deserialize)]
struct Config {
    rootfs: RootFs,
}

/// Reads manifests and configs (each manifest once) to list the items of an image.
pub(crate) struct ContentReader<'a> {
    dirs: &'a Dirs,
    cache: HashMap<String, Rc<[Item]>>,
}

/// A blob read: its bytes, or absent.
enum Fetched {
    Bytes(Vec<u8>),
    Absent,
}

impl<'a> ContentReader<'a> {
    pub(crate) fn new(dirs: &'a Dirs) -> Self {
        ContentReader {
            dirs,
            cache: HashMap::new(),
        }
    }

    /// Every item the image with this manifest digest names (the manifest blob itself
    /// first). A manifest or config that is missing or unparsable makes a broken
    /// image: only what can still be named is listed (it cannot be resolved anyway).
    /// Any other read error is returned: GC must not delete on a guess.
    pub(crate) fn items(&mut self, manifest: &str) -> Result<Rc<[Item]>, ImageError> {
        if let Some(hit) = self.cache.get(manifest) {
            return Ok(Rc::clone(hit));
        }
        let items: Rc<[Item]> = self.read_items(manifest)?.into();
        self.cache.insert(manifest.to_string(), Rc::clone(&items));
        Ok(items)
    }

    fn read_items(&self, manifest: &str) -> Result<Vec<Item>, ImageError> {
        let Ok(hex) = sha256_hex(manifest) else {
            tracing::warn!(manifest, "image GC: malformed manifest digest in the index");
            return Ok(Vec::new());
        };
        let mut items = vec![Item::Blob(hex.to_string())];
        let Some(m) = self.read_json::<Manifest>(manifest, "manifest")? else {
            return Ok(items);
        };
        let blob = |d: &str| sha256_hex(d).ok().map(|h| Item::Blob(h.to_string()));
        items.extend(blob(&m.config.digest));
        items.extend(m.layers.iter().filter_map(|l| blob(&l.digest)));
        let Some(c) = self.read_json::<Config>(&m.config.digest, "config")? else {
            return Ok(items);
        };
        for chain in chain_ids(&c.rootfs.diff_ids) {
            if let Ok(h) = sha256_hex(&chain) {
                items.push(Item::Snapshot(h.to_string()));
            }
        }
        Ok(items)
    }

    fn read_json<T: for<'de> Deserialize<'de>>(
        &self,
        digest: &str,
        what: &str,
    ) -> Result<Option<T>, ImageError> {
        let Ok(hex) = sha256_hex(digest) else {
            return Ok(None);
        };
        let path = self.dirs.blobs.join(hex);
        let data = match read_limited(&path)? {
            Fetched::Bytes(d) => d,
            Fetched::Absent => {
                tracing::warn!(
                    digest,
                    "image GC: {what} blob is missing; the image is broken"
                );
                return Ok(None);
            }
        };
        match serde_json::from_slice(&data) {
            Ok(v) => Ok(Some(v)),
            Err(e) => {
                tracing::warn!(digest, error = %e, "image GC: cannot parse {what}; the image is broken");
                Ok(None)
            }
        }
    }
}

fn read_limited(path: &Path) -> Result<Fetched, ImageError> {
    let file = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Fetched::Absent),
        Err(e) => return Err(ImageError::io("open", path, e)),
    };
    let mut buf = Vec::new();
    file.take(MAX_JSON)
        .read_to_end(&mut buf)
        .ctx("read", path)?;
    Ok(Fetched::Bytes(buf))
}

fn is_hex64(name: &str) -> bool {
    name.len() == 64 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Every blob and snapshot on disk. Temps (`tmp-…`: writes and unpacks in progress,
/// GC's own trash) and anything else not named by a digest are never listed.
pub(crate) fn on_disk(dirs: &Dirs) -> Result<Vec<Item>, ImageError> {
    let mut out = Vec::new();
    for (dir, snapshot) in [(&dirs.blobs, false), (&dirs.snapshots, true)] {
        let entries = match fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(ImageError::io("list", dir, e)),
        };
        for entry in entries {
            let entry = entry.ctx("list", dir)?;
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if is_hex64(&name) {
                out.push(if snapshot {
                    Item::Snapshot(name)
                } else {
                    Item::Blob(name)
                });
            }
        }
    }
    Ok(out)
}

/// Snapshots that are a lower dir of a mounted overlay on this host (a container's
/// rootfs): never deleted, whatever the in-use set says.
pub(crate) fn mounted_snapshots() -> HashSet<String> {
    let Ok(info) = fs::read_to_string("/proc/self/mountinfo") else {
        return HashSet::new();
    };
    mounted_snapshots_in(&info)
}

fn mounted_snapshots_in(mountinfo: &str) -> HashSet<String> {
    let mut out = HashSet::new();
    for line in mountinfo.lines() {
        // "… - overlay overlay rw,lowerdir=…"
        let Some((_, tail)) = line.split_once(" - ") else {
            continue;
        };
        if !tail.starts_with("overlay ") {
            continue;
        }
        let mut rest = tail;
        while let Some(i) = rest.find("/snapshots/") {
            rest = &rest[i + "/snapshots/".len()..];
            if let Some(hex) = rest.get(..64).filter(|h| is_hex64(h)) {
                out.insert(hex.to_string());
            }
        }
    }
    out
}

/// Disk space an item takes (allocated blocks; hard links inside a snapshot counted
/// once). 0 if it is gone.
pub(crate) fn disk_usage(path: &Path) -> u64 {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(_) => return 0,
    };
    if !meta.is_dir() {
        return meta.blocks() * 512;
    }
    let mut seen = HashSet::new();
    let mut total = 0u64;
    let mut stack = vec![path.to_path_buf()];
    let dev = meta.dev();
    total += meta.blocks() * 512;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(m) = entry.metadata() else { continue };
            if m.dev() != dev {
                continue;
            }
            if m.nlink() > 1 && !m.is_dir() && !seen.insert(m.ino()) {
                continue;
            }
            total += m.blocks() * 512;
            if m.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    total
}

/// Deletes `items`, returning the bytes freed (from `size`, measured before). A
/// snapshot is first renamed to a `tmp-<pid>-…` name, so that a crash part-way never
/// leaves a half-deleted snapshot under its real name (a later load would take it for
/// complete); the store's `open()` removes such leftovers. Failures are logged and
/// skipped: what was not deleted is still there, whole, and unreferenced.
pub(crate) fn delete(dirs: &Dirs, items: &[Item], size: &mut dyn FnMut(&Item) -> u64) -> u64 {
    let mut freed = 0u64;
    let (mut blobs, mut snapshots) = (false, false);
    for (n, item) in items.iter().enumerate() {
        let bytes = size(item);
        let path = dirs.path(item);
        let result = match item {
            Item::Blob(_) => {
                blobs = true;
                fs::remove_file(&path)
            }
            Item::Snapshot(_) => {
                snapshots = true;
                let trash = dirs.snapshots.join(temp_name("gc"));
                fs::rename(&path, &trash).and_then(|()| fs::remove_dir_all(&trash))
            }
        };
        match result {
            Ok(()) => {
                freed += bytes;
                tracing::debug!(path = %path.display(), bytes, "image GC: deleted");
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "image GC: cannot delete");
            }
        }
        if (n + 1) % 500 == 0 {
            tracing::info!(
                done = n + 1,
                of = items.len(),
                freed,
                "image GC: deleting content"
            );
        }
    }
    for (dir, touched) in [(&dirs.blobs, blobs), (&dirs.snapshots, snapshots)] {
        if !touched {
            continue;
        }
        if let Err(e) = fsync_dir(dir) {
            tracing::warn!(error = %e, "image GC: fsync after deletion failed");
        }
    }
    freed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlay_lower_dirs_are_found_in_mountinfo() {
        let a = "a".repeat(64);
        let b = "b".repeat(64);
        let c = "c".repeat(64);
        let info = format!(
            "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n\
             90 30 0:50 / /var/lib/podhost/pods/x/containers/c/0/rootfs rw,relatime - overlay overlay \
             rw,lowerdir=/var/lib/podhost/snapshots/{a}:/var/lib/podhost/snapshots/{b},upperdir=/u,workdir=/w\n\
             91 30 0:51 / /srv/snapshots/{c} rw - ext4 /dev/sda rw\n"
        );
        let found = mounted_snapshots_in(&info);
        assert_eq!(found, HashSet::from([a, b]));
    }

    #[test]
    fn disk_usage_counts_hard_links_once() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("snap");
        fs::create_dir_all(d.join("sub")).unwrap();
        fs::write(d.join("sub/f"), vec![1u8; 64 * 1024]).unwrap();
        let one = disk_usage(&d);
        fs::hard_link(d.join("sub/f"), d.join("g")).unwrap();
        assert_eq!(disk_usage(&d), one);
        assert!(one >= 64 * 1024);
        assert_eq!(disk_usage(&dir.path().join("absent")), 0);
    }

    #[test]
    fn only_digest_names_are_listed() {
        let dir = tempfile::tempdir().unwrap();
        let dirs = Dirs::new(dir.path());
        fs::create_dir_all(&dirs.blobs).unwrap();
        fs::create_dir_all(&dirs.snapshots).unwrap();
        let h = "0".repeat(64);
        fs::write(dirs.blobs.join(&h), b"x").unwrap();
        fs::write(dirs.blobs.join("tmp-1-2-blob"), b"x").unwrap();
        fs::create_dir(dirs.snapshots.join(&h)).unwrap();
        fs::create_dir(dirs.snapshots.join("tmp-1-3-snapshot")).unwrap();
        let mut items = on_disk(&dirs).unwrap();
        items.sort();
        assert_eq!(items, vec![Item::Blob(h.clone()), Item::Snapshot(h)]);
    }
}
