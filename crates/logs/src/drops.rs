//! The record of log output the writer had to drop (disk full, I/O errors).
//!
//! The shim keeps `log-drops.json` in the container's attempt directory; the daemon
//! reads it and turns a new failure into a `LogWriteFailed` pod event. The file is
//! created at the writer's start, padded to [`RECORD_BYTES`], and later rewritten in
//! place with one `pwrite` of the same size: overwriting blocks that are already
//! allocated needs no free space, so the record can be updated on the very disk that
//! is full (the attempt dir and the log dir are often on one filesystem).

use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// File name of the record in the attempt directory.
pub const LOG_DROPS_FILE: &str = "log-drops.json";
/// Fixed size of the record file (JSON padded with spaces and a final newline).
pub const RECORD_BYTES: usize = 1024;

/// What was dropped and why.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogDrops {
    /// How many times writing started to fail (after working, or from the start).
    pub failures: u64,
    /// Whether writes fail right now.
    pub failing: bool,
    /// CRI lines dropped in all.
    pub dropped_lines: u64,
    /// Bytes of CRI lines dropped in all.
    pub dropped_bytes: u64,
    /// When the latest failure began.
    pub failing_since: Option<DateTime<Utc>>,
    /// When writes worked again after the latest failure.
    pub resumed_at: Option<DateTime<Utc>>,
    /// The error of the latest failure (cut to fit the record).
    pub error: Option<String>,
    /// The log file that could not be written.
    pub log_path: PathBuf,
}

/// The writer's handle on the record file.
pub struct DropRecord {
    file: Option<File>,
    path: PathBuf,
}

impl DropRecord {
    /// Creates (or truncates) the record at `path` with an empty [`LogDrops`]. If that
    /// fails (a full disk at start), drops are still counted and logged; the record is
    /// tried again at each update.
    pub fn create(path: &Path, log_path: &Path) -> Self {
        let mut rec = DropRecord {
            file: None,
            path: path.to_path_buf(),
        };
        rec.update(&LogDrops {
            log_path: log_path.to_path_buf(),
            ..Default::default()
        });
        rec
    }

    /// Rewrites the record in place.
    pub fn update(&mut self, drops: &LogDrops) {
        if self.file.is_none() {
            self.file = std::fs::OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(false)
                .mode(0o640)
                .custom_flags(libc::O_CLOEXEC)
                .open(&self.path)
                .map_err(|e| tracing::warn!(path = %self.path.display(), error = %e, "cannot open the log drop record"))
                .ok();
        }
        let Some(file) = &self.file else { return };
        if let Err(e) = file.write_all_at(&encode(drops), 0) {
            tracing::warn!(path = %self.path.display(), error = %e, "cannot update the log drop record");
        }
    }
}

/// The record as exactly [`RECORD_BYTES`] bytes.
fn encode(drops: &LogDrops) -> Vec<u8> {
    let mut d = drops.clone();
    let mut out = serde_json::to_vec(&d).unwrap_or_default();
    // A long error or path is cut until the JSON fits.
    while out.len() > RECORD_BYTES - 1 {
        match &mut d.error {
            Some(e) if e.len() > 16 => {
                let mut cut = e.len() / 2;
                while !e.is_char_boundary(cut) {
                    cut -= 1;
                }
                e.truncate(cut);
                e.push('…');
            }
            _ => d.log_path = PathBuf::from("…"),
        }
        out = serde_json::to_vec(&d).unwrap_or_default();
    }
    out.resize(RECORD_BYTES - 1, b' ');
    out.push(b'\n');
    out
}

/// Reads a record written by [`DropRecord`]. `Ok(None)` when there is none.
pub fn read_drops(path: &Path) -> std::io::Result<Option<LogDrops>> {
    match std::fs::read(path) {
        Ok(data) => serde_json::from_slice(&data)
            .map(Some)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}
