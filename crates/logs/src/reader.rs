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
use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use chrono::{DateTime, Utc};

use super::files::log_parts;
use super::tail::plan;
use super::{LogError, Stream};

/// Re-exported here too: following is reading a file that grows.
pub use super::follow::{FOLLOW_INTERVAL, follow};

/// A joined message longer than this is printed (with a newline) once it reaches this
/// size, and the rest of the line starts a new message; bounds the reader's memory when
/// a container writes endless text without a newline.
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

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
pub(super) struct LineRef<'a> {
    pub(super) time: DateTime<Utc>,
    pub(super) stream: Stream,
    pub(super) partial: bool,
    pub(super) msg: &'a [u8],
}

/// Borrowing parser behind [`parse_line`].
pub(super) fn parse_parts(line: &[u8]) -> Result<LineRef<'_>, LogError> {
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

/// Writes the messages of the container log at `log` to `out` — its rotated files
/// (oldest first, `.gz` ones decompressed), then `log` itself — one per line (`msg\n`,
/// or `<timestamp> msg\n` with [`ReadOptions::timestamps`]), joining split lines (also
/// across a rotation) and applying the options.
///
/// `tail` reads plain files backwards from their end and opens only the files it needs;
/// with `since`, rotated files rotated before that time are not opened. A rotated file
/// removed (as the oldest) while it is read is skipped. The summary's `end_offset` is
/// the offset in `log` itself.
pub fn read_log(
    log: &Path,
    opts: &ReadOptions,
    out: &mut impl Write,
) -> Result<ReadSummary, LogError> {
    let mut parts = log_parts(log)?;
    if let Some(since) = opts.since {
        // Every line of a rotated file is older than its rotation (to the second).
        parts.retain(|p| {
            p.rotated_at()
                .is_none_or(|t| t + chrono::Duration::seconds(1) >= since)
        });
    }
    let segments = plan(parts, opts.tail, opts.stream)?;
    if !segments.iter().any(|s| s.part.key.is_none()) && !log.exists() {
        return Err(LogError::Open {
            path: log.to_path_buf(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        });
    }
    let mut state = ReadState::new(opts);
    let mut summary = ReadSummary::default();
    for seg in segments {
        let current = seg.part.key.is_none();
        let reader = seg
            .reader
            .starting_at(seg.start)
            .map_err(|source| LogError::Read {
                path: seg.part.path.clone(),
                source,
            })?
            .into_buf_read();
        let (end, skipped) = state.feed(reader, &seg.part.path, out)?;
        summary.skipped_lines += skipped;
        if current {
            summary.end_offset = seg.start + end;
        }
        if state.limit.exhausted() {
            break;
        }
    }
    state.finish(log, out)?;
    Ok(summary)
}

/// Writes the messages of the one CRI log file at `path` to `out`, one per line
/// (`msg\n`, or `<timestamp> msg\n` with [`ReadOptions::timestamps`]), joining split
/// lines and applying the options. [`read_log`] reads a container log with its
/// rotated files.
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
    let mut state = ReadState::new(opts);
    let (end_offset, skipped_lines) =
        state.feed(BufReader::with_capacity(64 * 1024, file), path, out)?;
    state.finish(path, out)?;
    Ok(ReadSummary {
        end_offset,
        skipped_lines,
    })
}

/// One pass over one or more files: the joiner, the tail and the byte limit.
struct ReadState {
    asm: Assembler,
    sink: TailSink,
    limit: Limit,
}

impl ReadState {
    fn new(opts: &ReadOptions) -> Self {
        ReadState {
            asm: Assembler::new(opts),
            sink: TailSink::new(opts.tail),
            limit: Limit::new(opts.limit_bytes),
        }
    }

    /// Feeds the complete lines of `reader`; returns the bytes consumed (up to the last
    /// newline) and the malformed lines skipped.
    fn feed(
        &mut self,
        mut reader: impl BufRead,
        path: &Path,
        out: &mut impl Write,
    ) -> Result<(u64, u64), LogError> {
        let mut line = Vec::with_capacity(1024);
        let (mut consumed, mut skipped) = (0u64, 0u64);
        let ReadState { asm, sink, limit } = self;
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
            consumed += n as u64;
            if !asm.push(&line, path, &mut |m| sink.push(m, limit, out)) {
                skipped += 1;
            }
            if let Some(source) = sink.error.take() {
                return Err(LogError::Output {
                    path: path.to_path_buf(),
                    source,
                });
            }
            if limit.exhausted() {
                break;
            }
        }
        Ok((consumed, skipped))
    }

    /// Prints split lines left without their `F` chunk and the kept tail.
    fn finish(&mut self, path: &Path, out: &mut impl Write) -> Result<(), LogError> {
        let ReadState { asm, sink, limit } = self;
        if !limit.exhausted() {
            asm.flush(&mut |m| sink.push(m, limit, out));
            sink.finish(limit, out);
        }
        let write_err = |source| LogError::Output {
            path: path.to_path_buf(),
            source,
        };
        if let Some(e) = sink.error.take() {
            return Err(write_err(e));
        }
        out.flush().map_err(write_err)
    }
}

/// Counts and cuts output at [`ReadOptions::limit_bytes`].
pub(super) struct Limit {
    remaining: Option<u64>,
}

impl Limit {
    pub(super) fn new(limit: Option<u64>) -> Self {
        Limit { remaining: limit }
    }

    pub(super) fn exhausted(&self) -> bool {
        self.remaining == Some(0)
    }

    /// The part of `m` that may still be printed (and counts it as printed).
    pub(super) fn take<'a>(&mut self, m: &'a [u8]) -> &'a [u8] {
        match &mut self.remaining {
            None => m,
            Some(r) => {
                let n = podhost_model_core::convert::usize_saturating(*r).min(m.len());
                *r -= podhost_model_core::convert::len_u64(n);
                &m[..n]
            }
        }
    }

    pub(super) fn write(&mut self, m: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(self.take(m));
    }
}

/// Writes messages straight through, or keeps the last N for `tail`.
pub(super) struct TailSink {
    tail: Option<(usize, VecDeque<Vec<u8>>)>,
    error: Option<std::io::Error>,
}

impl TailSink {
    pub(super) fn new(tail: Option<usize>) -> Self {
        TailSink {
            tail: tail.map(|n| (n, VecDeque::with_capacity(n.min(4096)))),
            error: None,
        }
    }

    pub(super) fn push(&mut self, m: &[u8], limit: &mut Limit, out: &mut impl Write) {
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
    pub(super) fn finish(&mut self, limit: &mut Limit, out: &mut impl Write) {
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
pub(super) struct Assembler {
    stream: Option<Stream>,
    since: Option<DateTime<Utc>>,
    timestamps: bool,
    pending: [Option<Pending>; 2],
    scratch: Vec<u8>,
    skipped: u64,
}

impl Assembler {
    pub(super) fn new(opts: &ReadOptions) -> Self {
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
    pub(super) fn push(&mut self, line: &[u8], path: &Path, emit: &mut impl FnMut(&[u8])) -> bool {
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

    /// Processes every complete line of `data` (a trailing fragment is ignored).
    pub(super) fn push_lines(&mut self, data: &[u8], path: &Path, emit: &mut impl FnMut(&[u8])) {
        for line in data.split_inclusive(|&b| b == b'\n') {
            if line.ends_with(b"\n") {
                self.push(line, path, emit);
            }
        }
    }

    /// Emits split lines whose `F` chunk never came, oldest first, without a newline:
    /// the container never wrote one (the kubelet's log reader gives a `P` line's text
    /// as it is).
    pub(super) fn flush(&mut self, emit: &mut impl FnMut(&[u8])) {
        let mut left: Vec<Pending> = self.pending.iter_mut().filter_map(Option::take).collect();
        left.sort_by_key(|p| p.time);
        for p in left {
            self.emit_unterminated(p.time, &p.msg, emit);
        }
    }

    fn emit(&mut self, time: DateTime<Utc>, msg: &[u8], emit: &mut impl FnMut(&[u8])) {
        if self.format(time, msg) {
            self.scratch.push(b'\n');
            emit(&self.scratch);
        }
    }

    fn emit_unterminated(&mut self, time: DateTime<Utc>, msg: &[u8], emit: &mut impl FnMut(&[u8])) {
        if self.format(time, msg) {
            emit(&self.scratch);
        }
    }

    /// `[timestamp ]msg` into the scratch buffer; false if `--since` leaves it out.
    fn format(&mut self, time: DateTime<Utc>, msg: &[u8]) -> bool {
        if self.since.is_some_and(|since| time < since) {
            return false;
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
        true
    }
}
