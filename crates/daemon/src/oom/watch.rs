//! The tokio task that reads the kernel log and sends [`OomEvent`]s.
//!
//! `/dev/kmsg` semantics: every `read()` returns exactly one record, `EAGAIN` when there
//! is none left (non-blocking), `EPIPE` when records were overwritten before they were
//! read (the next read continues with the oldest record still there). The device is
//! read from the start of the ring buffer; records up to the saved cursor only rebuild
//! the parser's context. After each batch (every record up to `EAGAIN`) the events are
//! sent and then the cursor is saved, so a restart replays nothing, unless the daemon
//! dies between sending a batch and saving its cursor.
//!
//! Line mode: when the path is not a character device (a regular file or a FIFO, as in
//! tests and in the VM harness), it is read as text with one record per line. A regular
//! file is read to its end; a FIFO until its last writer closes it.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::PathBuf;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::io::unix::AsyncFd;
use tokio::sync::mpsc::Sender;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{debug, error, info, warn};

use podhost_runtime::readable_fd::register_readable;

use super::cursor::{BOOT_ID_PATH, KmsgCursor, is_new, read_boot_id};
use super::event::OomEvent;
use super::lines::LineSplitter;
use super::parse::OomParser;
use super::record::parse_record;

/// Large enough for any record: the kernel fails a smaller read with `EINVAL`.
const READ_BUF: usize = 16 * 1024;
/// Reads per batch before events are sent and the cursor saved (first read of a full
/// ring buffer).
const MAX_BATCH_READS: usize = 4096;
/// How often the cursor follows records that held no OOM kill. Each save is a durable
/// write (temp, fsync, rename, fsync of the directory), and the kernel logs lines for
/// much else: a pod's veth alone logs about ten as it comes and goes. A cursor behind
/// such records costs a restart only their parsing again: they hold no event to report
/// twice. A batch that sent an event, or the end of the input, saves at once.
const QUIET_SAVE_EVERY: Duration = Duration::from_secs(30);

/// Where the watcher reads and keeps its state.
#[derive(Debug, Clone)]
pub struct WatchConfig {
    /// `/dev/kmsg`, or a file or FIFO with one record per line.
    pub kmsg_path: PathBuf,
    /// The cursor file (JSON, written atomically).
    pub cursor_file: PathBuf,
    /// Where the boot id is read ([`BOOT_ID_PATH`]).
    pub boot_id_path: PathBuf,
    /// How long a kill event may wait for a following `memory.oom.group` line.
    pub hold_grace: Duration,
}

impl WatchConfig {
    pub fn new(kmsg_path: PathBuf, cursor_file: PathBuf) -> Self {
        Self {
            kmsg_path,
            cursor_file,
            boot_id_path: PathBuf::from(BOOT_ID_PATH),
            hold_grace: Duration::from_millis(200),
        }
    }
}

/// Starts watching `kmsg_path` (see the module docs); events go to `tx`. The task ends
/// when the receiver is dropped, at the end of a file or FIFO, or on a read error.
pub fn spawn_kmsg_watcher(
    kmsg_path: PathBuf,
    cursor_file: PathBuf,
    tx: Sender<OomEvent>,
) -> std::io::Result<JoinHandle<()>> {
    spawn_kmsg_watcher_with(WatchConfig::new(kmsg_path, cursor_file), tx)
}

/// [`spawn_kmsg_watcher`] with every setting explicit. Must run inside a tokio runtime.
pub fn spawn_kmsg_watcher_with(
    cfg: WatchConfig,
    tx: Sender<OomEvent>,
) -> std::io::Result<JoinHandle<()>> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&cfg.kmsg_path)?;
    let kind = file.metadata()?.file_type();
    let source = if kind.is_char_device() {
        (&file).seek(SeekFrom::Start(0))?;
        Source::Kmsg(register_readable(file)?)
    } else if kind.is_fifo() {
        Source::Fifo(register_readable(file)?)
    } else {
        Source::File(tokio::fs::File::from_std(file))
    };
    let pump = Pump::new(&cfg, tx);
    info!(path = %cfg.kmsg_path.display(), resume_after = ?pump.resume_after, "watching the kernel log for OOM kills");
    Ok(tokio::spawn(async move {
        match source {
            Source::Kmsg(fd) => poll_loop(fd, pump, cfg.hold_grace, false).await,
            Source::Fifo(fd) => poll_loop(fd, pump, cfg.hold_grace, true).await,
            Source::File(file) => file_loop(file, pump).await,
        }
        debug!(path = %cfg.kmsg_path.display(), "kernel log watcher stopped");
    }))
}

enum Source {
    /// `/dev/kmsg`: one record per read.
    Kmsg(AsyncFd<File>),
    /// A FIFO in line mode.
    Fifo(AsyncFd<File>),
    /// A regular file in line mode.
    File(tokio::fs::File),
}

/// Waits for readiness, reads until `EAGAIN`, ends the batch; repeats.
async fn poll_loop(fd: AsyncFd<File>, mut pump: Pump, grace: Duration, line_mode: bool) {
    let mut buf = vec![0u8; READ_BUF];
    let mut lines = LineSplitter::default();
    loop {
        let ready = match pump.hold_deadline(grace) {
            Some(deadline) => tokio::time::timeout_at(deadline, fd.readable()).await.ok(),
            None => Some(fd.readable().await),
        };
        let mut guard = match ready {
            None => {
                // Nothing followed the held kill in time: send it.
                if !pump.end_batch(true).await {
                    return;
                }
                continue;
            }
            Some(Ok(guard)) => guard,
            Some(Err(e)) => {
                error!(error = %e, "kernel log watcher: cannot wait for records; OOM kills are no longer reported");
                return;
            }
        };
        let mut eof = false;
        for _ in 0..MAX_BATCH_READS {
            match fd.get_ref().read(&mut buf) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) if line_mode => lines.push(&buf[..n], |l| pump.record(l)),
                Ok(n) => pump.record(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    guard.clear_ready();
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.raw_os_error() == Some(libc::EPIPE) => {
                    warn!(
                        "kernel log records were overwritten before podhost read them; OOM kills in them are lost"
                    );
                }
                Err(e) => {
                    error!(error = %e, "kernel log watcher: read failed; OOM kills are no longer reported");
                    eof = true;
                    break;
                }
            }
        }
        if eof {
            lines.finish(|l| pump.record(l));
            pump.end_batch(true).await;
            return;
        }
        if !pump.end_batch(false).await {
            return;
        }
    }
}

/// Line mode on a regular file: read it to the end.
async fn file_loop(mut file: tokio::fs::File, mut pump: Pump) {
    let mut buf = vec![0u8; READ_BUF];
    let mut lines = LineSplitter::default();
    loop {
        match file.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => {
                lines.push(&buf[..n], |l| pump.record(l));
                if !pump.end_batch(false).await {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                error!(error = %e, "kernel log watcher: read failed");
                break;
            }
        }
    }
    lines.finish(|l| pump.record(l));
    pump.end_batch(true).await;
}

/// Records → parser → events → channel, and the cursor.
struct Pump {
    parser: OomParser,
    /// Records and events up to this sequence number were handled before a restart.
    resume_after: Option<u64>,
    boot_id: Option<String>,
    cursor_file: PathBuf,
    saved_seq: Option<u64>,
    /// When this run last saved the cursor (never: the first batch saves).
    saved_at: Option<Instant>,
    cursor_warned: bool,
    out: Vec<OomEvent>,
    tx: Sender<OomEvent>,
    /// The held event's sequence number and since when it is held.
    held: Option<(u64, Instant)>,
}

impl Pump {
    fn new(cfg: &WatchConfig, tx: Sender<OomEvent>) -> Self {
        let boot_id = match read_boot_id(&cfg.boot_id_path) {
            Ok(id) if !id.is_empty() => Some(id),
            Ok(_) => None,
            Err(e) => {
                warn!(error = %e, "cannot tell reboots apart: OOM kills still in the kernel log are reported again after a restart");
                None
            }
        };
        let resume_after = match KmsgCursor::load(&cfg.cursor_file) {
            Ok(Some(c)) => boot_id.as_deref().and_then(|b| c.resume_after(b)),
            Ok(None) => None,
            Err(e) => {
                warn!(error = %e, "ignoring the kmsg cursor: OOM kills still in the kernel log are reported again");
                None
            }
        };
        Self {
            parser: OomParser::new(),
            resume_after,
            boot_id,
            cursor_file: cfg.cursor_file.clone(),
            saved_seq: resume_after,
            saved_at: None,
            cursor_warned: false,
            out: Vec::new(),
            tx,
            held: None,
        }
    }

    /// One record (one read of `/dev/kmsg`, or one line).
    fn record(&mut self, raw: &[u8]) {
        if raw.is_empty() || raw[0] == b' ' {
            return; // a dictionary line of the previous record, in line mode
        }
        match parse_record(raw) {
            Ok(rec) => {
                if let Some(event) = self.parser.feed(&rec) {
                    self.emit(event);
                }
            }
            Err(e) => debug!(error = %e, "skipping a kernel log record"),
        }
    }

    fn emit(&mut self, event: OomEvent) {
        if is_new(self.resume_after, event.seq) {
            self.out.push(event);
        }
    }

    /// When the held kill must be sent even if nothing follows it.
    fn hold_deadline(&self, grace: Duration) -> Option<Instant> {
        self.held.map(|(_, since)| since + grace)
    }

    /// Ends a batch: releases the held event if `flush`, sends the events, saves the
    /// cursor (at once after an event or a flush, else when [`QUIET_SAVE_EVERY`] has
    /// passed). False when the receiver is gone (the watcher stops).
    async fn end_batch(&mut self, flush: bool) -> bool {
        if flush && let Some(event) = self.parser.flush() {
            self.emit(event);
        }
        let sent_any = !self.out.is_empty();
        for event in std::mem::take(&mut self.out) {
            info!(
                pid = event.victim_pid,
                comm = %event.victim_comm,
                oom_memcg = %event.oom_memcg,
                task_memcg = %event.task_memcg,
                system = event.system,
                group_kill = event.group_kill,
                "the kernel OOM killer killed a process"
            );
            if self.tx.send(event).await.is_err() {
                return false;
            }
        }
        self.held = match (self.parser.held_seq(), self.held) {
            (Some(seq), Some((held, since))) if seq == held => Some((seq, since)),
            (Some(seq), _) => Some((seq, Instant::now())),
            (None, _) => None,
        };
        let due = self
            .saved_at
            .is_none_or(|at| at.elapsed() >= QUIET_SAVE_EVERY);
        if sent_any || flush || due {
            self.save_cursor();
        }
        true
    }

    /// Saves the last handled sequence number; a held event is not handled yet.
    fn save_cursor(&mut self) {
        let (Some(boot_id), Some(last)) = (&self.boot_id, self.parser.last_seq()) else {
            return;
        };
        let mut seq = match self.parser.held_seq() {
            Some(held) => last.min(held.saturating_sub(1)),
            None => last,
        };
        seq = seq.max(self.resume_after.unwrap_or(0));
        if self.saved_seq == Some(seq) {
            return;
        }
        let cursor = KmsgCursor {
            boot_id: boot_id.clone(),
            seq,
        };
        match cursor.save(&self.cursor_file) {
            Ok(()) => {
                self.saved_seq = Some(seq);
                self.saved_at = Some(Instant::now());
            }
            Err(e) if !self.cursor_warned => {
                self.cursor_warned = true;
                warn!(error = %e, "cannot save the kmsg cursor; OOM kills may be reported again after a restart");
            }
            Err(e) => debug!(error = %e, "cannot save the kmsg cursor"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pump's settings in `dir`, on boot "b1" (the records are fed by hand).
    fn pump_config(dir: &std::path::Path) -> WatchConfig {
        let boot_id_path = dir.join("boot_id");
        std::fs::write(&boot_id_path, "b1\n").unwrap();
        WatchConfig {
            kmsg_path: dir.join("unused"),
            cursor_file: dir.join("cursor.json"),
            boot_id_path,
            hold_grace: Duration::from_millis(100),
        }
    }

    /// The cursor never passes a kill that is held back and not sent yet: a crash then
    /// re-reads it instead of losing it.
    #[tokio::test]
    async fn cursor_stays_below_the_held_event() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = pump_config(dir.path());
        let (tx, mut rx) = tokio::sync::mpsc::channel(4);
        let mut pump = Pump::new(&cfg, tx);
        for line in super::super::fixture_tests::KEY_LINES.lines() {
            pump.record(line.as_bytes());
        }
        assert!(pump.end_batch(false).await);
        assert!(rx.try_recv().is_err(), "the kill is held");
        let saved = KmsgCursor::load(&cfg.cursor_file).unwrap().unwrap();
        assert_eq!(saved.seq, 448);
        assert!(pump.hold_deadline(cfg.hold_grace).is_some());

        assert!(pump.end_batch(true).await);
        assert_eq!(rx.try_recv().unwrap().victim_pid, 142);
        let saved = KmsgCursor::load(&cfg.cursor_file).unwrap().unwrap();
        assert_eq!(saved.seq, 449);
        assert_eq!(pump.hold_deadline(cfg.hold_grace), None);
    }

    /// Records without a kill move the saved cursor at most every QUIET_SAVE_EVERY
    /// (each save is a durable write); a batch that sends a kill saves it at once.
    #[tokio::test]
    async fn quiet_records_are_not_saved_at_every_batch() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = pump_config(dir.path());
        let (tx, mut rx) = tokio::sync::mpsc::channel(4);
        let mut pump = Pump::new(&cfg, tx);
        let saved = || KmsgCursor::load(&cfg.cursor_file).unwrap().unwrap().seq;
        pump.record(b"6,10,1000,-;podhost0: port 1(veth1) entered blocking state");
        assert!(pump.end_batch(false).await);
        assert_eq!(saved(), 10, "the first batch saves");
        pump.record(b"6,11,1001,-;podhost0: port 1(veth1) entered forwarding state");
        pump.record(b"6,12,1002,-;veth1 (unregistering): left promiscuous mode");
        assert!(pump.end_batch(false).await);
        assert_eq!(
            saved(),
            10,
            "records without a kill wait for the next due save"
        );

        let kill = super::super::fixture_tests::KEY_LINES;
        for line in kill.lines() {
            pump.record(line.as_bytes());
        }
        assert!(pump.end_batch(true).await);
        assert_eq!(rx.try_recv().unwrap().victim_pid, 142);
        assert_eq!(saved(), 449, "a sent kill is saved at once");
    }
}
