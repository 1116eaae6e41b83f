//! The CRI log writer used by the shim.
//!
//! It runs on the shim's single thread (no tokio): one poll(2) loop over the read ends
//! of the container's stdout and stderr pipes, a line buffer per stream, and one
//! `write(2)` to the log file per wake-up, so `podhost logs -f` sees lines promptly
//! without a syscall per line.
//!
//! Output is never allowed to back up into the container: if the log file cannot be
//! written (disk full), the writer keeps draining the pipes, drops the output (counted
//! in the drop record, see [`super::drops`]), retries on the next wake-up and reports
//! [`LogError::Write`] when it ends. Rotation happens here too, before the write that
//! would cross the size limit ([`super::sink`], [`super::rotate`]).

use std::fs::{File, OpenOptions};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use chrono::{SecondsFormat, Utc};
use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use super::sink::Sink;
use super::{LogError, MAX_LINE_BYTES, Stream, WriterOptions};

/// Size of one read(2) from a pipe (the default pipe capacity).
const READ_CHUNK: usize = 64 * 1024;
/// Reads per stream per wake-up, so a flooding stream cannot starve the other one.
const READS_PER_WAKE: usize = 4;

/// Opens (creating if needed) a CRI log file for appending, with mode 0640, creating
/// its parent directories (mode 0755).
pub fn open_log_file(log_path: &Path) -> Result<File, LogError> {
    if let Some(dir) = log_path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| LogError::CreateDir {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o640)
        .custom_flags(libc::O_CLOEXEC)
        .open(log_path)
        .map_err(|source| LogError::Open {
            path: log_path.to_path_buf(),
            source,
        })
}

/// Copies the container's stdout and stderr pipes into the CRI log file at `log_path`
/// until both pipes reach end of file (every process holding their write ends has
/// closed them or exited), with the default [`WriterOptions`] (the kubelet's rotation,
/// no drop record).
///
/// Blocks the calling thread; uses no other thread until a rotation needs compression.
pub fn copy_streams_to_cri_log(
    stdout: OwnedFd,
    stderr: OwnedFd,
    log_path: &Path,
) -> Result<(), LogError> {
    copy_streams(
        stdout,
        stderr,
        log_path,
        &WriterOptions::default(),
        None,
        || {},
    )
}

/// Copies the read ends of the container's `stdout` and `stderr` pipes into the CRI log
/// file at `log_path` (opened or created with [`open_log_file`]), rotating it as
/// `opts.rotation` says and recording dropped output in `opts.drop_record`.
///
/// Returns when both pipes reach end of file, or when `stop` (an eventfd or the read end
/// of a pipe) becomes readable or hung up. On stop, whatever the pipes hold at that
/// moment is still copied. Text left without a trailing newline is written as an `F`
/// line in both cases. `on_drained` is called once the last line is written, before
/// the function waits for the compression of rotated files still queued.
///
/// The pipes are switched to non-blocking mode. Errors: [`LogError::Poll`] and
/// [`LogError::Pipe`] end the copy at once (after writing what was read);
/// [`LogError::Write`] is reported only at the end, since the copy keeps draining the
/// pipes after a failed write (dropping output until writes work again).
pub fn copy_streams(
    stdout: OwnedFd,
    stderr: OwnedFd,
    log_path: &Path,
    opts: &WriterOptions,
    stop: Option<BorrowedFd<'_>>,
    on_drained: impl FnOnce(),
) -> Result<(), LogError> {
    let sink = Sink::open(log_path, opts);
    let mut copier = Copier {
        streams: [
            StreamState::new(stdout, Stream::Stdout),
            StreamState::new(stderr, Stream::Stderr),
        ],
        sink,
        buf: vec![0u8; READ_CHUNK],
    };
    for s in &copier.streams {
        set_nonblocking(s.fd.as_fd()).map_err(|source| LogError::Pipe {
            path: log_path.to_path_buf(),
            stream: s.stream,
            source,
        })?;
    }
    let result = copier.run(stop);
    copier.finish();
    on_drained();
    let written = copier.sink.finish();
    result?;
    written
}

fn set_nonblocking(fd: BorrowedFd<'_>) -> nix::Result<()> {
    let flags = OFlag::from_bits_retain(fcntl(fd, FcntlArg::F_GETFL)?);
    fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    Ok(())
}

struct Copier {
    streams: [StreamState; 2],
    sink: Sink,
    buf: Vec<u8>,
}

impl Copier {
    fn run(&mut self, stop: Option<BorrowedFd<'_>>) -> Result<(), LogError> {
        loop {
            let open: Vec<usize> = (0..2).filter(|&i| self.streams[i].open).collect();
            if open.is_empty() {
                return Ok(());
            }
            let (ready, stop_ready) = {
                let mut fds: Vec<PollFd<'_>> = open
                    .iter()
                    .map(|&i| PollFd::new(self.streams[i].fd.as_fd(), PollFlags::POLLIN))
                    .collect();
                if let Some(stop) = stop {
                    fds.push(PollFd::new(stop, PollFlags::POLLIN));
                }
                match poll(&mut fds, PollTimeout::NONE) {
                    Ok(_) => {}
                    Err(Errno::EINTR) => continue,
                    Err(source) => {
                        return Err(LogError::Poll {
                            path: self.sink.path.clone(),
                            source,
                        });
                    }
                }
                let fired = |fd: &PollFd<'_>| fd.revents().is_some_and(|r| !r.is_empty());
                let ready: Vec<usize> = open
                    .iter()
                    .zip(&fds)
                    .filter(|(_, fd)| fired(fd))
                    .map(|(&i, _)| i)
                    .collect();
                let stop_ready = stop.is_some() && fds.last().is_some_and(fired);
                (ready, stop_ready)
            };
            let ts = timestamp();
            for i in ready {
                let res =
                    self.streams[i].drain(&mut self.buf, &ts, &mut self.sink.out, READS_PER_WAKE);
                if let Err(source) = res {
                    self.sink.flush();
                    return Err(LogError::Pipe {
                        path: self.sink.path.clone(),
                        stream: self.streams[i].stream,
                        source,
                    });
                }
            }
            if stop_ready {
                // Copy what the pipes hold right now, then stop.
                let ts = timestamp();
                for s in &mut self.streams {
                    if s.open {
                        let res = s.drain(&mut self.buf, &ts, &mut self.sink.out, usize::MAX);
                        if let Err(source) = res {
                            self.sink.flush();
                            return Err(LogError::Pipe {
                                path: self.sink.path.clone(),
                                stream: s.stream,
                                source,
                            });
                        }
                    }
                }
                self.sink.flush();
                return Ok(());
            }
            self.sink.flush();
        }
    }

    /// Writes any text still held without a trailing newline as `F` lines.
    fn finish(&mut self) {
        let ts = timestamp();
        for s in &mut self.streams {
            s.flush_pending(&ts, &mut self.sink.out);
        }
        self.sink.flush();
    }
}

/// The current time in the CRI format: RFC 3339, UTC, nine fractional digits, `Z`.
fn timestamp() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Nanos, true)
}

pub(super) struct StreamState {
    fd: OwnedFd,
    stream: Stream,
    /// Text received after the last newline; never longer than [`MAX_LINE_BYTES`].
    pending: Vec<u8>,
    open: bool,
}

impl StreamState {
    pub(super) fn new(fd: OwnedFd, stream: Stream) -> Self {
        StreamState {
            fd,
            stream,
            pending: Vec::new(),
            open: true,
        }
    }

    /// Reads up to `max_reads` times (until the pipe is empty or at EOF) and appends
    /// the resulting CRI lines to `out`. At EOF, the pending text is flushed and the
    /// stream is marked closed.
    fn drain(
        &mut self,
        buf: &mut [u8],
        ts: &str,
        out: &mut Vec<u8>,
        max_reads: usize,
    ) -> nix::Result<()> {
        let mut reads = 0;
        while reads < max_reads {
            match nix::unistd::read(&self.fd, buf) {
                Ok(0) => {
                    self.open = false;
                    self.flush_pending(ts, out);
                    return Ok(());
                }
                Ok(n) => {
                    reads += 1;
                    self.feed(&buf[..n], ts, out);
                }
                Err(Errno::EINTR) => {}
                Err(Errno::EAGAIN) => return Ok(()),
                Err(e) => {
                    self.open = false;
                    self.flush_pending(ts, out);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Turns freshly read bytes into CRI lines.
    pub(super) fn feed(&mut self, mut data: &[u8], ts: &str, out: &mut Vec<u8>) {
        while let Some(nl) = data.iter().position(|&b| b == b'\n') {
            if self.pending.is_empty() {
                encode_line(out, ts, self.stream, &data[..nl]);
            } else {
                self.pending.extend_from_slice(&data[..nl]);
                encode_line(out, ts, self.stream, &self.pending);
                self.pending.clear();
            }
            data = &data[nl + 1..];
        }
        self.pending.extend_from_slice(data);
        // Split off full-size partial chunks only while more than a chunk is held: a
        // line of exactly MAX_LINE_BYTES followed by a newline is one F line.
        if self.pending.len() > MAX_LINE_BYTES {
            let mut start = 0;
            while self.pending.len() - start > MAX_LINE_BYTES {
                encode_chunk(
                    out,
                    ts,
                    self.stream,
                    true,
                    &self.pending[start..start + MAX_LINE_BYTES],
                );
                start += MAX_LINE_BYTES;
            }
            self.pending.drain(..start);
        }
    }

    /// The text after the last newline, at the stream's end: written as `P` chunks
    /// only, since the container never ended the line (containerd does the same; the
    /// kubelet's readers then give it back without a newline, e.g. a termination
    /// message taken from `echo -n DONE`).
    pub(super) fn flush_pending(&mut self, ts: &str, out: &mut Vec<u8>) {
        for chunk in self.pending.chunks(MAX_LINE_BYTES) {
            encode_chunk(out, ts, self.stream, true, chunk);
        }
        self.pending.clear();
    }
}

/// Appends one whole line (without its newline) as CRI lines: `P` chunks of
/// [`MAX_LINE_BYTES`] while more remains, then the rest as `F`.
pub(crate) fn encode_line(out: &mut Vec<u8>, ts: &str, stream: Stream, mut line: &[u8]) {
    while line.len() > MAX_LINE_BYTES {
        encode_chunk(out, ts, stream, true, &line[..MAX_LINE_BYTES]);
        line = &line[MAX_LINE_BYTES..];
    }
    encode_chunk(out, ts, stream, false, line);
}

/// Appends one CRI line: `<ts> <stream> <P|F> <msg>\n`.
pub(crate) fn encode_chunk(out: &mut Vec<u8>, ts: &str, stream: Stream, partial: bool, msg: &[u8]) {
    out.reserve(ts.len() + msg.len() + 11);
    out.extend_from_slice(ts.as_bytes());
    out.push(b' ');
    out.extend_from_slice(stream.as_str().as_bytes());
    out.extend_from_slice(if partial { b" P " } else { b" F " });
    out.extend_from_slice(msg);
    out.push(b'\n');
}
