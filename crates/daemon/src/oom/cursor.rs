//! Where the kmsg watcher stopped: the last handled sequence number of this boot.
//!
//! `/dev/kmsg` sequence numbers restart at 0 on every boot, so the number is saved with
//! the boot id. A restarted watcher re-reads the whole ring buffer, feeds the records up
//! to the saved number to the parser for context only, and reports nothing from them.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::OomError;

/// The kernel's random id of the running boot.
pub const BOOT_ID_PATH: &str = "/proc/sys/kernel/random/boot_id";

/// The persisted position of the kmsg watcher.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KmsgCursor {
    /// The boot the sequence number belongs to.
    pub boot_id: String,
    /// Every record up to and including this one has been handled.
    pub seq: u64,
}

impl KmsgCursor {
    /// Reads the cursor file; `Ok(None)` when it does not exist.
    pub fn load(path: &Path) -> Result<Option<Self>, OomError> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(OomError::ReadCursor {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| OomError::DecodeCursor {
                path: path.to_path_buf(),
                source,
            })
    }

    /// Writes the cursor atomically: a temp file in the same directory, fsync, rename,
    /// fsync of the directory. A crash leaves the old or the new cursor, never a torn one.
    pub fn save(&self, path: &Path) -> Result<(), OomError> {
        let err = |source| OomError::WriteCursor {
            path: path.to_path_buf(),
            source,
        };
        let json = serde_json::to_vec(self).map_err(|e| err(e.into()))?;
        podhost_disk::write_atomic_via(&temp_path(path), path, &json).map_err(|e| match e {
            podhost_disk::DiskError::Io { source, .. } => err(source),
            podhost_disk::DiskError::Json { source, .. } => err(source.into()),
        })?;
        Ok(())
    }

    /// The last handled sequence number, if the cursor belongs to the running boot.
    /// After a reboot (or with an unknown boot id) everything is new.
    pub fn resume_after(&self, boot_id: &str) -> Option<u64> {
        (!boot_id.is_empty() && self.boot_id == boot_id).then_some(self.seq)
    }
}

/// True when a record or event with sequence number `seq` was not handled before.
pub fn is_new(resume_after: Option<u64>, seq: u64) -> bool {
    resume_after.is_none_or(|after| seq > after)
}

/// Reads the boot id (normally from [`BOOT_ID_PATH`]), trimmed.
pub fn read_boot_id(path: &Path) -> Result<String, OomError> {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|source| OomError::BootId {
            path: path.to_path_buf(),
            source,
        })
}

/// `<dir>/.<name>.tmp`: same filesystem, so the rename is atomic.
fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "cursor".to_string());
    path.with_file_name(format!(".{name}.tmp"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cursor(boot: &str, seq: u64) -> KmsgCursor {
        KmsgCursor {
            boot_id: boot.into(),
            seq,
        }
    }

    #[test]
    fn same_boot_skips_handled_records_other_boot_does_not() {
        let c = cursor("b1", 449);
        let same = c.resume_after("b1");
        assert_eq!(same, Some(449));
        assert!(!is_new(same, 448) && !is_new(same, 449) && is_new(same, 450));
        let other = c.resume_after("b2");
        assert_eq!(other, None);
        assert!(is_new(other, 0) && is_new(other, 449));
        assert_eq!(cursor("", 5).resume_after(""), None, "unknown boot id");
    }

    #[test]
    fn save_and_load_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kmsg-cursor.json");
        assert_eq!(KmsgCursor::load(&path).unwrap(), None);
        cursor("b1", 7).save(&path).unwrap();
        cursor("b1", 9).save(&path).unwrap();
        assert_eq!(KmsgCursor::load(&path).unwrap(), Some(cursor("b1", 9)));
        assert!(!temp_path(&path).exists(), "the temp file is renamed away");
    }

    #[test]
    fn crash_mid_write_keeps_the_old_cursor() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kmsg-cursor.json");
        cursor("b1", 100).save(&path).unwrap();
        // A crash after writing half of the temp file: the cursor itself is untouched.
        std::fs::write(temp_path(&path), b"{\"boot_id\":\"b1\",\"se").unwrap();
        assert_eq!(KmsgCursor::load(&path).unwrap(), Some(cursor("b1", 100)));
        // The next save replaces the stale temp file.
        cursor("b1", 101).save(&path).unwrap();
        assert_eq!(KmsgCursor::load(&path).unwrap(), Some(cursor("b1", 101)));
    }

    #[test]
    fn torn_or_foreign_cursor_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kmsg-cursor.json");
        std::fs::write(&path, b"{\"boot_id\":").unwrap();
        let err = KmsgCursor::load(&path).unwrap_err();
        assert!(matches!(err, OomError::DecodeCursor { .. }));
        assert!(err.to_string().contains("kmsg-cursor.json"));
        let missing_dir = dir.path().join("no/such/dir/c.json");
        assert!(matches!(
            cursor("b", 1).save(&missing_dir),
            Err(OomError::WriteCursor { .. })
        ));
    }

    #[test]
    fn boot_id_is_read_and_trimmed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("boot_id");
        std::fs::write(&path, "2c7e-aa\n").unwrap();
        assert_eq!(read_boot_id(&path).unwrap(), "2c7e-aa");
        assert!(read_boot_id(&dir.path().join("nope")).is_err());
        if Path::new(BOOT_ID_PATH).exists() {
            assert!(!read_boot_id(Path::new(BOOT_ID_PATH)).unwrap().is_empty());
        }
    }
}
