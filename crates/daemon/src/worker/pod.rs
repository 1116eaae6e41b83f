//! A pod's life: wait for its predecessor (same name), admit, sandbox, containers,
//! and on termination stop every container in parallel, then release the sandbox.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{EphemeralContainer, Pod, ResourceRequirements};
use tokio::sync::{mpsc, watch};

use super::context::{Ctx, PodInfo};
use super::sandbox::{ensure_sandbox, teardown_network};
use super::sync_loop::run_containers;
use podhost_runtime::sandbox;
use podhost_status::EventKind;
use podhost_status::k8s_time;

/// The manager's handle on a pod worker.
#[derive(Debug)]
pub struct PodHandle {
    pub uid: String,
    pub name: String,
    term_tx: watch::Sender<Option<Duration>>,
    evict_tx: watch::Sender<Option<super::sync_loop::EvictOrder>>,
    /// The pod's latest object from its source (an API pod's labels and annotations
    /// change while it runs: its downward API volumes follow them).
    latest_tx: watch::Sender<Arc<Pod>>,
    /// Becomes `true` once the pod is fully terminated and cleaned up.
    pub done: watch::Receiver<bool>,
}

impl PodHandle {
    /// Asks the pod to terminate with its spec's grace period (idempotent; the grace can
    /// only shrink, as in the kubelet).
    pub fn terminate(&self, grace: Duration) {
        self.term_tx.send_if_modified(|cur| match cur {
            Some(g) if *g <= grace => false,
            _ => {
                *cur = Some(grace);
                true
            }
        });
    }

    /// The pod's object as its source has it now: a change of its labels or annotations
    /// reaches the pod's downward API volumes, a new `activeDeadlineSeconds`, a
    /// container's new image or resources (in-place resize), added ephemeral containers
    /// and a new generation its sync loop (the kubelet's behaviour).
    pub fn observe_latest(&self, pod: &Arc<Pod>) {
        self.latest_tx.send_if_modified(|cur| {
            let changed = cur.metadata.labels != pod.metadata.labels
                || cur.metadata.annotations != pod.metadata.annotations
                || cur.metadata.generation != pod.metadata.generation
                || applied_spec(cur) != applied_spec(pod);
            if changed {
                *cur = pod.clone();
            }
            changed
        });
    }

    /// The node evicts the pod (node pressure): it fails with reason Evicted and this
    /// message, its containers stopped with `grace`. The first eviction stands; a pod
    /// whose containers have not started yet ignores it.
    pub fn evict(&self, message: String, grace: Duration) {
        self.evict_tx.send_if_modified(|cur| {
            if cur.is_some() {
                return false;
            }
            *cur = Some(super::sync_loop::EvictOrder { message, grace });
            true
        });
    }

    pub fn is_terminating(&self) -> bool {
        self.term_tx.borrow().is_some()
    }
}

/// The parts of a pod a running pod follows when they change: its generation (shown as
/// `status.observedGeneration`), `activeDeadlineSeconds`, ephemeral containers, and each
/// container's image and resources (in-place resize).
type AppliedSpec<'a> = (
    Option<i64>,
    Option<i64>,
    Option<&'a Vec<EphemeralContainer>>,
    Vec<(Option<&'a str>, Option<&'a ResourceRequirements>)>,
);

fn applied_spec(pod: &Pod) -> Option<AppliedSpec<'_>> {
    let spec = pod.spec.as_ref()?;
    let containers = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .map(|c| (c.image.as_deref(), c.resources.as_ref()))
        .collect();
    Some((
        pod.metadata.generation,
        spec.active_deadline_seconds,
        spec.ephemeral_containers.as_ref(),
        containers,
    ))
}

/// Starts the worker of `pod`. With `predecessor`, it starts only after that pod (same
/// name, older UID) has fully terminated. `finished` hears how the worker ended.
pub fn spawn_pod(
    ctx: Arc<Ctx>,
    pod: PodInfo,
    warnings: Vec<String>,
    predecessor: Option<watch::Receiver<bool>>,
    finished: mpsc::UnboundedSender<WorkerEnd>,
) -> PodHandle {
    let (term_tx, term_rx) = watch::channel(None);
    let (evict_tx, evict_rx) = watch::channel(None);
    let (done_tx, done_rx) = watch::channel(false);
    let (latest_tx, latest_rx) = watch::channel(pod.pod.clone());
    let handle = PodHandle {
        uid: pod.uid.clone(),
        name: pod.name.clone(),
        term_tx,
        evict_tx,
        latest_tx,
        done: done_rx,
    };
    let pod = Arc::new(pod);
    podhost_metrics::pod_seen(&pod.uid);
    tokio::spawn(async move {
        let uid = pod.uid.clone();
        let orders = Orders {
            term: term_rx,
            evict: evict_rx,
            latest: latest_rx,
        };
        let worker = tokio::spawn(run(ctx, pod, warnings, predecessor, orders)).await;
        podhost_metrics::pod_forgotten(&uid);
        let (panic, last) = match worker {
            Ok(last) => {
                let _ = done_tx.send(true);
                (None, last.map(Box::new))
            }
            // Its containers may still run: the pod is not "done", and the manager ends
            // the daemon so that a fresh one adopts them (their shims live on).
            Err(e) => (Some(e.to_string()), None),
        };
        let _ = finished.send(WorkerEnd { uid, panic, last });
    });
    handle
}

/// A pod worker ended: normally, or with a panic (a bug) that leaves the pod unknown.
#[derive(Debug)]
pub struct WorkerEnd {
    pub uid: String,
    pub panic: Option<String>,
    /// The pod's last record, with its final status, when the worker released the pod
    /// (cluster mode reports it to the API server).
    pub last: Option<Box<podhost_status::PodRecord>>,
}

/// What the manager tells a running worker through its [`PodHandle`].
struct Orders {
    term: watch::Receiver<Option<Duration>>,
    evict: watch::Receiver<Option<super::sync_loop::EvictOrder>>,
    latest: watch::Receiver<Arc<Pod>>,
}

async fn run(
    ctx: Arc<Ctx>,
    pod: Arc<PodInfo>,
    warnings: Vec<String>,
    predecessor: Option<watch::Receiver<bool>>,
    orders: Orders,
) -> Option<podhost_status::PodRecord> {
    let Orders {
        mut term,
        evict,
        latest,
    } = orders;
    if let Some(mut prev) = predecessor {
        tracing::info!(pod = %pod.name, "waiting for the previous version of the pod to terminate");
        let terminated_first = tokio::select! {
            _ = prev.wait_for(|done| *done) => false,
            _ = term.wait_for(|t| t.is_some()) => true,
        };
        if terminated_first {
            // This version ends before it started, but its successor waits on it: it is
            // done only once the one before it is, or a third version would start while
            // the first still runs.
            let _ = prev.wait_for(|done| *done).await;
            return None;
        }
    }
    let record = ctx.store.get(&pod.uid);
    let fresh = record.is_none();
    // A pod a previous daemon admitted keeps its resources and host ports; one it
    // rejected for them stays rejected (re-admission order after a restart must not
    // swap them).
    let rejected_before = record.and_then(|r| {
        let s = r.status;
        podhost_model::admission::prior_rejection(
            s.phase.as_deref(),
            s.reason.as_deref(),
            s.message.as_deref(),
        )
    });
    let qos = pod.qos.as_str().to_string();
    ctx.store.admit_with(&pod.pod, |s| s.qos_class = Some(qos));
    let object = format!("pod/{}", pod.name);
    if fresh {
        for w in &warnings {
            ctx.store.pod_event(
                &pod.uid,
                EventKind::Warning,
                "FieldNotHonoured",
                &object,
                w.clone(),
            );
        }
    }
    let admitted = super::security::admit(&ctx.security, &pod)
        .and_then(|()| admit_to_node(&ctx, &pod, fresh, rejected_before));
    if let Err(rejection) = admitted {
        reject(&ctx, &pod, rejection);
        if !terminated(&mut term).await {
            return None;
        }
        mark_deleting(&ctx, &pod);
        return Box::pin(finish(&ctx, &pod)).await;
    }
    if fresh {
        // The pod's record is on disk before anything of it runs: a daemon killed right
        // after a start must find the pod (and stop it if its manifest went meanwhile).
        let store = ctx.store.clone();
        let _ = tokio::task::spawn_blocking(move || store.flush()).await;
    }
    // False only when the pod terminates first; the supervisors still run then, to adopt
    // and stop whatever a previous daemon left running.
    // The set-up and tear-down phases are boxed: a future is as large as its largest
    // state, and this one then waits the pod's whole life in a small state instead of
    // keeping room for the sandbox's set-up (measured with heaptrack: the tasks were the
    // daemon's largest per-pod allocations after the specs).
    let pod = Box::pin(allocate_userns(&ctx, pod, &mut term)).await;
    let sandbox = Box::pin(ensure_sandbox(&ctx, &pod, &mut term)).await;
    let mut containers = tokio::spawn(run_containers(
        ctx.clone(),
        pod.clone(),
        sandbox,
        term.clone(),
        evict,
        latest,
    ));
    let ended_early = tokio::select! {
        asked = terminated(&mut term) => {
            if !asked {
                // The daemon is stopping: the pod runs on as it is, for the next daemon.
                return None;
            }
            None
        }
        ended = &mut containers => Some(ended),
    };
    if ended_early.is_none() {
        tracing::info!(pod = %pod.name, uid = %pod.uid, "terminating pod");
        mark_deleting(&ctx, &pod);
    }
    let ended = match ended_early {
        Some(ended) => ended,
        None => containers.await,
    };
    if let Err(e) = ended {
        // Its containers may still run: releasing the sandbox and the pod's directory
        // now would orphan them. The panic ends this worker, and the daemon with it.
        if let Ok(panic) = e.try_into_panic() {
            std::panic::resume_unwind(panic);
        }
        return None;
    }
    Box::pin(finish(&ctx, &pod)).await
}

/// The node's admission of the pod (resources, node affinity, node name, host ports,
/// taints), unless a previous daemon rejected it already.
fn admit_to_node(
    ctx: &Ctx,
    pod: &PodInfo,
    fresh: bool,
    rejected_before: Option<(String, String)>,
) -> Result<(), super::security::Rejection> {
    if let Some((reason, message)) = rejected_before {
        return Err(super::security::Rejection {
            reason: reason.into(),
            message,
        });
    }
    ctx.admission.admit_with_host_ports(
        &ctx.host_ports,
        &pod.uid,
        &pod.name,
        &pod.pod,
        !fresh,
        &terminal_pods(ctx),
    )
}

/// The pods in a terminal phase: no longer active, so their requests no longer
/// count (the kubelet's `filterOutInactivePods`; their containers have stopped).
pub(super) fn terminal_pods(ctx: &Ctx) -> std::collections::BTreeSet<String> {
    let mut terminal = std::collections::BTreeSet::new();
    ctx.store.visit(|r| {
        if r.is_terminal() {
            terminal.insert(r.uid().to_string());
        }
    });
    terminal
}

/// The kubelet's `rejectPod`: phase Failed with the reason, "Pod was rejected: …", a
/// warning event; nothing of the pod is started.
fn reject(ctx: &Ctx, pod: &PodInfo, rejection: super::security::Rejection) {
    tracing::warn!(pod = %pod.name, reason = %rejection.reason, message = %rejection.message, "pod rejected");
    let message = format!(
        "{}{}",
        podhost_model::admission::REJECTED_PREFIX,
        rejection.message
    );
    ctx.store.update_status(&pod.uid, |s| {
        s.phase = Some("Failed".into());
        s.reason = Some(rejection.reason.to_string());
        s.message = Some(message.clone());
    });
    ctx.store.pod_event(
        &pod.uid,
        EventKind::Warning,
        &rejection.reason,
        &format!("pod/{}", pod.name),
        rejection.message,
    );
}

/// Waits until the pod is to terminate: `true`. `false` when the daemon is stopping
/// instead (the manager that holds the order's sender went): nothing of the pod may
/// change then — not its containers, nor its record, whose deletionTimestamp would
/// show the running pod as Terminating to the next daemon.
async fn terminated(term: &mut watch::Receiver<Option<Duration>>) -> bool {
    term.wait_for(|t| t.is_some()).await.is_ok()
}

fn mark_deleting(ctx: &Ctx, pod: &PodInfo) {
    // The API shows a pod being deleted by its deletionTimestamp ("Terminating").
    ctx.store
        .set_deletion_timestamp(&pod.uid, k8s_time(chrono::Utc::now()));
}

/// A `hostUsers: false` pod's block of host IDs: the one it holds (also from before a
/// daemon restart) or a new one; retried every 10 s while the range is exhausted.
async fn allocate_userns(
    ctx: &Ctx,
    pod: Arc<PodInfo>,
    term: &mut watch::Receiver<Option<Duration>>,
) -> Arc<PodInfo> {
    if !pod.own_userns {
        return pod;
    }
    loop {
        match ctx.userns.allocate(&pod.uid) {
            Ok(map) => {
                let mut with_map = (*pod).clone();
                with_map.userns = Some(map);
                return Arc::new(with_map);
            }
            Err(e) => {
                ctx.store.pod_event(
                    &pod.uid,
                    EventKind::Warning,
                    "FailedCreatePodSandBox",
                    &format!("pod/{}", pod.name),
                    format!("Failed to create pod sandbox: {e}"),
                );
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(10)) => {}
                    _ = term.wait_for(|t| t.is_some()) => return pod,
                }
            }
        }
    }
}

/// Frees the pod's block of IDs and the chowned snapshot copies made for it.
fn release_userns(ctx: &Ctx, pod: &PodInfo) {
    match ctx.userns.release(&pod.uid) {
        Ok(Some(map)) => {
            let copies = ctx
                .layout
                .root_dir
                .join(podhost_runtime::userns::chown_copy::COPIES_DIR)
                .join(map.base.to_string());
            let _ = std::fs::remove_dir_all(copies);
        }
        Ok(None) => {}
        Err(e) => tracing::warn!(pod = %pod.name, error = %e, "user namespace block not released"),
    }
}

/// Releases everything the pod held on the host and forgets it; returns its last
/// record.
async fn finish(ctx: &Ctx, pod: &PodInfo) -> Option<podhost_status::PodRecord> {
    // While its network namespace still exists (CNI's DEL wants it).
    teardown_network(ctx, pod).await;
    ctx.host_ports.release(&pod.uid);
    ctx.admission.release(&pod.uid);
    if let Err(e) = sandbox::destroy(&ctx.layout.pod_ns_dir(&pod.uid)) {
        tracing::warn!(pod = %pod.name, error = %e, "sandbox release failed");
    }
    ctx.cgroups.remove_pod(pod.qos, &pod.uid);
    release_userns(ctx, pod);
    // The pod stays listed until everything is gone; no late status write may recreate
    // its directory meanwhile.
    ctx.store.stop_persisting(&pod.uid);
    let dir = ctx.layout.pod_dir(&pod.uid);
    // Mounts first; if one stays busy the pod dir (and its record) stays, so that the
    // next daemon finishes the release instead of anything deleting through a mount.
    let (layout, uid) = (ctx.layout.clone(), pod.uid.clone());
    let volumes =
        tokio::task::spawn_blocking(move || podhost_volume::teardown_pod_volumes(&layout, &uid))
            .await;
    if !matches!(volumes, Ok(Ok(()))) {
        tracing::error!(pod = %pod.name, result = ?volumes, "volumes not released; the pod dir is kept");
    } else if let Err(e) = remove_pod_dir(&dir).await {
        tracing::warn!(pod = %pod.name, error = %e, "cannot remove {}", dir.display());
    }
    let last = ctx.store.remove(&pod.uid);
    tracing::info!(pod = %pod.name, uid = %pod.uid, "pod terminated");
    last
}

/// Removes the pod's directory with its status record last: a daemon killed midway
/// still finds the record, knows the pod and finishes the removal, instead of leaving a
/// directory nobody claims until container GC's orphan pass.
async fn remove_pod_dir(dir: &std::path::Path) -> std::io::Result<()> {
    let mut entries = match tokio::fs::read_dir(dir).await {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let mut record = None;
    while let Some(e) = entries.next_entry().await? {
        let path = e.path();
        if e.file_name() == "status.json" {
            record = Some(path);
        } else if e.file_type().await?.is_dir() {
            tokio::fs::remove_dir_all(&path).await?;
        } else {
            tokio::fs::remove_file(&path).await?;
        }
    }
    if let Some(record) = record {
        tokio::fs::remove_file(record).await?;
    }
    match tokio::fs::remove_dir(dir).await {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
