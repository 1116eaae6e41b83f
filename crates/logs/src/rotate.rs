//! Log rotation as the kubelet does it, but done by the writer itself.
//!
//! The kubelet (`pkg/kubelet/logs/container_log_manager.go`) checks every 10 s from
//! outside: when `<restart>.log` has reached `containerLogMaxSize` it renames it to
//! `<restart>.log.<20060102-150405>` and asks the runtime to reopen the file; lines the
//! runtime writes between the check and the reopen, or beyond the size in the 10 s, are
//! not bounded and a flood overshoots the size by far. podhost's writer rotates before
//! the write that would cross the size, so no line is lost and no file exceeds the size
//! (unless a single CRI line is larger than it).
//!
//! Names are the kubelet's: `<log>.<YYYYMMDD-HHMMSS>` (UTC here, so that names sort
//! in time order across a DST change; the kubelet uses the host's local time), older
//! rotated files gzip-compressed to `<log>.<ts>.gz` ([`super::compress`]), the newest
//! rotated file left uncompressed, and at most `max_files` files in all (the current
//! one included). The kubelet rotates at most once per check, so its names never
//! collide; the writer may rotate several times in one second, so a second rotation
//! in the same second gets `_001`, `_002`, … after the timestamp (which still sorts in
//! order as plain strings, `.gz` or not, as the kubelet sorts them).

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

/// The timestamp format of rotated names (Go's `20060102-150405`).
const TIMESTAMP_FORMAT: &str = "%Y%m%d-%H%M%S";
/// Suffix of a compressed rotated file.
pub const COMPRESSED_SUFFIX: &str = ".gz";
/// Suffix of a file being compressed (the kubelet's `.tmp`); never counted, swept at
/// start.
pub const TMP_SUFFIX: &str = ".tmp";

/// The kubelet's `containerLogMaxSize` default (10Mi).
pub const DEFAULT_MAX_SIZE: u64 = 10 * 1024 * 1024;
/// The kubelet's `containerLogMaxFiles` default.
pub const DEFAULT_MAX_FILES: usize = 5;

/// When and how far container logs rotate (`--container-log-max-size`,
/// `--container-log-max-files`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RotationPolicy {
    /// A log file is rotated before a write would make it larger than this; 0 turns
    /// rotation off (one file grows without bound).
    pub max_size: u64,
    /// Files kept per container log, the current one included (at least 2).
    pub max_files: usize,
}

impl Default for RotationPolicy {
    fn default() -> Self {
        RotationPolicy {
            max_size: DEFAULT_MAX_SIZE,
            max_files: DEFAULT_MAX_FILES,
        }
    }
}

/// Why a rotation flag was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    /// The size is not a Kubernetes quantity.
    #[error(
        "--container-log-max-size {0:?} is not a quantity such as 10Mi or 500Ki (0 or a negative size turns rotation off)"
    )]
    Size(String),
    /// Fewer than two files.
    #[error(
        "--container-log-max-files must be at least 2 (the current file and one rotated), not {0}"
    )]
    Files(i64),
}

impl RotationPolicy {
    /// Builds the policy from the flags' text, as the kubelet validates them: a size
    /// that is 0 or negative turns rotation off; at least 2 files.
    pub fn from_flags(max_size: &str, max_files: i64) -> Result<Self, PolicyError> {
        let size = podhost_model_core::quantity::bytes(max_size.trim())
            .ok_or_else(|| PolicyError::Size(max_size.to_string()))?;
        if max_files < 2 {
            return Err(PolicyError::Files(max_files));
        }
        Ok(RotationPolicy {
            max_size: podhost_model_core::convert::non_negative_u64(size),
            max_files: podhost_model_core::convert::usize_saturating(
                podhost_model_core::convert::non_negative_u64(max_files),
            ),
        })
    }

    /// Whether rotation is on.
    pub fn enabled(&self) -> bool {
        self.max_size > 0
    }
}

/// Where a rotated file stands in the order of rotations: its timestamp text and its
/// same-second counter. Compares in time order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RotationKey {
    /// `YYYYMMDD-HHMMSS` (UTC).
    pub stamp: String,
    /// 0 for the first rotation in that second, then 1, 2, …
    pub seq: u32,
}

impl RotationKey {
    /// The key for a rotation at `now` that must sort after `last` (the newest existing
    /// one): `now`'s second, or `last`'s second with the next counter when `now` is not
    /// later (same second, or the clock went back).
    pub fn next(now: DateTime<Utc>, last: Option<&RotationKey>) -> RotationKey {
        let stamp = now.format(TIMESTAMP_FORMAT).to_string();
        match last {
            Some(l) if l.stamp >= stamp => RotationKey {
                stamp: l.stamp.clone(),
                seq: l.seq + 1,
            },
            _ => RotationKey { stamp, seq: 0 },
        }
    }

    /// The time of the rotation (to the second).
    pub fn time(&self) -> Option<DateTime<Utc>> {
        chrono::NaiveDateTime::parse_from_str(&self.stamp, TIMESTAMP_FORMAT)
            .ok()
            .map(|t| t.and_utc())
    }

    /// The suffix after `<log>.`: `20260101-120000` or `20260101-120000_001`.
    fn suffix(&self) -> String {
        if self.seq == 0 {
            self.stamp.clone()
        } else {
            format!("{}_{:03}", self.stamp, self.seq)
        }
    }

    /// Parses a suffix written by [`suffix`](Self::suffix).
    fn parse(s: &str) -> Option<RotationKey> {
        let (stamp, seq) = match s.split_once('_') {
            Some((stamp, seq)) => (stamp, seq.parse().ok()?),
            None => (s, 0),
        };
        let b = stamp.as_bytes();
        let shape_ok = b.len() == 15
            && b[8] == b'-'
            && b.iter()
                .enumerate()
                .all(|(i, c)| i == 8 || c.is_ascii_digit());
        shape_ok.then(|| RotationKey {
            stamp: stamp.to_string(),
            seq,
        })
    }
}

/// One rotated file of a container log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RotatedFile {
    pub key: RotationKey,
    /// The file as it is now (`….gz` once compressed).
    pub path: PathBuf,
    pub compressed: bool,
}

impl RotatedFile {
    /// The name the file has before compression.
    pub fn uncompressed_path(&self) -> PathBuf {
        if self.compressed {
            self.path.with_extension("")
        } else {
            self.path.clone()
        }
    }
}

/// The path of the rotated file for `log` with `key` (uncompressed).
pub fn rotated_path(log: &Path, key: &RotationKey) -> PathBuf {
    let mut name = log.file_name().unwrap_or_default().to_os_string();
    name.push(".");
    name.push(key.suffix());
    log.with_file_name(name)
}

/// The rotated files of `log` (beside it, named `<log name>.<key>[.gz]`), oldest first.
/// A file present both plain and compressed (a compression that was cut short before
/// it removed the plain one) is listed once, as the plain file. `.tmp` files and other
/// names are left out. A missing directory is an empty list.
pub fn rotated_files(log: &Path) -> std::io::Result<Vec<RotatedFile>> {
    let (Some(dir), Some(name)) = (log.parent(), log.file_name().and_then(|n| n.to_str())) else {
        return Ok(Vec::new());
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let prefix = format!("{name}.");
    let mut found: Vec<RotatedFile> = Vec::new();
    for entry in entries {
        let entry = entry?;
        let file_name = entry.file_name();
        let Some(rest) = file_name.to_str().and_then(|n| n.strip_prefix(&prefix)) else {
            continue;
        };
        let (suffix, compressed) = match rest.strip_suffix(COMPRESSED_SUFFIX) {
            Some(s) => (s, true),
            None => (rest, false),
        };
        if let Some(key) = RotationKey::parse(suffix) {
            found.push(RotatedFile {
                key,
                path: dir.join(&file_name),
                compressed,
            });
        }
    }
    // Plain before compressed for one key, then keep the first of each key.
    found.sort_by(|a, b| a.key.cmp(&b.key).then(a.compressed.cmp(&b.compressed)));
    found.dedup_by(|later, first| later.key == first.key);
    Ok(found)
}

/// Removes a container log with its rotated files (plain, `.gz` and `.tmp`), as
/// container GC does for a dead container. Absent files are fine.
pub fn remove_log_files(log: &Path) -> std::io::Result<()> {
    let mut paths: Vec<PathBuf> = rotated_files(log)?
        .into_iter()
        .flat_map(|f| {
            let plain = f.uncompressed_path();
            let mut gz = plain.as_os_str().to_os_string();
            gz.push(COMPRESSED_SUFFIX);
            [plain, PathBuf::from(gz)]
        })
        .collect();
    paths.extend(leftover_tmp_files(log));
    paths.push(log.to_path_buf());
    for p in paths {
        match std::fs::remove_file(&p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// The `.tmp` files of `log`'s rotated files (left by a compression that was cut short).
pub fn leftover_tmp_files(log: &Path) -> Vec<PathBuf> {
    let (Some(dir), Some(name)) = (log.parent(), log.file_name().and_then(|n| n.to_str())) else {
        return Vec::new();
    };
    let prefix = format!("{name}.");
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.file_name())
                .filter_map(|n| n.to_str().map(str::to_string))
                .filter(|n| n.starts_with(&prefix) && n.ends_with(TMP_SUFFIX))
                .map(|n| dir.join(n))
                .collect()
        })
        .unwrap_or_default()
}
