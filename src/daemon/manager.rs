//! The single writer of the desired pod set: diffs each authoritative scan by UID, starts
//! and terminates pod workers, and holds a new pod until the old one of the same name is
//! fully terminated (an edited manifest replaces its pod gracefully).

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::source::{ScanResult, StaticPod};
use crate::status::EventKind;
use crate::worker::{Ctx, PodHandle, PodInfo, WorkerEnd, spawn_pod};

struct Manager {
    ctx: Arc<Ctx>,
    workers: HashMap<String, PodHandle>,
    /// The newest worker of each pod name: a new UID with that name waits for it.
    newest_by_name: HashMap<String, String>,
    finished_tx: mpsc::UnboundedSender<WorkerEnd>,
    /// Manifest errors already reported, so a rescan does not repeat them.
    reported_errors: BTreeSet<String>,
    /// The last pod each manifest file described while it was valid.
    last_good: HashMap<PathBuf, StaticPod>,
    /// Invalid files whose last good pod was kept, already reported.
    kept_reported: BTreeSet<String>,
}

/// The manager's answer to a liveness ping (systemd's watchdog, `service_notify`).
#[derive(Debug, Clone, Copy)]
pub struct Heartbeat {
    /// The first manifest scan was applied: the pods found at start are adopted.
    pub synced: bool,
}

/// A ping: the manager answers on the oneshot from its own loop, so an answer means the
/// loop turns.
pub type Ping = tokio::sync::oneshot::Sender<Heartbeat>;

pub async fn run(
    ctx: Arc<Ctx>,
    mut scans: mpsc::Receiver<ScanResult>,
    mut pings: mpsc::Receiver<Ping>,
    mut evictions: mpsc::UnboundedReceiver<crate::eviction::EvictionOrder>,
) {
    let (finished_tx, mut finished_rx) = mpsc::unbounded_channel();
    let mut m = Manager {
        ctx,
        workers: HashMap::new(),
        newest_by_name: HashMap::new(),
        finished_tx,
        reported_errors: BTreeSet::new(),
        last_good: HashMap::new(),
        kept_reported: BTreeSet::new(),
    };
    let mut first = true;
    let health =
        crate::metrics::health().on_demand("pod manager", crate::metrics::health::BUSY_LIMIT);
    loop {
        tokio::select! {
            scan = scans.recv() => match scan {
                Some(scan) => {
                    #[cfg(debug_assertions)]
                    if first {
                        injected_panic();
                    }
                    health.busy();
                    m.apply(scan, first);
                    health.idle();
                    first = false;
                }
                None => {
                    tracing::error!("the manifest watcher stopped: no manifest change can be seen any more");
                    return;
                }
            },
            Some(order) = evictions.recv() => {
                match m.workers.get(&order.uid) {
                    Some(h) => h.evict(order.message, order.grace),
                    None => tracing::info!(uid = %order.uid, "eviction of a pod that is gone: ignored"),
                }
            }
            Some(ping) = pings.recv() => {
                let _ = ping.send(Heartbeat { synced: !first });
                #[cfg(debug_assertions)]
                if !first {
                    injected_stall().await;
                }
            }
            Some(end) = finished_rx.recv() => {
                if let Some(panic) = end.panic {
                    // The daemon's supervision ends the process on this; the containers
                    // survive in their shims and the next daemon adopts them.
                    tracing::error!(uid = %end.uid, %panic, "a pod worker panicked");
                    return;
                }
                health.busy();
                m.finished(&end.uid);
                health.idle();
            }
        }
    }
}

/// Debug builds only: `PODHOST_TEST_PANIC_MANAGER=1` makes the manager panic at its
/// first sync, so that a test sees the daemon exit instead of living on half-dead.
#[cfg(debug_assertions)]
fn injected_panic() {
    if std::env::var_os("PODHOST_TEST_PANIC_MANAGER").is_some_and(|v| v == "1") {
        panic!("injected by PODHOST_TEST_PANIC_MANAGER=1 at the first sync");
    }
}

/// Debug builds only: `PODHOST_TEST_STALL_MANAGER=N` wedges the manager's loop for good
/// after its N-th answered ping once synced, so that a test sees the systemd watchdog
/// stop being petted.
#[cfg(debug_assertions)]
async fn injected_stall() {
    use std::sync::atomic::{AtomicU64, Ordering};
    static ANSWERED: AtomicU64 = AtomicU64::new(0);
    let Some(limit) = std::env::var("PODHOST_TEST_STALL_MANAGER")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    else {
        return;
    };
    if ANSWERED.fetch_add(1, Ordering::SeqCst) + 1 >= limit {
        tracing::warn!("PODHOST_TEST_STALL_MANAGER: the pod manager stops here");
        std::future::pending::<()>().await;
    }
}

impl Manager {
    fn apply(&mut self, mut scan: ScanResult, first: bool) {
        self.report_errors(&scan);
        self.keep_last_good(&mut scan);
        let desired: HashMap<&str, &StaticPod> =
            scan.pods.iter().map(|p| (p.uid.as_str(), p)).collect();
        if first {
            self.terminate_orphans(&desired);
        }
        for (uid, handle) in &self.workers {
            if !desired.contains_key(uid.as_str()) && !handle.is_terminating() {
                let grace = self
                    .ctx
                    .store
                    .get(uid)
                    .map(|r| PodInfo::from_pod(r.pod).grace)
                    .unwrap_or(crate::model::grace::pod_grace(None));
                tracing::info!(pod = %handle.name, %uid, "manifest removed or changed: terminating pod");
                handle.terminate(grace);
            }
        }
        for sp in &scan.pods {
            if !self.workers.contains_key(&sp.uid) {
                self.start(PodInfo::from_pod(sp.pod.clone()), sp.warnings.clone());
            }
        }
    }

    /// A file that exists but no longer parses (a typo in an edit, or a rescan that read
    /// it half-written) keeps its last good pod running instead of killing it as the
    /// kubelet does; the error is reported, and fixing or removing the file decides.
    fn keep_last_good(&mut self, scan: &mut ScanResult) {
        let mut kept_now = BTreeSet::new();
        for e in &scan.errors {
            let path = e.path();
            if !path.is_file() {
                continue;
            }
            let Some(prev) = self.last_good.get(path) else {
                continue;
            };
            if scan
                .pods
                .iter()
                .any(|p| p.path == path || p.name == prev.name)
            {
                continue;
            }
            let key = e.to_string();
            if !self.kept_reported.contains(&key) {
                self.ctx.store.pod_event(
                    &prev.uid,
                    EventKind::Warning,
                    "ManifestInvalid",
                    &format!("pod/{}", prev.name),
                    format!("{e}; the running version is kept until the file is fixed or removed"),
                );
            }
            kept_now.insert(key);
            scan.pods.push(prev.clone());
        }
        self.kept_reported = kept_now;
        self.last_good = scan
            .pods
            .iter()
            .map(|p| (p.path.clone(), p.clone()))
            .collect();
    }

    /// Pods a previous daemon ran whose manifest is gone: adopt them only to stop them.
    fn terminate_orphans(&mut self, desired: &HashMap<&str, &StaticPod>) {
        // Only the orphans' records are copied (this runs at every rescan).
        let mut orphans = Vec::new();
        self.ctx.store.visit(|rec| {
            if !desired.contains_key(rec.uid()) && !self.workers.contains_key(rec.uid()) {
                orphans.push(rec.clone());
            }
        });
        for rec in orphans {
            let info = PodInfo::from_pod(rec.pod);
            let grace = info.grace;
            tracing::info!(pod = %info.name, uid = %info.uid, "pod from a previous run has no manifest: terminating");
            let uid = info.uid.clone();
            self.start(info, Vec::new());
            if let Some(h) = self.workers.get(&uid) {
                h.terminate(grace);
            }
        }
    }

    fn start(&mut self, info: PodInfo, warnings: Vec<String>) {
        let predecessor = self
            .newest_by_name
            .get(&info.name)
            .and_then(|uid| self.workers.get(uid))
            .map(|h| h.done.clone());
        let uid = info.uid.clone();
        let name = info.name.clone();
        let handle = spawn_pod(
            self.ctx.clone(),
            info,
            warnings,
            predecessor,
            self.finished_tx.clone(),
        );
        self.workers.insert(uid.clone(), handle);
        self.newest_by_name.insert(name, uid);
    }

    fn finished(&mut self, uid: &str) {
        if let Some(h) = self.workers.remove(uid)
            && self.newest_by_name.get(&h.name).map(String::as_str) == Some(uid)
        {
            self.newest_by_name.remove(&h.name);
        }
    }

    fn report_errors(&mut self, scan: &ScanResult) {
        let now: BTreeSet<String> = scan.errors.iter().map(|e| e.to_string()).collect();
        for msg in now.difference(&self.reported_errors) {
            self.ctx
                .store
                .node_event(EventKind::Warning, "FailedToLoadManifest", msg.clone());
        }
        self.reported_errors = now;
    }
}
