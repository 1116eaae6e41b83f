//! The writer's end: the current log file, rotated before it would grow past the
//! limit, and output dropped (counted, recorded) while the disk refuses it.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::Utc;

use super::compress::{Compressor, NameLock};
use super::drops::{DropRecord, LogDrops};
use super::rotate::{
    COMPRESSED_SUFFIX, RotatedFile, RotationKey, RotationPolicy, leftover_tmp_files, rotated_files,
    rotated_path,
};
use super::writer::open_log_file;
use super::{LogError, WriterOptions};

/// While writes fail, the drop record is rewritten at most this often.
const RECORD_EVERY: Duration = Duration::from_secs(1);

pub(super) struct Sink {
    /// `None` while the file cannot be opened (a full disk at start): tried again at
    /// each write, the output dropped meanwhile.
    file: Option<File>,
    pub(super) path: PathBuf,
    /// Bytes in the current file (the writer is its only writer).
    size: u64,
    /// CRI lines waiting to be written.
    pub(super) out: Vec<u8>,
    policy: RotationPolicy,
    last_key: Option<RotationKey>,
    lock: NameLock,
    compressor: Option<Compressor>,
    drops: LogDrops,
    record: Option<DropRecord>,
    recorded_at: Instant,
    first_error: Option<std::io::Error>,
}

impl Sink {
    /// Opens (or creates) the log at `path` and looks at what earlier rotations left.
    /// A file that cannot be opened is not an error: the writer must drain the pipes
    /// anyway (else the container blocks or gets EPIPE), so it drops the output and
    /// tries again at each write.
    pub(super) fn open(path: &Path, opts: &WriterOptions) -> Sink {
        let file = open_log_file(path)
            .map_err(|e| tracing::warn!(error = %e, "cannot open the container log yet; dropping output until it can be"))
            .ok();
        let size = file
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .map_or(0, |m| m.len());
        for tmp in leftover_tmp_files(path) {
            let _ = std::fs::remove_file(tmp);
        }
        let last_key = rotated_files(path)
            .ok()
            .and_then(|r| r.last().map(|f| f.key.clone()));
        Sink {
            file,
            path: path.to_path_buf(),
            size,
            out: Vec::with_capacity(256 * 1024),
            policy: opts.rotation,
            last_key,
            lock: NameLock::default(),
            compressor: None,
            drops: LogDrops {
                log_path: path.to_path_buf(),
                ..Default::default()
            },
            record: opts
                .drop_record
                .as_deref()
                .map(|p| DropRecord::create(p, path)),
            recorded_at: Instant::now(),
            first_error: None,
        }
    }

    /// Writes the buffered lines, rotating first whenever the next lines would not fit;
    /// what cannot be written is dropped (and counted).
    pub(super) fn flush(&mut self) {
        if self.out.is_empty() {
            return;
        }
        let data = std::mem::take(&mut self.out);
        let mut rest = &data[..];
        while !rest.is_empty() {
            let n = if !self.policy.enabled() {
                rest.len()
            } else {
                let room = podhost_model_core::convert::usize_saturating(
                    self.policy.max_size.saturating_sub(self.size),
                );
                let fit = if rest.len() <= room {
                    rest.len()
                } else {
                    rest[..room]
                        .iter()
                        .rposition(|&b| b == b'\n')
                        .map_or(0, |i| i + 1)
                };
                if fit > 0 {
                    fit
                } else if self.size > 0 && self.rotate() {
                    continue;
                } else if self.size == 0 {
                    // One CRI line larger than the limit: it gets a file of its own.
                    rest.iter()
                        .position(|&b| b == b'\n')
                        .map_or(rest.len(), |i| i + 1)
                } else {
                    // Rotation failed: keep writing to the current file.
                    rest.len()
                }
            };
            self.write_chunk(&rest[..n]);
            rest = &rest[n..];
        }
        self.out = data;
        self.out.clear();
    }

    /// Appends whole lines; on failure cuts the file back to its last whole line and
    /// counts the lines as dropped.
    fn write_chunk(&mut self, chunk: &[u8]) {
        let mut open_error = None;
        if self.file.is_none() {
            match open_log_file(&self.path) {
                Ok(f) => {
                    self.size = f.metadata().map_or(0, |m| m.len());
                    self.file = Some(f);
                }
                Err(e) => open_error = Some(e),
            }
        }
        let written = match (&mut self.file, open_error) {
            (Some(f), _) => f.write_all(chunk),
            (None, e) => Err(std::io::Error::other(
                e.map_or_else(|| "no log file".to_string(), |e| e.to_string()),
            )),
        };
        match written {
            Ok(()) => {
                self.size += chunk.len() as u64;
                if self.drops.failing {
                    self.drops.failing = false;
                    self.drops.resumed_at = Some(Utc::now());
                    tracing::info!(
                        path = %self.path.display(),
                        dropped_lines = self.drops.dropped_lines,
                        "container log writable again"
                    );
                    self.save_record();
                }
            }
            Err(e) => {
                // A short write left part of a line: take it back, so the file only
                // ever holds whole lines.
                if let Some(f) = &self.file {
                    let _ = f.set_len(self.size);
                }
                self.drops.dropped_lines += chunk.iter().filter(|&&b| b == b'\n').count() as u64;
                self.drops.dropped_bytes += chunk.len() as u64;
                if !self.drops.failing {
                    tracing::warn!(
                        path = %self.path.display(),
                        error = %e,
                        "cannot write container log; dropping output until writes succeed again"
                    );
                    self.drops.failing = true;
                    self.drops.failures += 1;
                    self.drops.failing_since = Some(Utc::now());
                    self.drops.error = Some(e.to_string());
                    self.save_record();
                } else if self.recorded_at.elapsed() >= RECORD_EVERY {
                    self.save_record();
                }
                self.first_error.get_or_insert(e);
            }
        }
    }

    fn save_record(&mut self) {
        if let Some(r) = &mut self.record {
            r.update(&self.drops);
        }
        self.recorded_at = Instant::now();
    }

    /// Renames the current file to its rotated name and opens a new one; removes the
    /// oldest rotated files so that at most `max_files` remain, and queues the older
    /// uncompressed ones for compression. Returns `false` (and keeps the current file)
    /// if the rename or the new file fails.
    fn rotate(&mut self) -> bool {
        let lock = self.lock.clone();
        let guard = lock.lock().unwrap_or_else(|p| p.into_inner());
        let mut rotated = rotated_files(&self.path).unwrap_or_default();
        let keep = self.policy.max_files.saturating_sub(2);
        if rotated.len() > keep {
            let excess = rotated.len() - keep;
            for old in rotated.drain(..excess) {
                remove_rotated(&old);
            }
        }
        let newest = rotated.last().map(|f| &f.key).max(self.last_key.as_ref());
        let key = RotationKey::next(Utc::now(), newest);
        let target = rotated_path(&self.path, &key);
        if let Err(e) = std::fs::rename(&self.path, &target) {
            tracing::warn!(path = %self.path.display(), error = %e, "cannot rotate container log; it grows past the limit");
            return false;
        }
        let file = match open_log_file(&self.path) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot open a new container log after rotation; keeping the old one");
                let _ = std::fs::rename(&target, &self.path);
                return false;
            }
        };
        self.file = Some(file);
        self.size = 0;
        self.last_key = Some(key);
        drop(guard);
        // Every rotated file but the newest (just renamed) is compressed.
        let older: Vec<PathBuf> = rotated
            .into_iter()
            .filter(|f| !f.compressed)
            .map(|f| f.path)
            .collect();
        if !older.is_empty() {
            self.queue_compression(older);
        }
        true
    }

    fn queue_compression(&mut self, paths: Vec<PathBuf>) {
        if self.compressor.is_none() {
            match Compressor::start(self.lock.clone()) {
                Ok(c) => self.compressor = Some(c),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot start the log compression thread; rotated logs stay uncompressed");
                    return;
                }
            }
        }
        if let Some(c) = &self.compressor {
            for p in paths {
                c.queue(p);
            }
        }
    }

    /// The outcome: an error if output was dropped, with the first cause. Compressions
    /// still queued are finished first.
    pub(super) fn finish(mut self) -> Result<(), LogError> {
        if self.drops.dropped_bytes > 0 {
            self.save_record();
        }
        if let Some(c) = self.compressor.take() {
            c.finish();
        }
        match self.first_error {
            None => Ok(()),
            Some(source) => Err(LogError::Write {
                path: self.path,
                dropped: self.drops.dropped_bytes,
                source,
            }),
        }
    }
}

/// Removes a rotated file in both its forms (plain and `.gz`).
fn remove_rotated(f: &RotatedFile) {
    let plain = f.uncompressed_path();
    let mut gz = plain.as_os_str().to_os_string();
    gz.push(COMPRESSED_SUFFIX);
    for p in [plain, PathBuf::from(gz)] {
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(path = %p.display(), error = %e, "cannot remove old rotated log")
            }
        }
    }
}
