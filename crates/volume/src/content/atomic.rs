//! The kubelet's AtomicWriter, re-done: a volume dir holds the payload in a
//! timestamped `..<time>` dir, `..data` links to it, and each top-level name the user
//! sees is a link `name -> ..data/name`. An update writes a whole new payload dir,
//! points `..data_tmp` at it and renames that over `..data` (one atomic step), then
//! fixes the top-level links and removes the old payload. A reader that resolves a
//! path sees the old or the new file, complete.
//!
//! The writer works only inside `dir`, through the rooted layer: every call is made
//! relative to a handle of `dir` (or of a payload dir it just made), never following a
//! symlink, so a container that swaps a payload dir or any entry for a link gets the
//! call refused, never a host file written or chmodded. Whether the payload changed is
//! decided by a digest of what podhost itself last wrote, kept in a root-only record
//! outside the volume: nothing a container wrote is ever read back. Entries that are not
//! the writer's make it stop with an error instead of being overwritten.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use nix::errno::Errno;
use nix::fcntl::Flock;
use sha2::{Digest, Sha256};

use super::{ContentError, FileSet, ProjectedFile};
use podhost_rooted::{EntryKind, GroupBits, RootedDir, set_group_tree};

const DATA: &str = "..data";
const DATA_TMP: &str = "..data_tmp";
/// The kubelet's limits on a payload path and each of its names.
const MAX_PATH: usize = 4096;
const MAX_NAME: usize = 255;
/// fsGroup on a read-only volume: group read, and search plus setgid on dirs.
const GROUP_READ: GroupBits = GroupBits {
    dir: 0o2000 | 0o440 | 0o110,
    file: 0o440,
};

/// A payload path is relative, has no `.`/`..` or empty element, and no element
/// starting with `..` (those names are the writer's own). What is wrong, if anything.
pub(super) fn path_problem(path: &str) -> Option<String> {
    if path.is_empty() {
        return Some("must not be empty".into());
    }
    if path.starts_with('/') {
        return Some("must be a relative path".into());
    }
    if path.len() > MAX_PATH {
        return Some(format!("must be at most {MAX_PATH} characters"));
    }
    path.split('/').find_map(|element| {
        if element.is_empty() || element == "." {
            Some("must not contain empty or '.' elements".to_string())
        } else if element.starts_with("..") {
            Some("must not contain '..' or elements starting with '..'".into())
        } else if element.len() > MAX_NAME {
            Some(format!("file names must be at most {MAX_NAME} characters"))
        } else if element.contains('\0') {
            Some("must not contain NUL".into())
        } else {
            None
        }
    })
}

fn foreign(dir: &RootedDir, entry: &str, what: &'static str) -> ContentError {
    ContentError::Foreign {
        dir: dir.path().to_path_buf(),
        entry: entry.to_string(),
        what,
    }
}

/// What podhost last wrote into a volume: the digest of its payload (files, modes,
/// group) and the payload dir holding it. Kept in a root-only file outside the volume.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PayloadRecord {
    digest: String,
    payload: String,
}

impl PayloadRecord {
    fn read(path: &Path) -> Option<Self> {
        // not a container's path: the record lives in the pod dir, root-only
        let text = std::fs::read_to_string(path).ok()?;
        let (digest, payload) = text.trim_end().split_once(' ')?;
        Some(Self {
            digest: digest.to_string(),
            payload: payload.to_string(),
        })
    }

    fn write(&self, path: &Path) -> Result<(), ContentError> {
        podhost_disk::atomic::write_atomic(
            path,
            format!("{} {}\n", self.digest, self.payload).as_bytes(),
        )
        .map_err(|e| ContentError::Io {
            op: "record the payload in",
            path: path.to_path_buf(),
            source: std::io::Error::other(e),
        })
    }
}

/// An exclusive lock on `<record>.lock` (beside the record, root-only), held while the
/// returned guard lives.
fn lock_writer(record: &Path) -> Result<Flock<File>, ContentError> {
    let path = record.with_extension("lock");
    let io = |op: &'static str| {
        let path = path.clone();
        move |source| ContentError::Io { op, path, source }
    };
    if let Some(dir) = path.parent() {
        // not a container's path: the pod dir's content-payloads dir, root-only
        std::fs::create_dir_all(dir).map_err(io("create the directory of"))?;
    }
    // not a container's path: as above
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io("open"))?;
    Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| io("lock")(std::io::Error::from(e)))
}

/// The digest of a payload as it will be written: paths, modes, data and the group.
fn digest_of(files: &FileSet, fs_group: Option<u32>) -> String {
    let mut h = Sha256::new();
    h.update(format!("group {fs_group:?}\n"));
    for (path, f) in files {
        h.update(format!("{path}\0{:o}\0{}\0", f.mode, f.data.len()));
        h.update(&f.data);
    }
    hex::encode(h.finalize())
}

/// Makes `dir` hold exactly `files` (see the module comment), with the group
/// `fs_group` and group read access when given (the kubelet's fsGroup ownership for a
/// read-only volume). `record`: where what was written is remembered (a root-only
/// place, never inside `dir`). Returns false when the payload was already there (no
/// swap).
pub fn write_atomically(
    dir: &Path,
    files: &FileSet,
    fs_group: Option<u32>,
    record: &Path,
) -> Result<bool, ContentError> {
    write_through(&podhost_rooted::sys::LINUX, dir, files, fs_group, record)
}

/// [`write_atomically`] through `kernel` (the tests' adversary).
fn write_through(
    kernel: &'static dyn podhost_rooted::sys::DirKernel,
    dir: &Path,
    files: &FileSet,
    fs_group: Option<u32>,
    record: &Path,
) -> Result<bool, ContentError> {
    // One writer at a time per volume: a container's start fills the volume while the
    // refresher may be writing it; two interleaved swaps would each remove the other's
    // payload as stale and leave `..data` dangling.
    let _writer = lock_writer(record)?;
    let root = RootedDir::open_with(kernel, dir)?;
    let unsafe_path = |path: &str, reason: String| ContentError::UnsafePath {
        dir: dir.to_path_buf(),
        path: path.into(),
        reason,
    };
    for path in files.keys() {
        if let Some(reason) = path_problem(path) {
            return Err(unsafe_path(path, reason));
        }
    }
    // A file cannot also be a directory of another file.
    for path in files.keys() {
        let mut prefix = path.as_str();
        while let Some((parent, _)) = prefix.rsplit_once('/') {
            if files.contains_key(parent) {
                return Err(unsafe_path(
                    path,
                    format!("{parent:?} is a file of the payload too"),
                ));
            }
            prefix = parent;
        }
    }
    let wanted: FileSet = files
        .iter()
        .map(|(p, f)| {
            let mode = if fs_group.is_some() {
                f.mode | GROUP_READ.file
            } else {
                f.mode
            };
            (
                p.clone(),
                ProjectedFile {
                    data: f.data.clone(),
                    mode,
                },
            )
        })
        .collect();
    let digest = digest_of(&wanted, fs_group);
    let current = current_payload(&root)?;
    let top: BTreeSet<&str> = files
        .keys()
        .map(|p| p.split('/').next().unwrap_or(p))
        .collect();
    let unchanged = current.as_ref().is_some_and(|name| {
        PayloadRecord::read(record).is_some_and(|r| r.digest == digest && &r.payload == name)
    });
    if unchanged {
        // Repair the links a crash may have left half-done; the payload stays.
        link_top_level(&root, &top)?;
        remove_stale(&root, &top, current.as_deref())?;
        return Ok(false);
    }
    let payload_name = new_payload_dir(&root)?;
    let payload = root.open_dir(&payload_name)?;
    for (path, file) in &wanted {
        write_file(&payload, path, file)?;
    }
    if let Some(gid) = fs_group {
        root.add_group(gid, GROUP_READ.dir)?;
        set_group_tree(&payload, gid, GROUP_READ)?;
    }
    // The swap: ..data_tmp -> new payload, renamed over ..data.
    match root.kind(DATA_TMP)? {
        Some(EntryKind::Symlink) => root.remove_file(DATA_TMP)?,
        Some(_) => return Err(foreign(&root, DATA_TMP, "not a symlink")),
        None => {}
    }
    root.symlink(&payload_name, DATA_TMP)?;
    root.rename(DATA_TMP, DATA)?;
    PayloadRecord {
        digest,
        payload: payload_name.clone(),
    }
    .write(record)?;
    link_top_level(&root, &top)?;
    remove_stale(&root, &top, Some(&payload_name))?;
    Ok(true)
}

/// A payload dir name: `..` and no `/`, and not one of the writer's link names.
fn is_payload_name(name: &str) -> bool {
    name.starts_with("..") && !name.contains('/') && name != ".." && name != DATA
}

/// The payload dir `..data` points at, if it is a `..` sibling dir.
fn current_payload(root: &RootedDir) -> Result<Option<String>, ContentError> {
    let target = match root.read_link(DATA) {
        Ok(Some(t)) => t,
        Ok(None) => return Ok(None),
        Err(e) if e.errno() == Some(Errno::EINVAL) => {
            return Err(foreign(root, DATA, "not a symlink"));
        }
        Err(e) => return Err(e.into()),
    };
    let Some(name) = target.to_str().filter(|n| is_payload_name(n)) else {
        return Err(foreign(
            root,
            DATA,
            "a link that does not point at a payload dir beside it",
        ));
    };
    let is_dir = root.kind(name)? == Some(EntryKind::Dir);
    Ok(is_dir.then(|| name.to_string()))
}

/// Creates a fresh `..<UTC time>.<n>` dir in `root`, mode 0755 whatever the umask.
fn new_payload_dir(root: &RootedDir) -> Result<String, ContentError> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let stamp = chrono::Utc::now().format("%Y_%m_%d_%H_%M_%S");
    loop {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let name = format!("..{stamp}.{}{n:06}", std::process::id());
        // Something already there (a name a container guessed) is never reused.
        if let (_, true) = root.make_dir_created(&name, 0o755)? {
            return Ok(name);
        }
    }
}

/// Writes one file below the fresh payload dir, creating its parent dirs (0755).
fn write_file(payload: &RootedDir, rel: &str, file: &ProjectedFile) -> Result<(), ContentError> {
    let dir = match rel.rsplit_once('/') {
        Some((parent, _)) => payload.make_dir_all(parent, 0o755)?,
        None => payload.clone(),
    };
    let name = rel.rsplit('/').next().unwrap_or(rel);
    dir.create_file(name, &file.data, file.mode, None)?;
    Ok(())
}

/// Each top-level name as `name -> ..data/name`.
fn link_top_level(root: &RootedDir, top: &BTreeSet<&str>) -> Result<(), ContentError> {
    for name in top {
        let target = format!("{DATA}/{name}");
        match root.read_link(name) {
            Ok(Some(t)) if t == target.as_str() => continue,
            Ok(Some(_)) => {
                // Ours from an older layout or a torn run: replace atomically.
                let tmp = format!("{DATA_TMP}.{name}");
                root.remove_file(&tmp)?;
                root.symlink(&target, &tmp)?;
                root.rename(&tmp, name)?;
            }
            Ok(None) => root.symlink(&target, name)?,
            Err(e) if e.errno() == Some(Errno::EINVAL) => {
                return Err(foreign(
                    root,
                    name,
                    "a file or directory where the payload's link belongs",
                ));
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Removes links to names no longer in the payload and every payload dir but `keep`.
/// Entries that are not the writer's are left alone.
fn remove_stale(
    root: &RootedDir,
    top: &BTreeSet<&str>,
    keep: Option<&str>,
) -> Result<(), ContentError> {
    for name in root.entries()? {
        let Some(name) = name.to_str() else {
            tracing::warn!(dir = %root.path().display(), entry = %name.to_string_lossy(), "a content volume holds an entry that is not podhost's; left in place");
            continue;
        };
        let Some(kind) = root.kind(name)? else {
            continue;
        };
        if name.starts_with("..") {
            let special = name == DATA || name == DATA_TMP || Some(name) == keep;
            if !special && kind == EntryKind::Dir {
                // Through handles: links inside are removed, never followed.
                root.remove_tree(name)?;
            } else if !special && kind == EntryKind::Symlink && name.starts_with(DATA_TMP) {
                root.remove_file(name)?;
            }
            continue;
        }
        let still_wanted = top.contains(name);
        let ours = kind == EntryKind::Symlink
            && root
                .read_link(name)?
                .is_some_and(|t| t.to_str().is_some_and(|t| t.starts_with(DATA)));
        if !still_wanted && ours {
            root.remove_file(name)?;
        } else if !still_wanted {
            tracing::warn!(dir = %root.path().display(), entry = %name, "a content volume holds an entry that is not podhost's; left in place");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
