//! Watching the manifest directory: a full scan at start, after every change seen by
//! inotify (bursts coalesced) and every `rescan_every`. Every scan is authoritative
//! (a pod absent from it was removed); only scans that differ from the previous one
//! are sent.

use std::collections::HashSet;
use std::ffi::OsString;
use std::future::pending;
use std::path::{Path, PathBuf};
use std::time::Duration;

use inotify::EventMask;
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior, interval, interval_at, timeout};

use super::ScanResult;
use super::scan::{DecodedManifests, scan_dir_with};

/// Quiet time that ends a burst of inotify events before the directory is re-read. It
/// only has to join the steps of one operation (an editor renaming the old file away and
/// creating the new one, microseconds apart): a file still being written is waited for
/// by its close (see [`debounce`]), not by this. It is on the path of every manifest
/// change, a removal's stop signal included, so it is short.
const DEBOUNCE: Duration = Duration::from_millis(2);
/// A burst never delays a scan by more than this.
const MAX_DEBOUNCE: Duration = Duration::from_secs(1);
/// How often a missing (or unwatchable) directory is tried again.
const WATCH_RETRY: Duration = Duration::from_secs(1);

type Events = podhost_disk::dir_watch::DirEvents;

/// Watches `dir` for node `node_name` and sends a [`ScanResult`] at once, then again
/// whenever the set of pods (by UID) or errors changes. Changes are noticed through
/// inotify (a scan [`DEBOUNCE`] after a burst of events ends and its created files are
/// closed), and by a full rescan every `rescan_every` (the kubelet uses 20 s). A directory that does not exist yet is retried every second.
///
/// The watcher runs in a tokio task (call this inside a runtime) and stops when the
/// receiver is dropped. A rescan decodes only the manifests whose bytes changed (see
/// `DecodedManifests`): a pod's `kubernetes.io/config.seen` is the time its content was
/// first read (consumers keep the first one seen per UID).
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
    /// Something in the directory changed: rescan.
    Change(Step),
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
    let mut decoded = DecodedManifests::default();
    let health = podhost_metrics::health().periodic("manifest source", rescan_every);
    if !send_scan(&dir, &node_name, &tx, &mut last, &mut decoded).await {
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
                Seen::Change(step) => {
                    if !debounce(&mut events, step).await {
                        events = None;
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
        if !send_scan(&dir, &node_name, &tx, &mut last, &mut decoded).await {
            return;
        }
        health.beat();
    }
}

/// What a change did to a manifest file being written.
enum Step {
    /// A file was created: it is being written until it is closed.
    Created(OsString),
    /// A file was closed after writing, moved in or out, or deleted: it is complete.
    Done(OsString),
    /// Anything else (attributes, a directory, a queue overflow).
    Other,
}

/// Watches `dir`, or returns None (it is retried later).
fn add_watch(dir: &Path) -> Option<Events> {
    podhost_disk::dir_watch::watch_dir(dir)
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
                Seen::Change(Step::Other)
            } else if event
                .name
                .as_ref()
                .is_some_and(|n| n.as_encoded_bytes().starts_with(b"."))
            {
                Seen::Nothing
            } else {
                Seen::Change(step_of(event.mask, event.name))
            }
        }
        Some(Err(e)) => {
            tracing::warn!(error = %e, "reading inotify events failed; re-watching the manifest directory");
            Seen::Lost
        }
        None => Seen::Lost,
    }
}

/// Keeps `writing` the set of files created and not yet closed.
fn follow(step: Step, writing: &mut HashSet<OsString>) {
    match step {
        Step::Created(name) => {
            writing.insert(name);
        }
        Step::Done(name) => {
            writing.remove(&name);
        }
        Step::Other => {}
    }
}

/// What `mask` did to the file `name`.
fn step_of(mask: EventMask, name: Option<OsString>) -> Step {
    let Some(name) = name.filter(|_| !mask.contains(EventMask::ISDIR)) else {
        return Step::Other;
    };
    if mask.contains(EventMask::CREATE) {
        Step::Created(name)
    } else if mask.intersects(
        EventMask::CLOSE_WRITE | EventMask::MOVED_TO | EventMask::MOVED_FROM | EventMask::DELETE,
    ) {
        Step::Done(name)
    } else {
        Step::Other
    }
}

/// Swallows further events until [`DEBOUNCE`] passes without one while no file created
/// in the burst is still open for writing (at most [`MAX_DEBOUNCE`] in all): a half
/// written manifest read as invalid would remove its pod. `first` is the burst's first
/// step. Returns false when the watch was lost meanwhile.
async fn debounce(events: &mut Option<Events>, first: Step) -> bool {
    let deadline = Instant::now() + MAX_DEBOUNCE;
    let mut writing: HashSet<OsString> = HashSet::new();
    follow(first, &mut writing);
    loop {
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        let quiet = if writing.is_empty() {
            DEBOUNCE.min(deadline - now)
        } else {
            deadline - now
        };
        match timeout(quiet, next_event(events)).await {
            Err(_quiet) => return true,
            Ok(Seen::Lost) => return false,
            Ok(Seen::Change(step)) => follow(step, &mut writing),
            Ok(Seen::Nothing) => {}
        }
    }
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
    decoded: &mut DecodedManifests,
) -> bool {
    let (d, n) = (dir.to_path_buf(), node_name.to_string());
    let mut cache = std::mem::take(decoded);
    let scanned = tokio::task::spawn_blocking(move || {
        let scan = scan_dir_with(&d, &n, &mut cache);
        (scan, cache)
    })
    .await;
    let scan = match scanned {
        Ok((scan, cache)) => {
            *decoded = cache;
            scan
        }
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
