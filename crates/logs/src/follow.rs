//! Following a growing CRI log file from tokio (`podhost logs -f`).

use std::future::Future;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::mpsc;

use std::io::Read;

use super::LogError;
use super::files::{LogPart, log_parts};
use super::reader::{Assembler, Limit, ReadOptions, TailSink};
use super::rotate::RotationKey;
use super::tail::{Segment, plan, scan_back};

/// How often [`follow`] checks the file for new lines.
pub const FOLLOW_INTERVAL: Duration = Duration::from_millis(100);

/// Upper bound on the size of one batch sent by [`follow`] (a batch holds whole
/// messages, so a single long message can exceed it).
const BATCH_BYTES: usize = 64 * 1024;

/// Prints the CRI log at `path` like [`read_messages`](super::read_messages) (honouring all of `opts`), then
/// keeps printing lines appended to it until `stop` completes, checking every
/// [`FOLLOW_INTERVAL`].
///
/// Each `Vec<u8>` sent to `out` holds one or more whole formatted lines, each ending
/// in `\n`. When `stop` completes, the file is read one last time, chunks of a split
/// line still waiting for their `F` chunk are sent as a line, and the function
/// returns. It also returns `Ok` early when the receiver of `out` is dropped or
/// [`ReadOptions::limit_bytes`](super::ReadOptions::limit_bytes) is reached.
///
/// The rotated files of the log are printed first (oldest first, `.gz` ones
/// decompressed; with `tail`, only those needed). Rotation is followed: if the file at
/// `path` is replaced (another inode), the old file is read to its end, then any rotated
/// files written since (several rotations between two looks), then the new one from its
/// start; if it is truncated, it is read again from the start. If `path` disappears,
/// the open file keeps being watched. A follower that falls behind by more than
/// `max_files` rotations misses the files removed meanwhile.
///
/// Sending waits for room in the channel (backpressure); `stop` is not observed while
/// a send waits.
pub async fn follow<F: Future>(
    path: PathBuf,
    opts: ReadOptions,
    out: mpsc::Sender<Vec<u8>>,
    stop: F,
) -> Result<(), LogError> {
    let mut f = Follower::open(path, &opts).await?;
    // Old content: the rotated files, then the current file (as much as tail needs),
    // kept in memory by tail until the end is reached.
    let mut tail = TailSink::new(opts.tail);
    let mut batch: Vec<u8> = Vec::new();
    for data in f.history(&opts).await? {
        let limit = &mut f.limit;
        f.asm
            .push_lines(&data, &f.path, &mut |m| tail.push(m, limit, &mut batch));
        if batch.len() >= BATCH_BYTES && !send_batches(&out, std::mem::take(&mut batch)).await {
            return Ok(());
        }
    }
    loop {
        let more = f
            .read_some(&mut |m, limit| tail.push(m, limit, &mut batch))
            .await?;
        if !more {
            break;
        }
        if batch.len() >= BATCH_BYTES && !send_batches(&out, std::mem::take(&mut batch)).await {
            return Ok(());
        }
    }
    tail.finish(&mut f.limit, &mut batch);
    if !send_batches(&out, batch).await || f.limit.exhausted() {
        return Ok(());
    }

    let mut stop = std::pin::pin!(stop);
    let mut ticker = tokio::time::interval(FOLLOW_INTERVAL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        let stopping = tokio::select! {
            biased;
            _ = &mut stop => true,
            _ = out.closed() => return Ok(()),
            _ = ticker.tick() => false,
        };
        let mut batch = Vec::new();
        f.read_available(&mut |m, limit| limit.write(m, &mut batch))
            .await?;
        if stopping {
            let limit = &mut f.limit;
            f.asm.flush(&mut |m| limit.write(m, &mut batch));
        } else if let Some(next) = f.rotation().await {
            // Lines may have been appended to the old file since it was read.
            f.read_available(&mut |m, limit| limit.write(m, &mut batch))
                .await?;
            let rotated = match &next {
                Rotation::Replaced(s) => Some(s.rotated.clone()),
                Rotation::Truncated => None,
            };
            f.switch(next).await;
            if let Some(rotated) = rotated {
                // Rotations that happened between two looks: their files in order.
                for data in f.missed_rotations(rotated).await? {
                    let limit = &mut f.limit;
                    f.asm
                        .push_lines(&data, &f.path, &mut |m| limit.write(m, &mut batch));
                }
            }
            f.read_available(&mut |m, limit| limit.write(m, &mut batch))
                .await?;
        }
        if !send_batches(&out, batch).await || f.limit.exhausted() || stopping {
            return Ok(());
        }
    }
}

/// Sends `data` (whole lines) in pieces of about [`BATCH_BYTES`], cut at line ends.
/// Returns `false` if the receiver is gone.
async fn send_batches(out: &mpsc::Sender<Vec<u8>>, mut data: Vec<u8>) -> bool {
    while data.len() > BATCH_BYTES {
        let cut = data[..BATCH_BYTES]
            .iter()
            .rposition(|&b| b == b'\n')
            .or_else(|| {
                data[BATCH_BYTES..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map(|i| i + BATCH_BYTES)
            })
            .map_or(data.len(), |i| i + 1);
        if cut >= data.len() {
            break;
        }
        let rest = data.split_off(cut);
        if out.send(data).await.is_err() {
            return false;
        }
        data = rest;
    }
    data.is_empty() || out.send(data).await.is_ok()
}

/// State of [`follow`]: the open file, the unread fragment and the joiner.
struct Follower {
    path: PathBuf,
    /// The newest rotated file older than the open file.
    last_key: Option<RotationKey>,
    /// The rotated files older than the open file, until [`Follower::history`] reads them.
    history: Option<Vec<LogPart>>,
    file: tokio::fs::File,
    id: (u64, u64),
    offset: u64,
    frag: Vec<u8>,
    asm: Assembler,
    limit: Limit,
    buf: Vec<u8>,
}

impl Follower {
    async fn open(path: PathBuf, opts: &ReadOptions) -> Result<Self, LogError> {
        let settled = settle(path.clone()).await?;
        Ok(Follower {
            path,
            last_key: None,
            history: Some(settled.rotated),
            file: tokio::fs::File::from_std(settled.file),
            id: settled.id,
            offset: 0,
            frag: Vec::new(),
            asm: Assembler::new(opts),
            limit: Limit::new(opts.limit_bytes),
            buf: vec![0; 256 * 1024],
        })
    }

    /// Reads the open file to its current end, passing each finished message to `emit`.
    async fn read_available(
        &mut self,
        emit: &mut impl FnMut(&[u8], &mut Limit),
    ) -> Result<(), LogError> {
        while self.read_some(emit).await? {}
        Ok(())
    }

    /// Reads once (up to the buffer size) from the open file, passing each finished
    /// message to `emit`. Returns `false` at the end of the file or of the byte limit.
    async fn read_some(
        &mut self,
        emit: &mut impl FnMut(&[u8], &mut Limit),
    ) -> Result<bool, LogError> {
        loop {
            if self.limit.exhausted() {
                return Ok(false);
            }
            let n = match self.file.read(&mut self.buf).await {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(source) => {
                    return Err(LogError::Read {
                        path: self.path.clone(),
                        source,
                    });
                }
            };
            if n == 0 {
                return Ok(false);
            }
            self.offset += n as u64;
            let limit = &mut self.limit;
            let mut data = &self.buf[..n];
            while let Some(nl) = data.iter().position(|&b| b == b'\n') {
                if self.frag.is_empty() {
                    self.asm
                        .push(&data[..=nl], &self.path, &mut |m| emit(m, limit));
                } else {
                    self.frag.extend_from_slice(&data[..=nl]);
                    self.asm
                        .push(&self.frag, &self.path, &mut |m| emit(m, limit));
                    self.frag.clear();
                }
                data = &data[nl + 1..];
            }
            self.frag.extend_from_slice(data);
            return Ok(true);
        }
    }

    /// The log's rotated files older than the open file (with `tail`, only those it
    /// needs), each read whole; positions the open file where the tail starts.
    async fn history(&mut self, opts: &ReadOptions) -> Result<Vec<Vec<u8>>, LogError> {
        let path = self.path.clone();
        let io_err = |source| LogError::Read {
            path: path.clone(),
            source,
        };
        let current = self
            .file
            .try_clone()
            .await
            .map_err(io_err)?
            .into_std()
            .await;
        let (tail, stream) = (opts.tail, opts.stream);
        let path2 = self.path.clone();
        let rotated = self.history.take().unwrap_or_default();
        let (start, last_key, data) = tokio::task::spawn_blocking(move || {
            let (start, found) = match tail {
                Some(n) => scan_back(&current, n, stream).map_err(|source| LogError::Read {
                    path: path2.clone(),
                    source,
                })?,
                None => (0, 0),
            };
            let last_key = rotated.last().and_then(|p| p.key.clone());
            let need = tail.map(|n| n.saturating_sub(found));
            let data = if need == Some(0) {
                Vec::new()
            } else {
                read_whole(plan(rotated, need, stream)?)?
            };
            Ok::<_, LogError>((start, last_key, data))
        })
        .await
        .map_err(|e| LogError::Read {
            path: self.path.clone(),
            source: std::io::Error::other(e),
        })??;
        self.last_key = last_key;
        if start > 0 {
            self.file
                .seek(std::io::SeekFrom::Start(start))
                .await
                .map_err(io_err)?;
            self.offset = start;
        }
        Ok(data)
    }

    /// After a rotation, given the rotated files older than the new open file: those
    /// newer than the one that was open (which was read through its descriptor), each
    /// read whole.
    async fn missed_rotations(&mut self, rotated: Vec<LogPart>) -> Result<Vec<Vec<u8>>, LogError> {
        let last = self.last_key.clone();
        let (last_key, data) = tokio::task::spawn_blocking(move || {
            let mut newer: Vec<LogPart> = rotated.into_iter().filter(|p| p.key > last).collect();
            let last_key = newer.last().and_then(|p| p.key.clone()).or(last);
            // The first newer one is the file that was open.
            if !newer.is_empty() {
                newer.remove(0);
            }
            Ok::<_, LogError>((last_key, read_whole(plan(newer, None, None)?)?))
        })
        .await
        .map_err(|e| LogError::Read {
            path: self.path.clone(),
            source: std::io::Error::other(e),
        })??;
        self.last_key = last_key;
        Ok(data)
    }

    /// Whether the file at the path was replaced (rotation) or truncated.
    async fn rotation(&self) -> Option<Rotation> {
        let meta = tokio::fs::metadata(&self.path).await.ok()?;
        if (meta.dev(), meta.ino()) != self.id {
            match settle(self.path.clone()).await {
                Ok(s) => Some(Rotation::Replaced(s)),
                Err(e) => {
                    tracing::debug!(error = %e, "cannot open rotated log file yet");
                    None
                }
            }
        } else if meta.len() < self.offset {
            Some(Rotation::Truncated)
        } else {
            None
        }
    }

    /// Continues with the new file, or from the start of the truncated one.
    async fn switch(&mut self, r: Rotation) {
        match r {
            Rotation::Replaced(s) => {
                tracing::debug!(path = %self.path.display(), "log file rotated; following the new file");
                self.file = tokio::fs::File::from_std(s.file);
                self.id = s.id;
            }
            Rotation::Truncated => {
                tracing::debug!(path = %self.path.display(), "log file truncated; reading it from the start");
                if self.file.seek(std::io::SeekFrom::Start(0)).await.is_err() {
                    return;
                }
            }
        }
        self.offset = 0;
        self.frag.clear();
    }
}

/// How the followed file changed under its path.
enum Rotation {
    /// Another file is at the path now.
    Replaced(Settled),
    /// The file is shorter than what was read.
    Truncated,
}

/// The current file of a log, opened while no rotation happened, with the rotated files
/// (all older than it) as they were then.
struct Settled {
    file: std::fs::File,
    id: (u64, u64),
    rotated: Vec<LogPart>,
}

/// Opens the current file between two listings of the rotated files that agree on the
/// newest one: no rotation happened in between, so every listed file is older than the
/// opened one and the next rotated file will be it. (Compressed files have new inodes,
/// so identity by inode does not hold once the writer's gzip thread ran.)
async fn settle(path: PathBuf) -> Result<Settled, LogError> {
    let p = path.clone();
    tokio::task::spawn_blocking(move || settle_blocking(&p))
        .await
        .map_err(|e| LogError::Read {
            path,
            source: std::io::Error::other(e),
        })?
}

fn settle_blocking(log: &Path) -> Result<Settled, LogError> {
    let newest = |parts: &[LogPart]| parts.last().and_then(|p| p.key.clone());
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut before = log_parts(log)?;
        before.pop();
        let file = match std::fs::File::open(log) {
            Ok(f) => f,
            // Between the rename and the new file of a rotation.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && attempt < 100 => {
                std::thread::sleep(std::time::Duration::from_millis(1));
                continue;
            }
            Err(source) => {
                return Err(LogError::Open {
                    path: log.to_path_buf(),
                    source,
                });
            }
        };
        let mut after = log_parts(log)?;
        after.pop();
        // Under a flood that rotates faster than this can look, settle for the last try.
        if newest(&before) == newest(&after) || attempt >= 100 {
            let meta = file.metadata().map_err(|source| LogError::Open {
                path: log.to_path_buf(),
                source,
            })?;
            return Ok(Settled {
                file,
                id: (meta.dev(), meta.ino()),
                rotated: after,
            });
        }
    }
}

/// Reads each segment whole (complete lines only).
fn read_whole(segments: Vec<Segment>) -> Result<Vec<Vec<u8>>, LogError> {
    segments
        .into_iter()
        .map(|seg| {
            let mut data = Vec::new();
            seg.reader
                .into_buf_read()
                .read_to_end(&mut data)
                .map_err(|source| LogError::Read {
                    path: seg.part.path.clone(),
                    source,
                })?;
            Ok(data)
        })
        .collect()
}
