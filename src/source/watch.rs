//! Watching the manifest directory: a full scan at start, after every change seen by
//! inotify (bursts coalesced) and every `rescan_every`. Every scan is authoritative
//! (a pod absent from it was removed); only scans that differ from the previous one
//! are sent.

use std::future::pending;
use std::path::{Path, PathBuf};
use std::time::Duration;

use inotify::EventMask;
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior, interval, interval_at, timeout};

use super::ScanResult;
use super::scan::scan_dir;

/// Quiet time that ends a burst of inotify events before the directory is re-read.
const DEBOUNCE: Duration = Duration::from_millis(10);
/// A burst never delays a scan by more than this.
const MAX_DEBOUNCE: Duration = Duration::from_secs(1);
/// How often a missing (or unwatchable) directory is tried again.
const WATCH_RETRY: Duration = Duration::from_secs(1);

type Events = crate::disk::dir_watch::DirEvents;

/// Watches `dir` for node `node_name` and sends a [`ScanResult`] at once, then again
/// whenever the set of pods (by UID) or errors changes. Changes are noticed through
/// inotify within about 50 ms, and by a full rescan every `rescan_every` (the kubelet
/// uses 20 s). A manifest renamed into place (or removed) is read at once; a file being
/// written is read once its writes pause for 10 ms. A directory that does not exist yet
/// is retried every second.
///
/// The watcher runs in a tokio task (call this inside a runtime) and stops when the
/// receiver is dropped. Each sent scan has fresh `kubernetes.io/config.seen`
/// annotations; consumers keep the first one seen per UID.
pub fn watch(
    dir: PathBuf,
    node_name: String,
    rescan_every: Duration,
) -> mpsc::Receiver<ScanResult> {
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(run(dir, node_name, rescan_every, tx));
    rx
}

/// What an inotify read meant.
enum Seen {
    /// Something in the directory changed: rescan. `settled`: the change is complete
    /// (a file was closed after writing, renamed in or out, or deleted), so a scan now
    /// reads whole files; a created file or changed attributes may still be written to.
    Change { settled: bool },
    /// Nothing relevant (a dotfile).
    Nothing,
    /// The watch is gone (directory deleted or moved, read error): rescan and re-watch.
    Lost,
}

async fn run(
    dir: PathBuf,
    node_name: String,
    rescan_every: Duration,
    tx: mpsc::Sender<ScanResult>,
) {
    let rescan_every = rescan_every.max(Duration::from_millis(10));
    let mut events = add_watch(&dir);
    let mut last = None;
    let health = crate::metrics::health().periodic("manifest source", rescan_every);
    if !send_scan(&dir, &node_name, &tx, &mut last).await {
        return;
    }
    health.beat();

    let mut rescan = interval_at(Instant::now() + rescan_every, rescan_every);
    rescan.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut retry = interval(WATCH_RETRY);
    retry.set_missed_tick_behavior(MissedTickBehavior::Delay);

    loop {
        tokio::select! {
            _ = tx.closed() => return,
            seen = next_event(&mut events) => match seen {
                Seen::Nothing => continue,
                Seen::Lost => events = None,
                // A settled change is read at once (a manifest renamed into place, the
                // usual atomic write, starts its pod without waiting); others, and any
                // burst already queued behind it, wait for a quiet moment.
                Seen::Change { settled } => {
                    let queued = if settled {
                        queued_changes(&mut events).await
                    } else {
                        Queued::InProgress
                    };
                    match queued {
                        Queued::Settled => {}
                        Queued::InProgress if debounce(&mut events).await => {}
                        Queued::InProgress | Queued::Lost => events = None,
                    }
                }
            },
            _ = rescan.tick() => {}
            _ = retry.tick(), if events.is_none() => {
                events = add_watch(&dir);
                if events.is_none() {
                    continue;
                }
                // The directory appeared: read it now rather than at the next rescan.
            }
        }
        if !send_scan(&dir, &node_name, &tx, &mut last).await {
            return;
        }
        health.beat();
    }
}

/// Watches `dir`, or returns None (it is retried later).
fn add_watch(dir: &Path) -> Option<Events> {
    crate::disk::dir_watch::watch_dir(dir)
        .inspect_err(|e| tracing::debug!(dir = %dir.display(), error = %e, "cannot watch manifest directory yet"))
        .ok()
}

async fn next_event(events: &mut Option<Events>) -> Seen {
    use futures::StreamExt as _;
    let Some(stream) = events.as_mut() else {
        return pending().await;
    };
    match stream.next().await {
        Some(Ok(event)) => {
            if event
                .mask
                .intersects(EventMask::DELETE_SELF | EventMask::MOVE_SELF | EventMask::IGNORED)
            {
                Seen::Lost
            } else if event.mask.contains(EventMask::Q_OVERFLOW) {
                Seen::Change { settled: false }
            } else if event
                .name
                .as_ref()
                .is_some_and(|n| n.as_encoded_bytes().starts_with(b"."))
            {
                Seen::Nothing
            } else {
                let settled = EventMask::CLOSE_WRITE
                    | EventMask::MOVED_TO
                    | EventMask::MOVED_FROM
                    | EventMask::DELETE;
                Seen::Change {
                    settled: event.mask.intersects(settled),
                }
            }
        }
        Some(Err(e)) => {
            tracing::warn!(error = %e, "reading inotify events failed; re-watching the manifest directory");
            Seen::Lost
        }
        None => Seen::Lost,
    }
}

/// What the events queued behind a settled change say.
enum Queued {
    /// Only settled changes (or none): scan now.
    Settled,
    /// A change still in progress: wait for a quiet moment.
    InProgress,
    /// The watch is gone.
    Lost,
}

/// Takes the events already queued, without waiting for more.
async fn queued_changes(events: &mut Option<Events>) -> Queued {
    loop {
        // A zero timeout still polls the stream once: a queued event is taken.
        match timeout(Duration::ZERO, next_event(events)).await {
            Err(_nothing_queued) => return Queued::Settled,
            Ok(Seen::Nothing | Seen::Change { settled: true }) => {}
            Ok(Seen::Change { settled: false }) => return Queued::InProgress,
            Ok(Seen::Lost) => return Queued::Lost,
        }
    }
}

/// Swallows further events until [`DEBOUNCE`] passes without one (at most
/// [`MAX_DEBOUNCE`]). Returns false when the watch was lost meanwhile.
async fn debounce(events: &mut Option<Events>) -> bool {
    let deadline = Instant::now() + MAX_DEBOUNCE;
    while Instant::now() < deadline {
        match timeout(DEBOUNCE, next_event(events)).await {
            Err(_quiet) => return true,
            Ok(Seen::Lost) => return false,
            Ok(Seen::Change { .. } | Seen::Nothing) => {}
        }
    }
    true
}

/// What decides whether a scan is worth sending: pods by UID and path, and errors.
#[derive(PartialEq, Eq)]
pub(super) struct Fingerprint {
    pods: Vec<(String, PathBuf)>,
    errors: Vec<String>,
}

impl Fingerprint {
    pub(super) fn of(scan: &ScanResult) -> Self {
        Self {
            pods: scan
                .pods
                .iter()
                .map(|p| (p.uid.clone(), p.path.clone()))
                .collect(),
            errors: scan.errors.iter().map(ToString::to_string).collect(),
        }
    }
}

/// Scans and sends if the result differs from `last` (or is the first). Returns false
/// when the receiver is gone.
async fn send_scan(
    dir: &Path,
    node_name: &str,
    tx: &mpsc::Sender<ScanResult>,
    last: &mut Option<Fingerprint>,
) -> bool {
    let (d, n) = (dir.to_path_buf(), node_name.to_string());
    let scan = match tokio::task::spawn_blocking(move || scan_dir(&d, &n)).await {
        Ok(scan) => scan,
        Err(e) => {
            tracing::error!(error = %e, "manifest scan task failed");
            return !tx.is_closed();
        }
    };
    let fingerprint = Fingerprint::of(&scan);
    if last.as_ref() == Some(&fingerprint) {
        return true;
    }
    *last = Some(fingerprint);
    tx.send(scan).await.is_ok()
}
