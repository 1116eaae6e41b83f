//! The shim's stderr and log, forwarded into the daemon's log.
//!
//! The shim writes to `<attempt dir>/shim.log` (its stderr is that file from the exec
//! on, so even a failure before its logger is set up lands there). A file rather than
//! a pipe because the shim must outlive the daemon and never depend on it: a pipe
//! whose reader died gives EPIPE (or SIGPIPE), one whose reader is slow blocks the
//! shim, and neither can be re-attached by the next daemon; the file needs no reader,
//! keeps what was written while the daemon was down, and is read again after a
//! restart. The daemon follows it with inotify (one instance for all logs,
//! `shim_log_watch`) until the shim's pidfd says the shim is gone, then reads the rest.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use tokio::io::unix::AsyncFd;

use super::shim_log_watch::LogWatch;

use podhost_disk::records::SHIM_LOG_FILE;

/// How often the log is looked at where inotify is unavailable.
const POLL_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// Where the shim's stderr goes: its log file, opened for appending (created if need be).
pub fn open_for_shim(bundle: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(bundle.join(SHIM_LOG_FILE))
}

/// Whether to forward what the log already holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForwardFrom {
    /// All of it (a shim adopted after a restart: its lines from while the daemon was
    /// down are marked `replayed`).
    Start,
    /// Only what comes (a shim spawned now: the file is new).
    Now,
}

/// Forwards the log of the shim `shim_pid` of `bundle` into the daemon's log until the
/// shim is gone. Never fails: where it cannot follow, it says so once.
pub fn forward(bundle: &Path, shim_pid: i32, from: ForwardFrom) {
    let path = bundle.join(SHIM_LOG_FILE);
    let registered = super::shim_client::pidfd_open(shim_pid).and_then(|fd| {
        // SAFETY: the OwnedFd moves into the AsyncFd, so it stays open and refers to
        // the same pidfd for the AsyncFd's whole lifetime.
        unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }.map_err(|e| {
            super::RuntimeError::io("watch the pidfd of the shim of", bundle, e.into_parts().1)
        })
    });
    let pidfd = match registered {
        Ok(fd) => fd,
        Err(e) => {
            tracing::warn!(error = %e, log = %path.display(), "cannot follow the shim's log; read it there");
            return;
        }
    };
    let mut tail = Tail::new(path, bundle, from);
    tokio::spawn(async move { tail.follow(pidfd).await });
}

/// A reader of the shim's log that emits whole lines.
#[derive(Debug)]
struct Tail {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
    /// Lines up to this offset were written before this daemon followed the file.
    replay_until: u64,
    pod: String,
    container: String,
}

impl Tail {
    fn new(path: PathBuf, bundle: &Path, from: ForwardFrom) -> Self {
        let (pod, container) = names(bundle);
        let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        Self {
            path,
            offset: 0,
            partial: Vec::new(),
            replay_until: if from == ForwardFrom::Start { len } else { 0 },
            pod,
            container,
        }
    }

    async fn follow(&mut self, pidfd: AsyncFd<OwnedFd>) {
        let watch = LogWatch::new(&self.path);
        // Only where the file cannot be watched: a slow look at it instead.
        let mut poll = tokio::time::interval(POLL_EVERY);
        self.forward_new(false);
        loop {
            tokio::select! {
                _ = pidfd.readable() => break,
                () = watch.changed() => self.forward_new(false),
                _ = poll.tick(), if watch.polling() => self.forward_new(false),
            }
        }
        drop(watch);
        self.forward_new(true);
    }

    /// Emits the lines written since the last call; at the end also an unfinished one.
    fn forward_new(&mut self, at_end: bool) {
        for (line, replayed) in self.read_lines(at_end) {
            emit(&self.pod, &self.container, &line, replayed);
        }
    }

    fn read_lines(&mut self, at_end: bool) -> Vec<(String, bool)> {
        use std::io::{Read, Seek, SeekFrom};
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return Vec::new();
        };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        if len < self.offset {
            // Truncated or replaced: start over.
            self.offset = 0;
            self.partial.clear();
        }
        let mut buf = Vec::new();
        if f.seek(SeekFrom::Start(self.offset)).is_err() || f.read_to_end(&mut buf).is_err() {
            return Vec::new();
        }
        let mut line_start = self.offset - self.partial.len() as u64;
        self.offset += buf.len() as u64;
        self.partial.extend_from_slice(&buf);
        let mut out = Vec::new();
        while let Some(nl) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=nl).collect();
            let replayed = line_start < self.replay_until;
            line_start += line.len() as u64;
            let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
            if !text.trim().is_empty() {
                out.push((text, replayed));
            }
        }
        if at_end && !self.partial.is_empty() {
            let text = String::from_utf8_lossy(&self.partial).into_owned();
            out.push((text, line_start < self.replay_until));
            self.partial.clear();
        }
        out
    }
}

/// `<namespace>/<pod>` and the container's name, from the bundle's OCI annotations.
fn names(bundle: &Path) -> (String, String) {
    let spec: serde_json::Value = std::fs::read(bundle.join("config.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let a = &spec["annotations"];
    let get = |k: &str| a[k].as_str().unwrap_or("?").to_string();
    (
        format!(
            "{}/{}",
            get("io.kubernetes.pod.namespace"),
            get("io.kubernetes.pod.name")
        ),
        get("io.kubernetes.container.name"),
    )
}

/// One shim line into the daemon's log, at the level the shim logged it.
fn emit(pod: &str, container: &str, line: &str, replayed: bool) {
    match level_of(line) {
        tracing::Level::ERROR => {
            tracing::error!(target: "podhost::shim", pod, container, replayed, "{line}")
        }
        tracing::Level::WARN => {
            tracing::warn!(target: "podhost::shim", pod, container, replayed, "{line}")
        }
        tracing::Level::INFO => {
            tracing::info!(target: "podhost::shim", pod, container, replayed, "{line}")
        }
        _ => tracing::debug!(target: "podhost::shim", pod, container, replayed, "{line}"),
    }
}

/// The level of a tracing-formatted line (`<time>  WARN target: …`); anything else (a
/// panic message, libcontainer's own stderr) counts as a warning. libcontainer warns
/// about every syscall of the seccomp profile this kernel does not know (a dozen lines
/// per start on an older kernel): those are debug.
fn level_of(line: &str) -> tracing::Level {
    if line.contains("libcontainer::seccomp: failed to resolve syscall") {
        return tracing::Level::DEBUG;
    }
    let word = line.split_whitespace().nth(1).unwrap_or_default();
    match word {
        "ERROR" => tracing::Level::ERROR,
        "WARN" => tracing::Level::WARN,
        "INFO" | "DEBUG" | "TRACE" => tracing::Level::INFO,
        _ => tracing::Level::WARN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn whole_lines_are_read_once_and_replayed_ones_are_marked() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = open_for_shim(dir.path()).unwrap();
        f.write_all(b"old one\nold two\n").unwrap();
        let mut tail = Tail::new(
            dir.path().join(SHIM_LOG_FILE),
            dir.path(),
            ForwardFrom::Start,
        );
        f.write_all(b"new\nhalf").unwrap();
        let lines = tail.read_lines(false);
        assert_eq!(
            lines,
            vec![
                ("old one".to_string(), true),
                ("old two".to_string(), true),
                ("new".to_string(), false)
            ]
        );
        assert!(tail.read_lines(false).is_empty(), "nothing new");
        f.write_all(b" done\nlast").unwrap();
        assert_eq!(
            tail.read_lines(false),
            vec![("half done".to_string(), false)]
        );
        assert_eq!(tail.read_lines(true), vec![("last".to_string(), false)]);
    }

    #[test]
    fn a_new_shim_log_is_followed_from_now() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = open_for_shim(dir.path()).unwrap();
        let mut tail = Tail::new(dir.path().join(SHIM_LOG_FILE), dir.path(), ForwardFrom::Now);
        f.write_all(b"x\n").unwrap();
        assert_eq!(tail.read_lines(false), vec![("x".to_string(), false)]);
    }

    #[test]
    fn levels_follow_the_shim_and_unknown_lines_are_warnings() {
        assert_eq!(
            level_of("2025-01-01T00:00:00.000000Z  WARN podhost::shim::kernel: x"),
            tracing::Level::WARN
        );
        assert_eq!(
            level_of("2025-01-01T00:00:00.000000Z ERROR podhost: x"),
            tracing::Level::ERROR
        );
        assert_eq!(
            level_of("2025-01-01T00:00:00.000000Z  INFO podhost: x"),
            tracing::Level::INFO
        );
        assert_eq!(
            level_of("thread 'main' panicked at src/x.rs"),
            tracing::Level::WARN
        );
        assert_eq!(
            level_of(
                "2025-01-01T00:00:00Z  WARN libcontainer::seccomp: failed to resolve syscall, likely kernel doesn't support this. \"mseal\""
            ),
            tracing::Level::DEBUG
        );
    }
}
