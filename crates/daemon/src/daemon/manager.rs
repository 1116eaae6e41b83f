//! The single writer of the desired pod set: diffs each authoritative scan by UID, starts
//! and terminates pod workers, and holds a new pod until the old one of the same name is
//! fully terminated (an edited manifest replaces its pod gracefully).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::{mpsc, watch};

use super::api_pods::{ApiPodCache, api_grace, is_api_pod, is_terminal_in_api};
use crate::worker::{Ctx, PodHandle, PodInfo, WorkerEnd, spawn_pod};
use podhost_cluster::pods::BoundPods;
use podhost_source::{ScanResult, StaticPod};
use podhost_status::{EventKind, PodRecord};

/// A pod of the API server whose worker ended: what cluster mode reports.
#[derive(Debug)]
pub struct ApiPodEnd {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// The pod's last record (its final status), when the worker released it.
    pub last: Option<Box<PodRecord>>,
    /// The API server still has the object, marked for deletion: it is deleted now.
    pub delete: bool,
}

/// The API server as a pod source (cluster mode).
pub struct ApiSource {
    /// The pods bound to the node.
    pub pods: watch::Receiver<Arc<BoundPods>>,
    /// Where the ends of their workers go.
    pub ends: mpsc::UnboundedSender<ApiPodEnd>,
}

struct Manager {
    ctx: Arc<Ctx>,
    workers: HashMap<String, PodHandle>,
    /// The newest worker of each pod's `namespace/name`: a new UID with that name waits
    /// for it.
    newest_by_name: HashMap<String, String>,
    /// Each worker's `namespace/name`.
    name_of: HashMap<String, String>,
    /// The static sources' pods of the last scan (after keeping last good versions).
    static_pods: Vec<StaticPod>,
    /// The API server's pods, once listed; `None` before (or without cluster mode).
    api_view: Option<Arc<BoundPods>>,
    api_entries: Vec<StaticPod>,
    api_cache: ApiPodCache,
    /// Workers of API pods, with the object as last seen (for its grace once gone).
    api_workers: HashMap<String, Arc<Pod>>,
    /// API pods whose worker ended while the API server still lists them (being
    /// deleted, or terminal): never started again under the same UID.
    api_finished: HashSet<String>,
    api_ends: Option<mpsc::UnboundedSender<ApiPodEnd>>,
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
    api: Option<ApiSource>,
    mut pings: mpsc::Receiver<Ping>,
    mut evictions: mpsc::UnboundedReceiver<crate::eviction::EvictionOrder>,
) {
    let (finished_tx, mut finished_rx) = mpsc::unbounded_channel();
    let (mut api_pods, api_ends) = match api {
        Some(a) => (Some(a.pods), Some(a.ends)),
        None => (None, None),
    };
    let mut m = Manager {
        ctx,
        workers: HashMap::new(),
        newest_by_name: HashMap::new(),
        name_of: HashMap::new(),
        static_pods: Vec::new(),
        api_view: None,
        api_entries: Vec::new(),
        api_cache: ApiPodCache::default(),
        api_workers: HashMap::new(),
        api_finished: HashSet::new(),
        api_ends,
        finished_tx,
        reported_errors: BTreeSet::new(),
        last_good: HashMap::new(),
        kept_reported: BTreeSet::new(),
    };
    let mut first = true;
    let health =
        podhost_metrics::health().on_demand("pod manager", podhost_metrics::health::BUSY_LIMIT);
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
            changed = api_changed(&mut api_pods) => {
                if changed.is_err() {
                    tracing::error!("the API server's pod watch stopped: no pod of the API can be seen any more");
                    return;
                }
                let view = api_pods.as_mut().map(|rx| rx.borrow_and_update().clone());
                if let Some(view) = view.filter(|v| v.synced) {
                    health.busy();
                    m.apply_api(view, first);
                    health.idle();
                }
            }
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
                m.finished(end);
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

/// Waits for the next change of the API's pods; never, without cluster mode.
async fn api_changed(
    rx: &mut Option<watch::Receiver<Arc<BoundPods>>>,
) -> Result<(), watch::error::RecvError> {
    match rx {
        Some(rx) => rx.changed().await,
        None => std::future::pending().await,
    }
}

/// Which pods a previous daemon ran an orphan pass may stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OrphansOf {
    /// Pods of the manifest directory and URL (the static sources answered).
    Static,
    /// Pods of the API server (it listed the node's pods).
    Api,
}

impl Manager {
    /// A scan of the static sources: the whole set of static pods.
    fn apply(&mut self, mut scan: ScanResult, first: bool) {
        self.report_errors(&scan);
        self.keep_last_good(&mut scan);
        self.static_pods = scan.pods;
        if first {
            self.terminate_orphans(OrphansOf::Static);
        }
        self.sync();
    }

    /// A new view of the API server's pods. Its first list decides the API pods a
    /// previous daemon ran: those no longer bound to the node are stopped (only once
    /// the static sources answered too, so that the orphan pass sees every source).
    fn apply_api(&mut self, view: Arc<BoundPods>, first_static_pending: bool) {
        let first_list = self.api_view.is_none();
        self.api_entries = self.api_cache.entries(&view);
        self.api_finished.retain(|uid| view.pods.contains_key(uid));
        self.api_view = Some(view);
        if first_list {
            self.terminate_orphans(OrphansOf::Api);
        }
        if !first_static_pending {
            self.sync();
        }
    }

    /// Brings the workers to the desired set: the static pods and the API's.
    fn sync(&mut self) {
        let desired: HashMap<&str, &StaticPod> = self
            .static_pods
            .iter()
            .chain(&self.api_entries)
            .map(|p| (p.uid.as_str(), p))
            .collect();
        for (uid, handle) in &self.workers {
            if let Some(last_seen) = self.api_workers.get(uid) {
                self.sync_api_worker(uid, handle, desired.get(uid.as_str()), last_seen);
            } else if !desired.contains_key(uid.as_str()) && !handle.is_terminating() {
                let grace = self
                    .ctx
                    .store
                    .get(uid)
                    .map(|r| PodInfo::from_pod(r.admitted).grace)
                    .unwrap_or(podhost_model::grace::pod_grace(None));
                tracing::info!(pod = %handle.name, %uid, "manifest removed or changed: terminating pod");
                handle.terminate(grace);
            }
        }
        let mut started = Vec::new();
        for sp in self.static_pods.iter().chain(&self.api_entries) {
            if !self.workers.contains_key(&sp.uid) && !self.api_finished.contains(&sp.uid) {
                started.push(sp.clone());
            }
        }
        for sp in started {
            let api = is_api_pod(&sp.pod);
            if api && self.finished_before(&sp.uid) {
                continue;
            }
            let deleting = sp.pod.metadata.deletion_timestamp.is_some();
            let uid = sp.uid.clone();
            if api {
                self.api_workers.insert(uid.clone(), sp.pod.clone());
            }
            self.start(PodInfo::from_pod(sp.pod.clone()), sp.warnings);
            if deleting && let Some(h) = self.workers.get(&uid) {
                // Bound and deleted before this node ran it: the shortest termination.
                h.terminate(api_grace(&sp.pod));
            }
        }
        self.refresh_api_objects();
    }

    /// An API pod's worker against the API: terminated with the deletion's grace once
    /// the object is marked for deletion (shortened by later updates, never
    /// lengthened: `terminate` only shrinks), or when the object is gone — the API
    /// server's last word on it (a force delete's grace) or, if it went unseen (deleted
    /// while the watch was down), its last known object.
    fn sync_api_worker(
        &self,
        uid: &str,
        handle: &PodHandle,
        desired: Option<&&StaticPod>,
        last_seen: &Pod,
    ) {
        let Some(view) = &self.api_view else { return };
        match desired {
            Some(sp) if sp.pod.metadata.deletion_timestamp.is_some() => {
                if !handle.is_terminating() {
                    tracing::info!(pod = %handle.name, %uid, "deleted in the API server: terminating pod");
                }
                handle.terminate(api_grace(&sp.pod));
            }
            Some(sp) => handle.observe_latest(&sp.pod),
            None => {
                let last = view.gone.get(uid).map_or(last_seen, |(_, p)| p);
                if !handle.is_terminating() {
                    tracing::info!(pod = %handle.name, %uid, "gone from the API server: terminating pod");
                }
                handle.terminate(api_grace(last));
            }
        }
    }

    /// An API pod the API server reports in a terminal phase that this node has no
    /// record of (its record went with a wiped root dir, or another node's): it ran to
    /// its end already and is never started again, as the kubelet filters terminal pods.
    fn finished_before(&mut self, uid: &str) -> bool {
        let terminal = self
            .api_view
            .as_ref()
            .and_then(|v| v.pods.get(uid))
            .is_some_and(|p| is_terminal_in_api(p));
        if terminal && self.ctx.store.get(uid).is_none() {
            self.api_finished.insert(uid.to_string());
            return true;
        }
        false
    }

    /// Keeps the last object seen of each API pod's worker.
    fn refresh_api_objects(&mut self) {
        if let Some(view) = &self.api_view {
            for (uid, last) in self.api_workers.iter_mut() {
                if let Some(now) = view.pods.get(uid).or(view.gone.get(uid).map(|(_, p)| p)) {
                    *last = now.clone();
                }
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

    /// Pods a previous daemon ran whose source no longer has them: adopt them only to
    /// stop them. Each kind waits for its own source's first answer: a pod of the API
    /// server is not stopped because the manifest directory answered first.
    fn terminate_orphans(&mut self, of: OrphansOf) {
        let desired: HashSet<&str> = match of {
            OrphansOf::Static => self.static_pods.iter().map(|p| p.uid.as_str()).collect(),
            OrphansOf::Api => self.api_entries.iter().map(|p| p.uid.as_str()).collect(),
        };
        let mut orphans = Vec::new();
        self.ctx.store.visit(|rec| {
            let api = is_api_pod(&rec.admitted);
            if api == (of == OrphansOf::Api)
                && !desired.contains(rec.uid())
                && !self.workers.contains_key(rec.uid())
            {
                orphans.push(rec.clone());
            }
        });
        for rec in orphans {
            let api = is_api_pod(&rec.admitted);
            let info = PodInfo::from_pod(rec.admitted);
            let grace = info.grace;
            tracing::info!(pod = %info.name, uid = %info.uid, "pod from a previous run is gone from its source: terminating");
            let uid = info.uid.clone();
            if api {
                self.api_workers.insert(uid.clone(), info.pod.clone());
            }
            self.start(info, Vec::new());
            if let Some(h) = self.workers.get(&uid) {
                h.terminate(grace);
            }
        }
    }

    fn start(&mut self, info: PodInfo, warnings: Vec<String>) {
        let name = format!("{}/{}", info.namespace, info.name);
        let predecessor = self
            .newest_by_name
            .get(&name)
            .and_then(|uid| self.workers.get(uid))
            .map(|h| h.done.clone());
        let uid = info.uid.clone();
        let handle = spawn_pod(
            self.ctx.clone(),
            info,
            warnings,
            predecessor,
            self.finished_tx.clone(),
        );
        self.workers.insert(uid.clone(), handle);
        self.name_of.insert(uid.clone(), name.clone());
        self.newest_by_name.insert(name, uid);
    }

    fn finished(&mut self, end: WorkerEnd) {
        let uid = end.uid.as_str();
        self.workers.remove(uid);
        if let Some(name) = self.name_of.remove(uid)
            && self.newest_by_name.get(&name).map(String::as_str) == Some(uid)
        {
            self.newest_by_name.remove(&name);
        }
        let Some(last_seen) = self.api_workers.remove(uid) else {
            return;
        };
        self.api_finished.insert(end.uid.clone());
        let Some(ends) = &self.api_ends else { return };
        let now = self.api_view.as_ref().and_then(|v| v.pods.get(uid));
        let _ = ends.send(ApiPodEnd {
            uid: end.uid.clone(),
            namespace: last_seen.metadata.namespace.clone().unwrap_or_default(),
            name: last_seen.metadata.name.clone().unwrap_or_default(),
            last: end.last,
            delete: now.is_some_and(|p| p.metadata.deletion_timestamp.is_some()),
        });
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
