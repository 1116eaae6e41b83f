//! A pod's life: wait for its predecessor (same name), admit, sandbox, containers,
//! and on termination stop every container in parallel, then release the sandbox.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::context::{Ctx, PodInfo};
use super::dns_files::write_pod_dns_files;
use super::error::WorkerError;
use super::sync_loop::run_containers;
use crate::model::qos::pod_resources;
use crate::model::resources::pod_cgroup_config;
use crate::runtime::sandbox::{self, SandboxPaths};
use crate::status::EventKind;
use crate::status::k8s_time;
use crate::volume::PodVolumesState;

/// The manager's handle on a pod worker.
#[derive(Debug)]
pub struct PodHandle {
    pub uid: String,
    pub name: String,
    term_tx: watch::Sender<Option<Duration>>,
    evict_tx: watch::Sender<Option<super::sync_loop::EvictOrder>>,
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
    let handle = PodHandle {
        uid: pod.uid.clone(),
        name: pod.name.clone(),
        term_tx,
        evict_tx,
        done: done_rx,
    };
    let pod = Arc::new(pod);
    crate::metrics::pod_seen(&pod.uid);
    tokio::spawn(async move {
        let uid = pod.uid.clone();
        let worker = tokio::spawn(run(ctx, pod, warnings, predecessor, term_rx, evict_rx)).await;
        crate::metrics::pod_forgotten(&uid);
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
    pub last: Option<Box<crate::status::PodRecord>>,
}

async fn run(
    ctx: Arc<Ctx>,
    pod: Arc<PodInfo>,
    warnings: Vec<String>,
    predecessor: Option<watch::Receiver<bool>>,
    mut term: watch::Receiver<Option<Duration>>,
    evict: watch::Receiver<Option<super::sync_loop::EvictOrder>>,
) -> Option<crate::status::PodRecord> {
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
    let rejected_before = record
        .map(|r| r.status)
        .filter(|s| s.phase.as_deref() == Some("Failed"))
        .and_then(|s| Some((s.reason?, s.message.unwrap_or_default())))
        .filter(|(reason, _)| {
            reason == super::host_ports::REASON
                || crate::model::admission::is_admission_reason(reason)
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
        let _ = term.wait_for(|t| t.is_some()).await;
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
    let _sandbox_ready = Box::pin(ensure_sandbox(&ctx, &pod, &mut term)).await;
    let mut containers = tokio::spawn(run_containers(
        ctx.clone(),
        pod.clone(),
        term.clone(),
        evict,
    ));
    let ended_early = tokio::select! {
        _ = term.wait_for(|t| t.is_some()) => None,
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

/// The kubelet's prefix of a rejected pod's `status.message`.
const REJECTED_PREFIX: &str = "Pod was rejected: ";

/// The node's admission of the pod (resources, node affinity, node name, host ports,
/// taints), unless a previous daemon rejected it already.
fn admit_to_node(
    ctx: &Ctx,
    pod: &PodInfo,
    fresh: bool,
    rejected_before: Option<(String, String)>,
) -> Result<(), super::security::Rejection> {
    if let Some((reason, message)) = rejected_before {
        // A pod once rejected stays Failed, as the kubelet's rejected pods do, even if
        // what it lacked has been freed since.
        let message = message.strip_prefix(REJECTED_PREFIX).unwrap_or(&message);
        return Err(super::security::Rejection {
            reason: reason.into(),
            message: message.to_string(),
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
fn terminal_pods(ctx: &Ctx) -> std::collections::BTreeSet<String> {
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
    let message = format!("{REJECTED_PREFIX}{}", rejection.message);
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

fn mark_deleting(ctx: &Ctx, pod: &PodInfo) {
    // The API shows a pod being deleted by its deletionTimestamp ("Terminating").
    ctx.store
        .set_deletion_timestamp(&pod.uid, k8s_time(chrono::Utc::now()));
}

/// Creates the pod's namespaces unless they survive from a previous daemon; retried every
/// 10 s on failure. Returns false if the pod was terminated first.
async fn ensure_sandbox(
    ctx: &Ctx,
    pod: &PodInfo,
    term: &mut watch::Receiver<Option<Duration>>,
) -> bool {
    let ns_dir = ctx.layout.pod_ns_dir(&pod.uid);
    loop {
        if term.borrow().is_some() {
            return false;
        }
        let result = match setup_pod_cgroup(ctx, pod) {
            Err(e) => Err(e.to_string()),
            Ok(()) if SandboxPaths::new(&ns_dir, pod.sandbox_shape()).exists() => Ok(()),
            Ok(()) => create_sandbox(ctx, pod).await.map_err(|e| e.to_string()),
        };
        let result = match result {
            Ok(()) => setup_volumes(ctx, pod).await.map_err(|e| e.to_string()),
            failed => failed,
        };
        let result = match result {
            Ok(()) => match setup_network(ctx, pod).await {
                Ok(ips) => dns_files(ctx, pod, write_pod_dns_files(ctx, pod, &ips))
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            },
            failed => failed,
        };
        match result {
            Ok(()) => return true,
            Err(message) => {
                ctx.store.pod_event(
                    &pod.uid,
                    EventKind::Warning,
                    "FailedCreatePodSandBox",
                    &format!("pod/{}", pod.name),
                    format!("Failed to create pod sandbox: {message}"),
                );
                teardown_network(ctx, pod).await;
                let _ = sandbox::destroy(&ns_dir);
                // A network not ready yet (the Node's podCIDR awaited): retry as soon
                // as it starts.
                let network_waiting = !pod.host_network && !ctx.network.is_ready();
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(10)) => {}
                    _ = ctx.network.ready(), if network_waiting => {}
                    _ = term.wait_for(|t| t.is_some()) => return false,
                }
            }
        }
    }
}

/// The pod's network (its own, or the host's with hostNetwork) and its IPs and the
/// host's in its status; returns the pod's IPs.
async fn setup_network(ctx: &Ctx, pod: &PodInfo) -> Result<Vec<std::net::IpAddr>, WorkerError> {
    let failed = |stage: &'static str| {
        move |source| WorkerError::Network {
            pod: pod.name.clone(),
            stage,
            source,
        }
    };
    let pod_ips: Vec<std::net::IpAddr> = if pod.host_network {
        ctx.host_ips
            .iter()
            .filter_map(|ip| ip.parse().ok())
            .collect()
    } else {
        let backend = ctx
            .network
            .backend()
            .await
            .map_err(failed("network is not ready"))?;
        let request = crate::network::PodNetRequest {
            uid: pod.uid.clone(),
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            netns: ctx.layout.pod_ns_dir(&pod.uid).join("net"),
            host_ports: crate::model::host_ports::host_ports(&pod.pod),
        };
        if matches!(backend, crate::network::PodNetwork::None) && !request.host_ports.is_empty() {
            let ports: Vec<String> = request.host_ports.iter().map(|p| p.describe()).collect();
            ctx.store.pod_event(
                &pod.uid,
                EventKind::Warning,
                "HostPortsNotPublished",
                &format!("pod/{}", pod.name),
                format!(
                    "--pod-network none: the pod has no network of its own, so its hostPorts \
                     ({}) are not published; use the bridge or CNI, or hostNetwork",
                    ports.join(", ")
                ),
            );
        }
        backend
            .setup(&request)
            .await
            .map_err(failed("failed to set up the pod's network"))?
            .map(|status| status.ips)
            .unwrap_or_default()
    };
    let host_ips = ctx.host_ips.clone();
    let ips: Vec<String> = pod_ips.iter().map(|ip| ip.to_string()).collect();
    ctx.store.update_status(&pod.uid, |s| {
        s.host_ip = host_ips.first().cloned();
        s.host_ips = (!host_ips.is_empty()).then(|| {
            host_ips
                .iter()
                .map(|ip| k8s_openapi::api::core::v1::HostIP { ip: ip.clone() })
                .collect()
        });
        s.pod_ip = ips.first().cloned();
        s.pod_ips = (!ips.is_empty()).then(|| {
            ips.iter()
                .map(|ip| k8s_openapi::api::core::v1::PodIP { ip: ip.clone() })
                .collect()
        });
    });
    Ok(pod_ips)
}

/// Releases the pod's network (not the host's); retried a few times, then left to the
/// next daemon's reconciliation with a warning event.
async fn teardown_network(ctx: &Ctx, pod: &PodInfo) {
    if pod.host_network {
        return;
    }
    let mut last_error = None;
    for attempt in 0..3 {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let result = match ctx.network.backend().await {
            Ok(backend) => backend.teardown(&pod.uid).await,
            // The bridge never started (the Node's podCIDR is awaited): this daemon
            // gave the pod nothing; what an earlier one left is the backend's to find
            // when it starts (its setup is idempotent, its reconcile frees the rest).
            Err(crate::network::NetworkError::PodCidrPending) => return,
            Err(e) => Err(e),
        };
        match result {
            Ok(()) => return,
            Err(e) => last_error = Some(e),
        }
    }
    if let Some(e) = last_error {
        tracing::warn!(pod = %pod.name, error = %e, "pod network not released");
        ctx.store.pod_event(
            &pod.uid,
            EventKind::Warning,
            "FailedKillPod",
            &format!("pod/{}", pod.name),
            format!("failed to release the pod's network: {e}; the next daemon start retries"),
        );
    }
}

/// The DNS files' outcome: their warnings become the pod's `DNSConfigForming` events.
// WorkerError is large (it carries the images' and pulls' errors); this runs once per
// sandbox, never in a hot loop.
#[expect(clippy::result_large_err)]
fn dns_files(
    ctx: &Ctx,
    pod: &PodInfo,
    written: Result<Vec<String>, WorkerError>,
) -> Result<(), WorkerError> {
    for warning in written? {
        ctx.store.pod_event(
            &pod.uid,
            EventKind::Warning,
            "DNSConfigForming",
            &format!("pod/{}", pod.name),
            warning,
        );
    }
    Ok(())
}

/// The pod's emptyDir and content volumes (idempotent: also after a daemon restart).
/// A spec error in its volumes is left to each container's start, where it is that
/// container's CreateContainerConfigError.
async fn setup_volumes(ctx: &Ctx, pod: &PodInfo) -> Result<(), WorkerError> {
    let dir = ctx.layout.pod_volumes_dir(&pod.uid);
    let containers = ctx.layout.pod_dir(&pod.uid).join("containers");
    let spec = pod.pod.clone();
    let node_memory = ctx.allocatable_memory();
    let made = tokio::task::spawn_blocking(move || {
        // A container of the pod has an attempt dir from its first start on.
        let ran = std::fs::read_dir(&containers).is_ok_and(|dirs| {
            dirs.flatten()
                .any(|c| !crate::disk::layout::attempts(&c.path()).is_empty())
        });
        let state = if ran {
            PodVolumesState::ContainersRan
        } else {
            PodVolumesState::BeforeContainers
        };
        match crate::volume::plan::plan_pod(&spec, &dir, node_memory) {
            Ok(plan) => crate::volume::setup_pod_volumes(&plan, state),
            Err(_) => Ok(()),
        }
    })
    .await;
    match made {
        Ok(result) => result.map_err(|source| WorkerError::Volumes {
            pod: pod.name.clone(),
            source,
        }),
        // A bug: it ends the worker, and the daemon with it, like any worker panic.
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
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

/// The pod's cgroup with the kubelet's pod-level values (full cgroup v2 mode).
fn setup_pod_cgroup(ctx: &Ctx, pod: &PodInfo) -> Result<(), crate::runtime::RuntimeError> {
    let resources = pod_resources(&pod.pod);
    let cfg = pod_cgroup_config(pod.qos, &resources);
    let cpu_requests: i64 = resources
        .iter()
        .map(|r| r.cpu_request_milli.unwrap_or(0))
        .sum();
    ctx.cgroups.setup_pod(pod.qos, &pod.uid, &cfg, cpu_requests)
}

async fn create_sandbox(ctx: &Ctx, pod: &PodInfo) -> Result<(), WorkerError> {
    let hostname = pod
        .hostname(&ctx.dns.settings)
        .map_err(|source| WorkerError::Dns {
            pod: pod.name.clone(),
            source,
        })?;
    if pod.userns.is_none() && !pod.shared_pid {
        // Namespaces only: made on a thread of the daemon, no helper exec.
        let shape = crate::runtime::sandbox::SandboxShape {
            host_network: pod.host_network,
            host_ipc: pod.host_ipc,
            shared_pid: false,
            userns: None,
        };
        let ns_dir = ctx.layout.pod_ns_dir(&pod.uid);
        let made = tokio::task::spawn_blocking(move || {
            crate::runtime::sandbox::create_on_own_thread(&ns_dir, &hostname, shape)
        })
        .await;
        return match made {
            Ok(result) => result.map_err(|e| WorkerError::Sandbox {
                pod: pod.name.clone(),
                message: e.to_string(),
            }),
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        };
    }
    let mut cmd = tokio::process::Command::new(&ctx.exe);
    cmd.arg("sandbox")
        .arg("--ns-dir")
        .arg(ctx.layout.pod_ns_dir(&pod.uid))
        .arg("--hostname")
        .arg(hostname);
    if pod.host_network {
        cmd.arg("--host-network");
    }
    if pod.host_ipc {
        cmd.arg("--host-ipc");
    }
    if let Some(map) = pod.userns {
        cmd.arg("--userns-base").arg(map.base.to_string());
    }
    if pod.shared_pid {
        cmd.arg("--shared-pid");
        if let Some(leaf) = ctx.cgroups.shims_dir() {
            cmd.arg("--pause-cgroup").arg(leaf);
        }
    }
    let out = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .await
        .map_err(|source| WorkerError::SandboxSpawn {
            pod: pod.name.clone(),
            source,
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(WorkerError::Sandbox {
            pod: pod.name.clone(),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// Frees the pod's block of IDs and the chowned snapshot copies made for it.
fn release_userns(ctx: &Ctx, pod: &PodInfo) {
    match ctx.userns.release(&pod.uid) {
        Ok(Some(map)) => {
            let copies = ctx
                .layout
                .root_dir
                .join(crate::runtime::userns::chown_copy::COPIES_DIR)
                .join(map.base.to_string());
            let _ = std::fs::remove_dir_all(copies);
        }
        Ok(None) => {}
        Err(e) => tracing::warn!(pod = %pod.name, error = %e, "user namespace block not released"),
    }
}

/// Releases everything the pod held on the host and forgets it; returns its last
/// record.
async fn finish(ctx: &Ctx, pod: &PodInfo) -> Option<crate::status::PodRecord> {
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
        tokio::task::spawn_blocking(move || crate::volume::teardown_pod_volumes(&layout, &uid))
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
