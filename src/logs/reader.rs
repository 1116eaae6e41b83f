//! Reading CRI log files: parsing, reassembly of split lines, `--tail`, `--since`,
//! `--timestamps`, stream selection, `--limit-bytes`, and following a growing file.
//!
//! Unlike the kubelet, which prints `P` chunks as they come (so a long line gets a
//! timestamp in its middle, and stdout/stderr chunks can interleave), the reader joins
//! the `P…F` chunks of each stream into the original line before printing it. A joined
//! line is printed with the timestamp of its first chunk. `tail` counts printed lines
//! (after joining and filtering), not lines of the file.
//!
//! Malformed lines are skipped (with a `tracing` warning and a count in
//! [`ReadSummary`]), as the kubelet does: one torn line must not hide the rest of a log.

use std::collections::VecDeque;
use std::fs::File;
use std::future::Future;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::mpsc;

use super::{LogError, Stream};

/// A joined message longer than this is printed (with a newline) once it reaches this
/// size, and the rest of the line starts a new message; bounds the reader's memory when
/// a container writes endless text without a newline.
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// How often [`follow`] checks the file for new lines.
pub const FOLLOW_INTERVAL: Duration = Duration::from_millis(100);

/// Upper bound on the size of one batch sent by [`follow`] (a batch holds whole
/// messages, so a single long message can exceed it).
const BATCH_BYTES: usize = 64 * 1024;

/// One parsed CRI log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CriLine {
    /// When the runtime read the text from the container's pipe.
    pub time: DateTime<Utc>,
    /// Which stream the text came from.
    pub stream: Stream,
    /// `true` for a `P` chunk: the line continues in the next chunk of the same stream.
    pub partial: bool,
    /// The text, without the newline that ended it. Raw bytes, not necessarily UTF-8.
    pub msg: Vec<u8>,
}

/// Which part of a log to print and how.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// Print only the last N lines (after joining and filtering). `Some(0)` prints no
    /// old lines (with [`follow`]: only new ones). `None`: all lines.
    pub tail: Option<usize>,
    /// Prefix each line with its RFC 3339 timestamp (UTC, nine fractional digits) and a
    /// space, like `kubectl logs --timestamps`.
    pub timestamps: bool,
    /// Print only this stream. `None`: both.
    pub stream: Option<Stream>,
    /// Print only lines whose (first chunk's) timestamp is at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Stop after printing this many bytes (the last line may be cut short).
    pub limit_bytes: Option<u64>,
}

/// What [`read_messages`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadSummary {
    /// Byte offset just past the last complete (newline-terminated) line of the file
    /// that was read. A trailing fragment without a newline (a write in progress) is
    /// not read.
    pub end_offset: u64,
    /// Number of malformed lines that were skipped.
    pub skipped_lines: u64,
}

/// Parses one CRI log line (with or without its trailing `\n`).
///
/// The format is `<RFC3339 timestamp> <stdout|stderr> <tags> <msg>`, where the first
/// `:`-separated tag is `P` (partial) or `F` (full). Any RFC 3339 timestamp is accepted
/// (any number of fractional digits, any offset) and converted to UTC. A line ending
/// right after the tag (no space) has an empty message.
pub fn parse_line(line: &[u8]) -> Result<CriLine, LogError> {
    let LineRef {
        time,
        stream,
        partial,
        msg,
    } = parse_parts(line)?;
    Ok(CriLine {
        time,
        stream,
        partial,
        msg: msg.to_vec(),
    })
}

fn malformed(reason: impl Into<String>) -> LogError {
    LogError::Malformed {
        reason: reason.into(),
    }
}

/// Shows at most 64 bytes of a field in an error message.
fn excerpt(b: &[u8]) -> String {
    let cut = &b[..b.len().min(64)];
    let mut s = String::from_utf8_lossy(cut).into_owned();
    if cut.len() < b.len() {
        s.push('…');
    }
    s
}

/// A parsed line borrowing its message.
struct LineRef<'a> {
    time: DateTime<Utc>,
    stream: Stream,
    partial: bool,
    msg: &'a [u8],
}

/// Borrowing parser behind [`parse_line`].
fn parse_parts(line: &[u8]) -> Result<LineRef<'_>, LogError> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let mut rest = line;
    let mut field = |what: &str| -> Result<&[u8], LogError> {
        match rest.iter().position(|&b| b == b' ') {
            Some(i) => {
                let f = &rest[..i];
                rest = &rest[i + 1..];
                Ok(f)
            }
            None => Err(malformed(format!(
                "no space after the {what} in \"{}\"",
                excerpt(line)
            ))),
        }
    };
    let ts = field("timestamp")?;
    let stream_tag = field("stream")?;
    let (tags, msg) = match rest.iter().position(|&b| b == b' ') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &rest[rest.len()..]),
    };
    let ts_str = std::str::from_utf8(ts)
        .map_err(|_| malformed(format!("timestamp \"{}\" is not UTF-8", excerpt(ts))))?;
    let time = DateTime::parse_from_rfc3339(ts_str)
        .map_err(|e| {
            malformed(format!(
                "timestamp \"{}\" is not RFC 3339: {e}",
                excerpt(ts)
            ))
        })?
        .with_timezone(&Utc);
    let stream = Stream::from_tag(stream_tag).ok_or_else(|| {
        malformed(format!(
            "stream \"{}\" is neither stdout nor stderr",
            excerpt(stream_tag)
        ))
    })?;
    let partial = match tags.split(|&b| b == b':').next() {
        Some(b"P") => true,
        Some(b"F") => false,
        _ => {
            return Err(malformed(format!(
                "tag \"{}\" is neither P nor F",
                excerpt(tags)
            )));
        }
    };
    Ok(LineRef {
        time,
        stream,
        partial,
        msg,
    })
}

/// Writes the messages of the CRI log file at `path` to `out`, one per line
/// (`msg\n`, or `<timestamp> msg\n` with [`ReadOptions::timestamps`]), joining split
/// lines and applying the options.
///
/// Reads up to the last complete line present when it gets there; chunks of a split
/// line whose final `F` chunk is not written yet are printed as a line of their own.
/// Returns the offset where a follower would continue and the number of skipped
/// malformed lines.
pub fn read_messages(
    path: &Path,
    opts: &ReadOptions,
    out: &mut impl Write,
) -> Result<ReadSummary, LogError> {
    let file = File::open(path).map_err(|source| LogError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut asm = Assembler::new(opts);
    let mut sink = TailSink::new(opts.tail);
    let mut limit = Limit::new(opts.limit_bytes);
    let mut line = Vec::with_capacity(1024);
    let mut summary = ReadSummary::default();
    let write_err = |source| LogError::Output {
        path: path.to_path_buf(),
        source,
    };
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|source| LogError::Read {
                path: path.to_path_buf(),
                source,
            })?;
        if n == 0 || line.last() != Some(&b'\n') {
            break;
        }
        summary.end_offset += n as u64;
        if !asm.push(&line, path, &mut |m| sink.push(m, &mut limit, out)) {
            summary.skipped_lines += 1;
        }
        if let Some(e) = sink.error.take() {
            return Err(write_err(e));
        }
        if limit.exhausted() {
            break;
        }
    }
    if !limit.exhausted() {
        asm.flush(&mut |m| sink.push(m, &mut limit, out));
        sink.finish(&mut limit, out);
    }
    if let Some(e) = sink.error.take() {
        return Err(write_err(e));
    }
    out.flush().map_err(write_err)?;
    Ok(summary)
}

/// Prints the CRI log at `path` like [`read_messages`] (honouring all of `opts`), then
/// keeps printing lines appended to it until `stop` completes, checking every
/// [`FOLLOW_INTERVAL`].
///
/// Each `Vec<u8>` sent to `out` holds one or more whole formatted lines, each ending
/// in `\n`. When `stop` completes, the file is read one last time, chunks of a split
/// line still waiting for their `F` chunk are sent as a line, and the function
/// returns. It also returns `Ok` early when the receiver of `out` is dropped or
/// [`ReadOptions::limit_bytes`] is reached.
///
/// Rotation is followed: if the file at `path` is replaced (another inode), the old
/// file is read to its end and the new one from its start; if it is truncated, it is
/// read again from the start. If `path` disappears, the open file keeps being watched.
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
    // Old content, with tail applied (then kept in memory until the end is reached).
    let mut tail = TailSink::new(opts.tail);
    let mut batch: Vec<u8> = Vec::new();
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
            f.switch(next).await;
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
        let (file, id) = open_with_id(&path).await?;
        Ok(Follower {
            path,
            file,
            id,
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

    /// Whether the file at the path was replaced (rotation) or truncated.
    async fn rotation(&self) -> Option<Rotation> {
        let meta = tokio::fs::metadata(&self.path).await.ok()?;
        if (meta.dev(), meta.ino()) != self.id {
            match open_with_id(&self.path).await {
                Ok((file, id)) => Some(Rotation::Replaced(file, id)),
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
            Rotation::Replaced(file, id) => {
                tracing::debug!(path = %self.path.display(), "log file rotated; following the new file");
                self.file = file;
                self.id = id;
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
    Replaced(tokio::fs::File, (u64, u64)),
    /// The file is shorter than what was read.
    Truncated,
}

async fn open_with_id(path: &Path) -> Result<(tokio::fs::File, (u64, u64)), LogError> {
    let open_err = |source| LogError::Open {
        path: path.to_path_buf(),
        source,
    };
    let file = tokio::fs::File::open(path).await.map_err(open_err)?;
    let meta = file.metadata().await.map_err(open_err)?;
    Ok((file, (meta.dev(), meta.ino())))
}

/// Counts and cuts output at [`ReadOptions::limit_bytes`].
struct Limit {
    remaining: Option<u64>,
}

impl Limit {
    fn new(limit: Option<u64>) -> Self {
        Limit { remaining: limit }
    }

    fn exhausted(&self) -> bool {
        self.remaining == Some(0)
    }

    /// The part of `m` that may still be printed (and counts it as printed).
    fn take<'a>(&mut self, m: &'a [u8]) -> &'a [u8] {
        match &mut self.remaining {
            None => m,
            Some(r) => {
                let n = (*r).min(m.len() as u64) as usize;
                *r -= n as u64;
                &m[..n]
            }
        }
    }

    fn write(&mut self, m: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(self.take(m));
    }
}

/// Writes messages straight through, or keeps the last N for `tail`.
struct TailSink {
    tail: Option<(usize, VecDeque<Vec<u8>>)>,
    error: Option<std::io::Error>,
}

impl TailSink {
    fn new(tail: Option<usize>) -> Self {
        TailSink {
            tail: tail.map(|n| (n, VecDeque::with_capacity(n.min(4096)))),
            error: None,
        }
    }

    fn push(&mut self, m: &[u8], limit: &mut Limit, out: &mut impl Write) {
        match &mut self.tail {
            Some((n, ring)) => {
                if *n == 0 {
                    return;
                }
                if ring.len() == *n {
                    ring.pop_front();
                }
                ring.push_back(m.to_vec());
            }
            None => self.write(m, limit, out),
        }
    }

    fn write(&mut self, m: &[u8], limit: &mut Limit, out: &mut impl Write) {
        if self.error.is_some() {
            return;
        }
        let m = limit.take(m);
        if !m.is_empty()
            && let Err(e) = out.write_all(m)
        {
            self.error = Some(e);
        }
    }

    /// Writes the kept tail.
    fn finish(&mut self, limit: &mut Limit, out: &mut impl Write) {
        if let Some((_, ring)) = self.tail.take() {
            for m in ring {
                self.write(&m, limit, out);
            }
        }
    }
}

/// A split line waiting for its `F` chunk.
struct Pending {
    time: DateTime<Utc>,
    msg: Vec<u8>,
}

/// Joins `P…F` chunks per stream, filters and formats messages.
struct Assembler {
    stream: Option<Stream>,
    since: Option<DateTime<Utc>>,
    timestamps: bool,
    pending: [Option<Pending>; 2],
    scratch: Vec<u8>,
    skipped: u64,
}

impl Assembler {
    fn new(opts: &ReadOptions) -> Self {
        Assembler {
            stream: opts.stream,
            since: opts.since,
            timestamps: opts.timestamps,
            pending: [None, None],
            scratch: Vec::new(),
            skipped: 0,
        }
    }

    /// Processes one CRI line; calls `emit` with each finished, formatted message
    /// (`[timestamp ]msg\n`). Returns `false` if the line was malformed (and skipped).
    fn push(&mut self, line: &[u8], path: &Path, emit: &mut impl FnMut(&[u8])) -> bool {
        let LineRef {
            time,
            stream,
            partial,
            msg,
        } = match parse_parts(line) {
            Ok(p) => p,
            Err(e) => {
                self.skipped += 1;
                if self.skipped <= 10 {
                    tracing::warn!(path = %path.display(), error = %e, "skipping malformed log line");
                }
                return false;
            }
        };
        if self.stream.is_some_and(|s| s != stream) {
            return true;
        }
        let slot = &mut self.pending[stream.index()];
        match (slot.take(), partial) {
            (None, false) => self.emit(time, msg, emit),
            (None, true) => {
                *slot = Some(Pending {
                    time,
                    msg: msg.to_vec(),
                })
            }
            (Some(mut p), partial) => {
                p.msg.extend_from_slice(msg);
                if !partial || p.msg.len() >= MAX_MESSAGE_BYTES {
                    self.emit(p.time, &p.msg, emit);
                } else {
                    self.pending[stream.index()] = Some(p);
                }
            }
        }
        true
    }

    /// Emits split lines whose `F` chunk never came, oldest first.
    fn flush(&mut self, emit: &mut impl FnMut(&[u8])) {
        let mut left: Vec<Pending> = self.pending.iter_mut().filter_map(Option::take).collect();
        left.sort_by_key(|p| p.time);
        for p in left {
            self.emit(p.time, &p.msg, emit);
        }
    }

    fn emit(&mut self, time: DateTime<Utc>, msg: &[u8], emit: &mut impl FnMut(&[u8])) {
        if self.since.is_some_and(|since| time < since) {
            return;
        }
        self.scratch.clear();
        if self.timestamps {
            self.scratch.extend_from_slice(
                time.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
                    .as_bytes(),
            );
            self.scratch.push(b' ');
        }
        self.scratch.extend_from_slice(msg);
        self.scratch.push(b'\n');
        emit(&self.scratch);
    }
}
