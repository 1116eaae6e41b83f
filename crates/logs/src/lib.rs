//! Container logs in the CRI log format.
//!
//! Each line of a container log file (`/var/log/pods/<ns>_<pod>_<uid>/<container>/<restart>.log`)
//! is
//!
//! ```text
//! <RFC3339Nano timestamp> <stdout|stderr> <P|F> <message bytes>\n
//! ```
//!
//! exactly as containerd writes it and as the kubelet, `kubectl logs` and log shippers
//! (fluent-bit, promtail, vector) read it. A line the container wrote that is longer than
//! [`MAX_LINE_BYTES`] is split into `P` (partial) chunks; the last chunk is tagged `F`
//! (full).
//!
//! - [`writer`]: synchronous, used by the single-threaded shim: drains the container's
//!   stdout and stderr pipes with poll(2) and appends CRI lines to the log file,
//!   rotating it ([`rotate`], [`sink`]) and compressing older rotated files on a thread
//!   of its own ([`compress`]); output it cannot write is dropped and recorded
//!   ([`drops`]).
//! - [`files`]: the files of one container log, oldest first (rotated, then current).
//! - [`reader`]: parses CRI lines, reassembles `P…F` chunks into whole messages,
//!   implements `--tail`, `--timestamps`, `--since`, `--limit-bytes` and stream
//!   selection.
//! - [`follow`](mod@follow): follows a growing (or rotated) log file from tokio.
//!
//! In the workspace (docs/architecture.md, "Crates"): uses model-core. It may not:
//! Kubernetes API types (the single-threaded shim links it) or anything of the daemon.

pub mod compress;
pub mod drops;
pub mod files;
pub mod follow;
pub mod reader;
pub mod rotate;
mod sink;
mod tail;
pub mod writer;

use std::fmt;
use std::path::PathBuf;

pub use drops::{LOG_DROPS_FILE, LogDrops, read_drops};
pub use follow::follow;
pub use reader::{CriLine, ReadOptions, ReadSummary, parse_line, read_log, read_messages};
pub use rotate::{PolicyError, RotationPolicy, remove_log_files};
pub use writer::{copy_streams, copy_streams_to_cri_log, open_log_file};

/// How the writer treats the log file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriterOptions {
    /// Rotation (the kubelet's defaults unless the daemon's flags say otherwise).
    pub rotation: RotationPolicy,
    /// Where to record output that could not be written (the attempt dir's
    /// [`LOG_DROPS_FILE`]); `None`: only counted and logged.
    pub drop_record: Option<PathBuf>,
}

/// Longest message chunk in one CRI line (containerd's default
/// `max_container_log_line_size`, 16 KiB). Longer lines are split into `P` chunks of
/// exactly this size followed by a final `F` chunk.
pub const MAX_LINE_BYTES: usize = 16 * 1024;

/// Which of the container's output streams a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
    /// The container's standard output (file descriptor 1).
    Stdout,
    /// The container's standard error (file descriptor 2).
    Stderr,
}

impl Stream {
    /// The tag used in CRI log lines: `stdout` or `stderr`.
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }

    /// Parses the CRI stream tag (`stdout` / `stderr`).
    pub fn from_tag(tag: &[u8]) -> Option<Stream> {
        match tag {
            b"stdout" => Some(Stream::Stdout),
            b"stderr" => Some(Stream::Stderr),
            _ => None,
        }
    }

    fn index(self) -> usize {
        match self {
            Stream::Stdout => 0,
            Stream::Stderr => 1,
        }
    }
}

impl fmt::Display for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Errors of the log writer and reader.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The directory that should hold the log file could not be created.
    #[error("cannot create log directory {path}: {source}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The log file could not be opened (or created).
    #[error("cannot open log file {path}: {source}")]
    Open {
        /// The log file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Appending to the log file failed (for example the disk is full). The writer keeps
    /// draining the container's pipes after this error, dropping output, so the
    /// container never blocks on a full pipe; the error is reported when it ends.
    #[error("cannot write log file {path} ({dropped} bytes of output dropped): {source}")]
    Write {
        /// The log file.
        path: PathBuf,
        /// How many bytes of CRI lines were lost.
        dropped: u64,
        /// The first write error.
        #[source]
        source: std::io::Error,
    },
    /// Reading the log file failed.
    #[error("cannot read log file {path}: {source}")]
    Read {
        /// The log file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Setting up or reading one of the container's output pipes failed.
    #[error("cannot read the container's {stream} pipe (logging to {path}): {source}")]
    Pipe {
        /// The log file the pipe is copied to.
        path: PathBuf,
        /// Which pipe.
        stream: Stream,
        /// The underlying error.
        #[source]
        source: nix::Error,
    },
    /// poll(2) on the container's pipes failed.
    #[error("cannot poll the container's output pipes (logging to {path}): {source}")]
    Poll {
        /// The log file the pipes are copied to.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: nix::Error,
    },
    /// Writing the formatted log to the caller's output failed (for example the
    /// client of `podhost logs` went away).
    #[error("cannot write the log of {path} to the output: {source}")]
    Output {
        /// The log file being read.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A line is not in the CRI log format.
    #[error("malformed CRI log line: {reason}")]
    Malformed {
        /// What is wrong with it.
        reason: String,
    },
}

#[cfg(test)]
mod rotation_tests;
#[cfg(test)]
mod tests;
