//! The image store's temp files: names that carry the writer's pid, directory fsync,
//! and removal of temps left by dead writers (atomic writes are `disk::write_atomic_via`).

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::error::{ImageError, IoContext};
use podhost_disk::proc_start::{changed_at, writer_may_live};

/// Prefix of every temp file and directory the store creates.
pub(crate) const TEMP_PREFIX: &str = "tmp-";

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh temp name `tmp-<pid>-<n>-<what>`; unique within the process, and the pid
/// tells a later `open()` whether its writer is still alive.
pub(crate) fn temp_name(what: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{TEMP_PREFIX}{}-{n}-{what}", std::process::id())
}

/// fsyncs a directory so that renames and creations in it are durable.
pub(crate) fn fsync_dir(dir: &Path) -> Result<(), ImageError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .ctx("fsync directory", dir)
}

/// Creates a new file (fails if it exists) with `mode`.
pub(crate) fn create_new(path: &Path, mode: u32) -> Result<File, ImageError> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .ctx("create", path)
}

/// Creates `dir` (and parents) if missing.
pub(crate) fn ensure_dir(dir: &Path) -> Result<(), ImageError> {
    fs::create_dir_all(dir).ctx("create directory", dir)
}

/// The pid encoded in a temp name, if it is one of ours.
fn temp_owner(name: &str) -> Option<i32> {
    name.strip_prefix(TEMP_PREFIX)?
        .split('-')
        .next()?
        .parse()
        .ok()
}

/// Removes every `tmp-<pid>-…` entry of `dir` whose writer is no longer running (no
/// process has its pid, or the one that has it started after the entry last changed).
/// Temps of live processes (a concurrent `podhost load`) are left alone.
/// Returns the paths removed.
pub(crate) fn remove_stale_temps(dir: &Path) -> Result<Vec<PathBuf>, ImageError> {
    let mut removed = Vec::new();
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(removed),
        Err(e) => return Err(ImageError::io("list", dir, e)),
    };
    for entry in entries {
        let entry = entry.ctx("list", dir)?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(pid) = temp_owner(name) else {
            continue;
        };
        let path = entry.path();
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(ImageError::io("stat", &path, e)),
        };
        // A process at the pid that started after the temp last changed is a later
        // owner of the number, not the writer.
        if writer_may_live(pid, changed_at(&meta)) {
            continue;
        }
        let is_dir = meta.is_dir();
        if is_dir {
            fs::remove_dir_all(&path).ctx("remove stale temp directory", &path)?;
        } else {
            fs::remove_file(&path).ctx("remove stale temp file", &path)?;
        }
        removed.push(path);
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_carry_the_pid_and_are_unique() {
        let a = temp_name("x");
        let b = temp_name("x");
        assert_ne!(a, b);
        assert_eq!(temp_owner(&a), Some(std::process::id() as i32));
        assert_eq!(temp_owner("blobs"), None);
    }

    #[test]
    fn stale_temps_are_removed_live_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join(temp_name("live"));
        fs::write(&live, b"x").unwrap();
        // pid_max is at most 2^22, so this pid cannot exist.
        let dead = dir.path().join(format!("{TEMP_PREFIX}99999999-0-dead"));
        fs::create_dir(&dead).unwrap();
        fs::write(dead.join("f"), b"x").unwrap();
        let other = dir.path().join("keep");
        fs::write(&other, b"x").unwrap();
        let removed = remove_stale_temps(dir.path()).unwrap();
        assert_eq!(removed, vec![dead.clone()]);
        assert!(live.exists() && other.exists() && !dead.exists());
    }
}
