//! Crash-safe file writes: temp file, fsync, rename, fsync the directory. The one
//! implementation every module uses (state records, the image index, the OOM cursor).
//!
//! Two kinds of record, by what a power loss may do to them:
//! - **Durable** ([`write_atomic`]): what must be true after the host comes back — image
//!   references, exit records, pod status, address and ID allocations. Temp, fsync,
//!   rename, fsync of the directory: a crash of the process or of the host leaves the
//!   old or the new content.
//! - **Boot-scoped** ([`write_boot_scoped`]): what only describes processes of this
//!   boot — an attempt's bundle (`config.json`), the shim's pid and start record, the
//!   stop signal, the pod's generated /etc files. Temp and rename, no fsync: a crash of
//!   the process (daemon, shim) still leaves the old or the new content, since the page
//!   cache survives it; a power loss may leave such a file empty or missing, but then
//!   every process it described is gone too, and the readers treat an unreadable
//!   boot-scoped record as "nothing runs here" (the adoption after a restart, the lost
//!   container reaper: see tests/power_loss.rs). The shim config stays durable: it is
//!   how the next daemon finds a dead attempt's leftovers (durable before the shim
//!   makes any: see `runtime::shim_client::spawn`).
//! - **Durable later** ([`write_durable_later`]): a durable record written like a
//!   boot-scoped one, whose fsyncs a [`PendingDurability`] makes afterwards: an
//!   attempt's image reference and its pod's log owner mark, fsynced while the shim
//!   starts the container, before the start is reported. A pod's start paid 30 fsyncs
//!   (each a journal commit on ext4, milliseconds on a busy disk); 10 are gone, and 2
//!   more with the image index's coarser "last used" (`ImageStore::touch`).

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::DiskError;

/// Writes `bytes` to `path` so that a crash leaves either the old or the new content.
/// The temp file sits beside `path` as `.<name>.tmp.<pid>.<seq>`, the scheme the
/// daemon's start-up sweep knows; missing parent directories are created.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), DiskError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| DiskError::io("create directory", dir, e))?;
    write_atomic_via(&sibling_temp(path), path, bytes)
}

/// [`write_atomic`] through the temp file `tmp`, for writers whose temps live elsewhere
/// (the image store's own temp dir, swept when the store opens). `tmp` must be on the
/// same filesystem as `path`, so that the rename is atomic; it is removed on failure.
pub fn write_atomic_via(tmp: &Path, path: &Path, bytes: &[u8]) -> Result<(), DiskError> {
    let result = write_then_rename(tmp, path, bytes);
    if result.is_err() {
        let _ = std::fs::remove_file(tmp);
    }
    result
}

fn write_then_rename(tmp: &Path, path: &Path, bytes: &[u8]) -> Result<(), DiskError> {
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644)
        .open(tmp)
        .map_err(|e| DiskError::io("create", tmp, e))?;
    f.write_all(bytes)
        .and_then(|_| f.sync_all())
        .map_err(|e| DiskError::io("write", tmp, e))?;
    drop(f);
    std::fs::rename(tmp, path).map_err(|e| DiskError::io("rename into", path, e))?;
    // The rename is durable only once the directory entry is.
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let dir = dir.unwrap_or(Path::new("."));
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| DiskError::io("fsync directory", dir, e))
}

/// Writes `bytes` to `path` through a sibling temp and a rename, without fsync: readers
/// see the old or the new content, also after a crash of this process, but not
/// necessarily after a power loss. Only for boot-scoped records (see the module docs).
pub fn write_boot_scoped(path: &Path, bytes: &[u8]) -> Result<(), DiskError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| DiskError::io("create directory", dir, e))?;
    let tmp = sibling_temp(path);
    let result = std::fs::write(&tmp, bytes)
        .map_err(|e| DiskError::io("write", &tmp, e))
        .and_then(|()| {
            std::fs::rename(&tmp, path).map_err(|e| DiskError::io("rename into", path, e))
        });
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Serializes `value` as JSON and writes it as a boot-scoped record.
pub fn write_json_boot_scoped<T: serde::Serialize>(
    path: &Path,
    value: &T,
) -> Result<(), DiskError> {
    let bytes = serde_json::to_vec_pretty(value).map_err(|source| DiskError::Json {
        path: path.to_path_buf(),
        source,
    })?;
    write_boot_scoped(path, &bytes)
}

/// Durable records written ahead of their fsyncs (see [`write_durable_later`]): the
/// files' and their directories' fsyncs, made by [`PendingDurability::complete`].
#[derive(Debug, Default, Clone)]
#[must_use = "the records are durable only once complete() returns"]
pub struct PendingDurability {
    files: Vec<PathBuf>,
}

impl PendingDurability {
    /// Makes every record written through this durable: each file's fsync, then one
    /// fsync per directory (the renames).
    pub fn complete(self) -> Result<(), DiskError> {
        let mut dirs: Vec<&Path> = Vec::new();
        for file in &self.files {
            std::fs::File::open(file)
                .and_then(|f| f.sync_all())
                .map_err(|e| DiskError::io("fsync", file, e))?;
            let dir = file.parent().unwrap_or(Path::new("."));
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
        for dir in dirs {
            std::fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| DiskError::io("fsync directory", dir, e))?;
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

/// A durable record whose fsyncs may wait: written as [`write_boot_scoped`] now (readers
/// see the old or the new content, also after a crash of this process), durable once
/// `pending` completes. For a container start's durable records, whose fsyncs then run
/// while the shim starts the container instead of before (the start reports Running
/// only after they completed, so a power loss in between is one during the start).
pub fn write_durable_later(
    path: &Path,
    bytes: &[u8],
    pending: &mut PendingDurability,
) -> Result<(), DiskError> {
    write_boot_scoped(path, bytes)?;
    pending.files.push(path.to_path_buf());
    Ok(())
}

/// Serializes `value` as JSON and writes it as [`write_durable_later`] does.
pub fn write_json_durable_later<T: serde::Serialize>(
    path: &Path,
    value: &T,
    pending: &mut PendingDurability,
) -> Result<(), DiskError> {
    let bytes = serde_json::to_vec_pretty(value).map_err(|source| DiskError::Json {
        path: path.to_path_buf(),
        source,
    })?;
    write_durable_later(path, &bytes, pending)
}

/// `.<name>.tmp.<pid>.<seq>` beside `path`: unique per call, since two writers of the
/// same file in one process must not share a temp.
fn sibling_temp(path: &Path) -> PathBuf {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{file_name}.tmp.{}.{seq}", std::process::id()))
}

/// Serializes `value` as JSON and writes it atomically.
pub fn write_json_atomic<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), DiskError> {
    let bytes = serde_json::to_vec_pretty(value).map_err(|source| DiskError::Json {
        path: path.to_path_buf(),
        source,
    })?;
    write_atomic(path, &bytes)
}

/// Reads a JSON file; `Ok(None)` when it does not exist.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, DiskError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| DiskError::Json {
                path: path.to_path_buf(),
                source,
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(DiskError::io("read", path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut out: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        out.sort();
        out
    }

    #[test]
    fn replaces_the_content_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("sub/f.json");
        write_atomic(&dest, b"one").unwrap();
        write_atomic(&dest, b"two").unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"two");
        assert_eq!(names(&dir.path().join("sub")), ["f.json"]);
    }

    #[test]
    fn boot_scoped_writes_replace_the_content_and_leave_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("sub/config.json");
        write_json_boot_scoped(&dest, &serde_json::json!({"a": 1})).unwrap();
        write_boot_scoped(&dest, b"two").unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"two");
        assert_eq!(names(&dir.path().join("sub")), ["config.json"]);
        // A failed rename keeps the old content and removes the temp.
        let busy = dir.path().join("busy");
        std::fs::create_dir_all(busy.join("inside")).unwrap();
        let err = write_boot_scoped(&busy, b"new").unwrap_err();
        assert!(err.to_string().contains("rename into"), "{err}");
        assert_eq!(names(dir.path()), ["busy", "sub"]);
    }

    #[test]
    fn sibling_temps_are_unique_and_carry_the_pid() {
        let a = sibling_temp(Path::new("/x/status.json"));
        let b = sibling_temp(Path::new("/x/status.json"));
        assert_ne!(a, b);
        let prefix = format!("/x/.status.json.tmp.{}.", std::process::id());
        assert!(a.to_string_lossy().starts_with(&prefix), "{}", a.display());
    }

    #[test]
    fn through_a_given_temp_the_temp_is_renamed_away() {
        let dir = tempfile::tempdir().unwrap();
        let tmp_dir = dir.path().join("tmp");
        std::fs::create_dir(&tmp_dir).unwrap();
        let dest = dir.path().join("index.json");
        write_atomic_via(&tmp_dir.join("t1"), &dest, b"one").unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"one");
        assert!(names(&tmp_dir).is_empty());
    }

    #[test]
    fn a_failed_rename_keeps_the_old_content_and_removes_the_temp() {
        let dir = tempfile::tempdir().unwrap();
        // A directory in the way: rename(file, non-empty dir) fails.
        let dest = dir.path().join("busy");
        std::fs::create_dir_all(dest.join("inside")).unwrap();
        let tmp = dir.path().join(".busy.tmp");
        let err = write_atomic_via(&tmp, &dest, b"new").unwrap_err();
        assert!(err.to_string().contains("rename into"), "{err}");
        assert!(!tmp.exists());
        assert!(dest.join("inside").is_dir());
    }

    #[test]
    fn json_round_trips_and_a_missing_file_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        assert_eq!(read_json::<Vec<u32>>(&path).unwrap(), None);
        write_json_atomic(&path, &vec![1u32, 2]).unwrap();
        assert_eq!(read_json::<Vec<u32>>(&path).unwrap(), Some(vec![1, 2]));
        std::fs::write(&path, b"{").unwrap();
        let err = read_json::<Vec<u32>>(&path).unwrap_err();
        assert!(err.to_string().contains("invalid JSON"), "{err}");
    }

    #[test]
    fn a_record_written_durable_later_is_readable_at_once_and_its_fsyncs_wait() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("x/a"), dir.path().join("x/b"));
        let mut pending = PendingDurability::default();
        assert!(pending.is_empty());
        write_durable_later(&a, b"one", &mut pending).unwrap();
        write_durable_later(&b, b"two", &mut pending).unwrap();
        assert_eq!(std::fs::read(&a).unwrap(), b"one");
        assert_eq!(names(&dir.path().join("x")), ["a", "b"], "no temp left");
        pending.clone().complete().unwrap();
        // A record gone before its fsync: the error names it.
        std::fs::remove_file(&b).unwrap();
        let err = pending.complete().unwrap_err();
        assert!(err.to_string().contains("x/b"), "{err}");
    }
}
