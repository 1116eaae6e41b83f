//! The kubelet's AtomicWriter, re-done: a volume dir holds the payload in a
//! timestamped `..<time>` dir, `..data` links to it, and each top-level name the user
//! sees is a link `name -> ..data/name`. An update writes a whole new payload dir,
//! points `..data_tmp` at it and renames that over `..data` (one atomic step), then
//! fixes the top-level links and removes the old payload. A reader that resolves a
//! path sees the old or the new file, complete.
//!
//! The writer works only inside `dir`: it never follows a symlink it did not make
//! (payload files are created with O_EXCL|O_NOFOLLOW in a dir it just created, `..data`
//! must point at a `..` sibling, removal does not follow links), and entries that are
//! not its own make it stop with an error instead of being overwritten.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::fs;
use std::io::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::{ContentError, FileSet, ProjectedFile};

const DATA: &str = "..data";
const DATA_TMP: &str = "..data_tmp";
/// The kubelet's limits on a payload path and each of its names.
const MAX_PATH: usize = 4096;
const MAX_NAME: usize = 255;

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

fn io_err(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ContentError {
    let path = path.to_path_buf();
    move |source| ContentError::Io { op, path, source }
}

/// Makes `dir` hold exactly `files` (see the module comment), with the group
/// `fs_group` and group read access when given (the kubelet's fsGroup ownership for a
/// read-only volume). Returns false when the payload was already there (no swap).
pub fn write_atomically(
    dir: &Path,
    files: &FileSet,
    fs_group: Option<u32>,
) -> Result<bool, ContentError> {
    let meta = fs::symlink_metadata(dir).map_err(io_err("inspect", dir))?;
    if !meta.is_dir() {
        return Err(ContentError::Foreign {
            dir: dir.to_path_buf(),
            entry: dir.display().to_string(),
            what: "not a directory",
        });
    }
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
                f.mode | 0o440
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
    let current = current_payload(dir)?;
    let top: BTreeSet<&str> = files
        .keys()
        .map(|p| p.split('/').next().unwrap_or(p))
        .collect();
    let unchanged = current
        .as_ref()
        .is_some_and(|name| read_payload(&dir.join(name)).is_some_and(|p| p == wanted));
    if unchanged {
        // Repair the links a crash may have left half-done; the payload stays.
        link_top_level(dir, &top)?;
        remove_stale(dir, &top, current.as_deref())?;
        return Ok(false);
    }
    let payload_name = new_payload_dir(dir)?;
    let payload = dir.join(&payload_name);
    for (path, file) in &wanted {
        write_file(&payload, path, file)?;
    }
    if let Some(gid) = fs_group {
        set_group(dir, gid, true)?;
        set_group_tree(&payload, gid)?;
    }
    // The swap: ..data_tmp -> new payload, renamed over ..data.
    let tmp = dir.join(DATA_TMP);
    match fs::symlink_metadata(&tmp) {
        Ok(m) if m.file_type().is_symlink() => {
            fs::remove_file(&tmp).map_err(io_err("remove", &tmp))?
        }
        Ok(_) => {
            return Err(ContentError::Foreign {
                dir: dir.to_path_buf(),
                entry: DATA_TMP.into(),
                what: "not a symlink",
            });
        }
        Err(_) => {}
    }
    std::os::unix::fs::symlink(&payload_name, &tmp).map_err(io_err("create symlink", &tmp))?;
    fs::rename(&tmp, dir.join(DATA)).map_err(io_err("rename ..data_tmp over ..data in", dir))?;
    link_top_level(dir, &top)?;
    remove_stale(dir, &top, Some(&payload_name))?;
    Ok(true)
}

/// The payload dir `..data` points at, if it is a `..` sibling dir.
fn current_payload(dir: &Path) -> Result<Option<String>, ContentError> {
    let link = dir.join(DATA);
    let target = match fs::read_link(&link) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(_) => {
            return Err(ContentError::Foreign {
                dir: dir.to_path_buf(),
                entry: DATA.into(),
                what: "not a symlink",
            });
        }
    };
    let name = target.as_os_str().as_bytes();
    let ours = name.starts_with(b"..")
        && !name.contains(&b'/')
        && name != b".."
        && name != DATA.as_bytes();
    if !ours {
        return Err(ContentError::Foreign {
            dir: dir.to_path_buf(),
            entry: DATA.into(),
            what: "a link that does not point at a payload dir beside it",
        });
    }
    let name = String::from_utf8_lossy(name).into_owned();
    let is_dir = fs::symlink_metadata(dir.join(&name)).is_ok_and(|m| m.is_dir());
    Ok(is_dir.then_some(name))
}

/// The files under `root` with their modes, or None when anything there is not a
/// plain file or dir (then the payload is rewritten rather than trusted).
fn read_payload(root: &Path) -> Option<FileSet> {
    fn walk(root: &Path, rel: &str, out: &mut FileSet) -> Option<()> {
        let here = if rel.is_empty() {
            root.to_path_buf()
        } else {
            root.join(rel)
        };
        for entry in fs::read_dir(&here).ok()? {
            let entry = entry.ok()?;
            let name = entry.file_name().into_string().ok()?;
            let path = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let meta = fs::symlink_metadata(entry.path()).ok()?;
            if meta.is_dir() {
                walk(root, &path, out)?;
            } else if meta.is_file() {
                let data = fs::read(entry.path()).ok()?;
                out.insert(
                    path,
                    ProjectedFile {
                        data,
                        mode: meta.permissions().mode() & 0o777,
                    },
                );
            } else {
                return None;
            }
        }
        Some(())
    }
    let mut out = BTreeMap::new();
    walk(root, "", &mut out)?;
    Some(out)
}

/// Creates a fresh `..<UTC time>.<n>` dir in `dir`, mode 0755 whatever the umask.
fn new_payload_dir(dir: &Path) -> Result<String, ContentError> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let stamp = chrono::Utc::now().format("%Y_%m_%d_%H_%M_%S");
    loop {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let name = format!("..{stamp}.{}{n:06}", std::process::id());
        let path = dir.join(&name);
        match fs::create_dir(&path) {
            Ok(()) => {
                fs::set_permissions(&path, fs::Permissions::from_mode(0o755))
                    .map_err(io_err("chmod", &path))?;
                return Ok(name);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io_err("create directory", &path)(e)),
        }
    }
}

/// Writes one file below the fresh payload dir, creating its parent dirs (0755).
fn write_file(payload: &Path, rel: &str, file: &ProjectedFile) -> Result<(), ContentError> {
    let mut parent = payload.to_path_buf();
    let elements: Vec<&str> = rel.split('/').collect();
    for element in &elements[..elements.len() - 1] {
        parent.push(element);
        match fs::create_dir(&parent) {
            Ok(()) => fs::set_permissions(&parent, fs::Permissions::from_mode(0o755))
                .map_err(io_err("chmod", &parent))?,
            // Made for an earlier file of this payload; a symlink would not be a dir here.
            Err(_) if fs::symlink_metadata(&parent).is_ok_and(|m| m.is_dir()) => {}
            Err(e) => return Err(io_err("create directory", &parent)(e)),
        }
    }
    let path = payload.join(rel);
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(file.mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(io_err("create", &path))?;
    f.write_all(&file.data).map_err(io_err("write", &path))?;
    // The umask must not narrow the mode the pod asked for.
    f.set_permissions(fs::Permissions::from_mode(file.mode))
        .map_err(io_err("chmod", &path))?;
    Ok(())
}

/// fsGroup on a read-only volume: group `gid`, group read (and search on dirs, with
/// setgid so new entries inherit the group), as the kubelet's SetVolumeOwnership.
fn set_group(path: &Path, gid: u32, is_dir: bool) -> Result<(), ContentError> {
    std::os::unix::fs::lchown(path, None, Some(gid)).map_err(io_err("chown", path))?;
    let mode = fs::symlink_metadata(path)
        .map_err(io_err("inspect", path))?
        .permissions()
        .mode()
        & 0o7777;
    let add = if is_dir {
        0o2000 | 0o440 | 0o110
    } else {
        0o440
    };
    fs::set_permissions(path, fs::Permissions::from_mode(mode | add)).map_err(io_err("chmod", path))
}

fn set_group_tree(root: &Path, gid: u32) -> Result<(), ContentError> {
    set_group(root, gid, true)?;
    for entry in fs::read_dir(root).map_err(io_err("read", root))? {
        let path = entry.map_err(io_err("read", root))?.path();
        let meta = fs::symlink_metadata(&path).map_err(io_err("inspect", &path))?;
        if meta.is_dir() {
            set_group_tree(&path, gid)?;
        } else {
            set_group(&path, gid, false)?;
        }
    }
    Ok(())
}

/// Each top-level name as `name -> ..data/name`.
fn link_top_level(dir: &Path, top: &BTreeSet<&str>) -> Result<(), ContentError> {
    for name in top {
        let link = dir.join(name);
        let target = PathBuf::from(DATA).join(name);
        match fs::read_link(&link) {
            Ok(t) if t == target => continue,
            Ok(_) => {
                // Ours from an older layout or a torn run: replace atomically.
                let tmp = dir.join(format!("{DATA_TMP}.{name}"));
                let _ = fs::remove_file(&tmp);
                std::os::unix::fs::symlink(&target, &tmp)
                    .map_err(io_err("create symlink", &tmp))?;
                fs::rename(&tmp, &link).map_err(io_err("replace", &link))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::os::unix::fs::symlink(&target, &link)
                    .map_err(io_err("create symlink", &link))?;
            }
            Err(_) => {
                return Err(ContentError::Foreign {
                    dir: dir.to_path_buf(),
                    entry: (*name).to_string(),
                    what: "a file or directory where the payload's link belongs",
                });
            }
        }
    }
    Ok(())
}

/// Removes links to names no longer in the payload and every payload dir but `keep`.
/// Entries that are not the writer's are left alone.
fn remove_stale(dir: &Path, top: &BTreeSet<&str>, keep: Option<&str>) -> Result<(), ContentError> {
    for entry in fs::read_dir(dir).map_err(io_err("read", dir))? {
        let entry = entry.map_err(io_err("read", dir))?;
        let name = entry.file_name();
        let bytes = name.as_bytes();
        let path = entry.path();
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        if bytes.starts_with(b"..") {
            let special = name == OsStr::new(DATA)
                || name == OsStr::new(DATA_TMP)
                || Some(name.as_os_str()) == keep.map(OsStr::new);
            if !special && meta.is_dir() {
                // Does not follow symlinks inside (std's remove_dir_all).
                fs::remove_dir_all(&path).map_err(io_err("remove old payload", &path))?;
            } else if !special
                && meta.file_type().is_symlink()
                && bytes.starts_with(DATA_TMP.as_bytes())
            {
                fs::remove_file(&path).map_err(io_err("remove", &path))?;
            }
            continue;
        }
        let still_wanted = name.to_str().is_some_and(|n| top.contains(n));
        let ours = meta.file_type().is_symlink()
            && fs::read_link(&path).is_ok_and(|t| t.starts_with(DATA));
        if !still_wanted && ours {
            fs::remove_file(&path).map_err(io_err("remove", &path))?;
        } else if !still_wanted {
            tracing::warn!(dir = %dir.display(), entry = %name.to_string_lossy(), "a content volume holds an entry that is not podhost's; left in place");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
