//! Crash-safe file writes: temp file, fsync, rename, fsync the directory. The one
//! implementation every module uses (state records, the image index, the OOM cursor).

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
}
