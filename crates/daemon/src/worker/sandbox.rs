//! The pod's sandbox, set up, checked and repaired as the pod-sync core decides
//! ([`decide_sandbox`]): its cgroup, namespaces, volumes, network and DNS files.
//!
//! A fresh pod's sandbox is made step by step before its containers start. A pod a
//! previous daemon left running gets each step checked (every step is idempotent) and
//! its containers adopted at once; a step that fails then is retried alone, with
//! back-off, by the pod's sandbox guard, which also checks the pod's network every
//! [`CHECK_INTERVAL`] and repairs what disappeared under it. Nothing here ever tears a
//! sandbox down while a container of the pod may run: that is the core's rule.

use std::net::IpAddr;
use std::process::Stdio;
use std::time::Duration;

use chrono::Utc;
use tokio::sync::watch;

use super::context::{Ctx, PodInfo};
use super::dns_files::write_pod_dns_files;
use super::error::WorkerError;
use super::report::{Report, ReportSender};
use podhost_model::podsync::{
    FailureKind, FailureResponse, SandboxObserved, SandboxStep, StepState, decide_sandbox,
    on_step_failure,
};
use podhost_model::qos::pod_resources;
use podhost_model::resources::pod_cgroup_config;
use podhost_runtime::sandbox::{self, SandboxPaths};
use podhost_runtime::shim_client;
use podhost_status::EventKind;
use podhost_status::k8s_time;
use podhost_volume::PodVolumesState;

/// How often a running pod's sandbox is checked (its network: veth, eth0, addresses,
/// rules), as the kubelet's PLEG relists sandboxes.
pub const CHECK_INTERVAL: Duration = Duration::from_secs(10);

/// A sandbox as set up so far, handed from the pod's start to its guard.
pub(super) struct Sandbox {
    pub observed: SandboxObserved,
    /// The pod's addresses, once its network is set up.
    pub ips: Vec<IpAddr>,
    /// The steps that failed, were found missing or wait for the node since they were
    /// last in place: their repair is an event.
    troubled: std::collections::BTreeSet<SandboxStep>,
    /// Test-only injected failures (`PODHOST_TEST_SANDBOX_FAULT`).
    faults: Faults,
}

/// Sets the pod's sandbox up (a fresh pod: until it is complete; a pod whose containers
/// may still run: one pass, the guard does the rest). `None` if the pod was terminated
/// first.
pub(super) async fn ensure_sandbox(
    ctx: &Ctx,
    pod: &PodInfo,
    term: &mut watch::Receiver<Option<Duration>>,
) -> Option<Sandbox> {
    let may_run = containers_may_run(ctx, pod);
    let mut sandbox = Sandbox {
        observed: SandboxObserved::unknown(may_run),
        ips: Vec::new(),
        troubled: std::collections::BTreeSet::new(),
        faults: Faults::from_env(),
    };
    observe_namespaces(ctx, pod, &mut sandbox.observed);
    loop {
        if term.borrow().is_some() {
            return None;
        }
        let plan = decide_sandbox(&sandbox.observed, Utc::now());
        if plan.ready {
            return Some(sandbox);
        }
        if plan.recreate {
            tracing::info!(pod = %pod.name, "no container of the pod runs: its sandbox is made anew");
            teardown_network(ctx, pod).await;
            if let Err(e) = sandbox::destroy(&ctx.layout.pod_ns_dir(&pod.uid)) {
                tracing::warn!(pod = %pod.name, error = %e, "leftover sandbox not released");
            }
            sandbox.observed.on_recreated();
        }
        let ran = !plan.run.is_empty();
        run_steps(ctx, pod, &mut sandbox, &plan.run, !may_run).await;
        publish_problem(ctx, pod, &sandbox.observed);
        if may_run {
            // The containers are adopted now; what failed is the guard's to retry.
            return Some(sandbox);
        }
        if ran {
            continue;
        }
        let plan = decide_sandbox(&sandbox.observed, Utc::now());
        if plan.ready || !plan.run.is_empty() {
            continue;
        }
        let waiting_for_node = waits_for_node(&sandbox.observed);
        let sleep = plan
            .wake_at
            .and_then(|at| (at - Utc::now()).to_std().ok())
            .unwrap_or(CHECK_INTERVAL);
        tokio::select! {
            _ = tokio::time::sleep(sleep) => {}
            _ = ctx.network.ready(), if waiting_for_node => sandbox.observed.on_node_ready(),
            _ = term.wait_for(|t| t.is_some()) => return None,
        }
    }
}

/// Keeps a running pod's sandbox whole: retries the steps that failed (after their
/// back-off), checks the network every [`CHECK_INTERVAL`] and repairs what is missing,
/// and tells the sync loop what is wrong (the pod is not Ready meanwhile).
pub(super) async fn guard(
    ctx: std::sync::Arc<Ctx>,
    pod: std::sync::Arc<PodInfo>,
    mut sandbox: Sandbox,
    reports: ReportSender,
    mut term: watch::Receiver<Option<Duration>>,
) {
    // The sync loop starts containers at any time from now on: the guard repairs parts,
    // it never recreates the sandbox under them.
    sandbox.observed.containers_may_run = true;
    let mut told: Option<Option<String>> = None;
    let mut next_check = tokio::time::Instant::now() + CHECK_INTERVAL;
    loop {
        if term.borrow().is_some() {
            // Being killed: the containers stop, then `finish` releases everything.
            return;
        }
        let plan = decide_sandbox(&sandbox.observed, Utc::now());
        if !plan.run.is_empty() {
            run_steps(ctx.as_ref(), &pod, &mut sandbox, &plan.run, false).await;
            for step in &plan.run {
                if *sandbox.observed.state(*step) == StepState::Ready
                    && sandbox.troubled.remove(step)
                {
                    ctx.store.pod_event(
                        &pod.uid,
                        EventKind::Normal,
                        "SandboxRepaired",
                        &format!("pod/{}", pod.name),
                        format!("the pod's {} is in place again", step.describe()),
                    );
                }
            }
            continue;
        }
        let problem = plan.problem.clone();
        if told.as_ref() != Some(&problem) {
            if reports
                .send(Report::Sandbox {
                    problem: problem.clone(),
                })
                .is_err()
            {
                return;
            }
            told = Some(problem);
        }
        let wake = plan
            .wake_at
            .and_then(|at| (at - Utc::now()).to_std().ok())
            .map(|d| tokio::time::Instant::now() + d)
            .map_or(next_check, |w| w.min(next_check));
        let waiting_for_node = waits_for_node(&sandbox.observed);
        tokio::select! {
            _ = tokio::time::sleep_until(wake) => {}
            _ = ctx.network.ready(), if waiting_for_node => sandbox.observed.on_node_ready(),
            _ = term.wait_for(|t| t.is_some()) => {}
        }
        if tokio::time::Instant::now() >= next_check {
            next_check = tokio::time::Instant::now() + CHECK_INTERVAL;
            check(ctx.as_ref(), &pod, &mut sandbox).await;
        }
    }
}

/// Whether a step waits for the node (the Node's podCIDR).
fn waits_for_node(observed: &SandboxObserved) -> bool {
    SandboxStep::ALL
        .iter()
        .any(|s| matches!(observed.state(*s), StepState::Waiting(_)))
}

/// Looks at what must still be there: the namespaces, and the pod's network.
async fn check(ctx: &Ctx, pod: &PodInfo, sandbox: &mut Sandbox) {
    if *sandbox.observed.state(SandboxStep::Namespaces) == StepState::Ready {
        observe_namespaces(ctx, pod, &mut sandbox.observed);
    }
    if *sandbox.observed.state(SandboxStep::Network) != StepState::Ready || pod.host_network {
        return;
    }
    match check_network(ctx, pod, &sandbox.ips).await {
        Ok(None) => {}
        Ok(Some(missing)) => {
            tracing::warn!(pod = %pod.name, %missing, "the pod's network disappeared under it; repairing");
            ctx.store.pod_event(
                &pod.uid,
                EventKind::Warning,
                "NetworkMissing",
                &format!("pod/{}", pod.name),
                format!("the pod's network disappeared ({missing}); setting it up again"),
            );
            sandbox.observed.on_missing(SandboxStep::Network, missing);
            sandbox.troubled.insert(SandboxStep::Network);
            // The hosts file follows the network.
            sandbox
                .observed
                .on_missing(SandboxStep::DnsFiles, "after the network".into());
        }
        Err(e) => tracing::warn!(pod = %pod.name, error = %e, "cannot check the pod's network"),
    }
}

/// Runs `steps` in order, stopping at the first failure; each outcome goes into the
/// observed facts, each failure into a Warning event naming the step.
async fn run_steps(
    ctx: &Ctx,
    pod: &PodInfo,
    sandbox: &mut Sandbox,
    steps: &[SandboxStep],
    creating: bool,
) {
    for step in steps {
        let result = match sandbox.faults.take(*step, pod.host_network) {
            Some(injected) => Err(injected),
            None => run_step(ctx, pod, *step, &mut sandbox.ips).await,
        };
        let now = Utc::now();
        match result {
            Ok(()) => sandbox.observed.on_ready(*step),
            Err(StepError { kind, message }) => {
                let object = format!("pod/{}", pod.name);
                match kind {
                    // A pod a previous daemon left running keeps its network while this
                    // daemon waits for the Node's podCIDR to open the backend: nothing is
                    // wrong with the pod, so neither a warning now nor a "repaired" event
                    // once the step is verified (the kubelet does not touch a running
                    // sandbox while its network plugin starts).
                    FailureKind::NodeNotReady if !creating => {
                        tracing::info!(pod = %pod.name, step = step.describe(), "a running pod's sandbox is checked once the node's pod network starts");
                        sandbox.observed.on_waiting(*step, message);
                    }
                    FailureKind::NodeNotReady => {
                        if sandbox.troubled.insert(*step) {
                            ctx.store.pod_event(
                                &pod.uid,
                                EventKind::Warning,
                                "NetworkNotReady",
                                &object,
                                format!("network is not ready: {message}"),
                            );
                        }
                        sandbox.observed.on_waiting(*step, message);
                    }
                    FailureKind::Error => {
                        sandbox.troubled.insert(*step);
                        sandbox.observed.on_failed(*step, now, message.clone());
                        let failures = match sandbox.observed.state(*step) {
                            StepState::Failed { failures, .. } => *failures,
                            _ => 1,
                        };
                        let FailureResponse::RetryStep { after } = on_step_failure(kind, failures)
                        else {
                            unreachable!("an error is retried")
                        };
                        let (reason, text) = if creating {
                            // The kubelet's event, word for word (the log names the step).
                            (
                                "FailedCreatePodSandBox",
                                format!("Failed to create pod sandbox: {message}"),
                            )
                        } else {
                            (
                                "FailedSandboxRepair",
                                format!(
                                    "the pod's {} could not be set up: {message}; retried alone \
                                     in {}s, the running containers are left alone",
                                    step.describe(),
                                    after.as_secs()
                                ),
                            )
                        };
                        tracing::warn!(pod = %pod.name, step = step.describe(), error = %message, "sandbox step failed");
                        ctx.store
                            .pod_event(&pod.uid, EventKind::Warning, reason, &object, text);
                    }
                }
                return;
            }
        }
    }
}

/// Why a step failed.
struct StepError {
    kind: FailureKind,
    message: String,
}

impl StepError {
    fn error(e: impl std::fmt::Display) -> Self {
        Self {
            kind: FailureKind::Error,
            message: e.to_string(),
        }
    }
}

async fn run_step(
    ctx: &Ctx,
    pod: &PodInfo,
    step: SandboxStep,
    ips: &mut Vec<IpAddr>,
) -> Result<(), StepError> {
    match step {
        SandboxStep::Cgroup => setup_pod_cgroup(ctx, pod).map_err(StepError::error),
        SandboxStep::Namespaces => {
            let paths = SandboxPaths::new(&ctx.layout.pod_ns_dir(&pod.uid), pod.sandbox_shape());
            if paths.exists() {
                return Ok(());
            }
            create_sandbox(ctx, pod).await.map_err(StepError::error)
        }
        SandboxStep::Volumes => setup_volumes(ctx, pod).await.map_err(StepError::error),
        SandboxStep::Network => match setup_network(ctx, pod).await {
            Ok(set) => {
                *ips = set;
                Ok(())
            }
            Err(WorkerError::Network {
                source: podhost_network::NetworkError::PodCidrPending,
                ..
            }) => Err(StepError {
                kind: FailureKind::NodeNotReady,
                message: podhost_network::NetworkError::PodCidrPending.to_string(),
            }),
            Err(e) => Err(StepError::error(e)),
        },
        SandboxStep::DnsFiles => {
            dns_files(ctx, pod, write_pod_dns_files(ctx, pod, ips)).map_err(StepError::error)
        }
    }
}

/// Whether the pod's namespaces are all there: ready, missing (some or all gone), or
/// not made yet (nothing of them exists: a fresh pod).
fn observe_namespaces(ctx: &Ctx, pod: &PodInfo, observed: &mut SandboxObserved) {
    let ns_dir = ctx.layout.pod_ns_dir(&pod.uid);
    if SandboxPaths::new(&ns_dir, pod.sandbox_shape()).exists() {
        observed.on_ready(SandboxStep::Namespaces);
    } else if ns_dir.exists() {
        observed.on_missing(
            SandboxStep::Namespaces,
            format!("the namespace handles under {} are gone", ns_dir.display()),
        );
    }
}

/// A container of the pod may run: its newest attempt has no exit record and its shim,
/// or the container's init, is alive ([`shim_client::may_run`]).
fn containers_may_run(ctx: &Ctx, pod: &PodInfo) -> bool {
    let containers = ctx.layout.pod_dir(&pod.uid).join("containers");
    std::fs::read_dir(&containers)
        .into_iter()
        .flatten()
        .flatten()
        .any(|c| {
            let dir = c.path();
            podhost_disk::layout::attempts(&dir)
                .last()
                .is_some_and(|last| shim_client::may_run(&dir.join(last.to_string())))
        })
}

/// Before the sync loop runs, the pod's record carries the sandbox's problem in its
/// `PodReadyToStartContainers` condition (a pod waiting for the pod CIDR shows why).
fn publish_problem(ctx: &Ctx, pod: &PodInfo, observed: &SandboxObserved) {
    let plan = decide_sandbox(observed, Utc::now());
    let Some(problem) = plan.problem else {
        return;
    };
    let now = k8s_time(Utc::now());
    ctx.store.update_status(&pod.uid, |s| {
        let conditions = s.conditions.get_or_insert_with(Vec::new);
        let condition = k8s_openapi::api::core::v1::PodCondition {
            type_: "PodReadyToStartContainers".into(),
            status: "False".into(),
            reason: Some("PodSandboxNotReady".into()),
            message: Some(problem.clone()),
            last_transition_time: Some(now.clone()),
            ..Default::default()
        };
        match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
            Some(c) if c.status == "False" => c.message = condition.message,
            Some(c) => *c = condition,
            None => conditions.push(condition),
        }
        if s.phase.is_none() {
            s.phase = Some("Pending".into());
        }
    });
}

/// Failures injected into sandbox steps by tests (debug builds only):
/// `PODHOST_TEST_SANDBOX_FAULT=<step>[:<times>]` fails that step's first `times` runs
/// (default 2) in each pod; `network-pending` makes the network wait for the pod CIDR
/// instead. Steps: cgroup, namespaces, volumes, network, dns.
#[derive(Debug, Default)]
struct Faults {
    step: Option<(SandboxStep, bool)>,
    left: u32,
}

impl Faults {
    fn from_env() -> Self {
        if !cfg!(debug_assertions) {
            return Self::default();
        }
        let Ok(spec) = std::env::var("PODHOST_TEST_SANDBOX_FAULT") else {
            return Self::default();
        };
        let (name, times) = spec.split_once(':').unwrap_or((&spec, "2"));
        let step = match name {
            "cgroup" => (SandboxStep::Cgroup, false),
            "namespaces" => (SandboxStep::Namespaces, false),
            "volumes" => (SandboxStep::Volumes, false),
            "network" => (SandboxStep::Network, false),
            "network-pending" => (SandboxStep::Network, true),
            "dns" => (SandboxStep::DnsFiles, false),
            _ => return Self::default(),
        };
        Self {
            step: Some(step),
            left: times.parse().unwrap_or(2),
        }
    }

    fn take(&mut self, step: SandboxStep, host_network: bool) -> Option<StepError> {
        let (faulty, pending) = self.step?;
        // Only a pod on the pod network can wait for the pod CIDR.
        if faulty != step || self.left == 0 || (pending && host_network) {
            return None;
        }
        self.left -= 1;
        Some(StepError {
            kind: if pending {
                FailureKind::NodeNotReady
            } else {
                FailureKind::Error
            },
            message: format!("injected failure of the {} step", step.describe()),
        })
    }
}

/// What of the pod's network is missing (`None`: all there): its veth, `eth0`, an
/// address, a route, the nftables table or its hostPort rules.
async fn check_network(
    ctx: &Ctx,
    pod: &PodInfo,
    ips: &[IpAddr],
) -> Result<Option<String>, podhost_network::NetworkError> {
    let backend = ctx.network.backend().await?;
    Ok(
        match backend.check(&pod_net_request(ctx, pod), ips).await? {
            podhost_network::NetworkHealth::Attached => None,
            podhost_network::NetworkHealth::Missing(what) => Some(what),
        },
    )
}

/// What the network backend needs of the pod.
fn pod_net_request(ctx: &Ctx, pod: &PodInfo) -> podhost_network::PodNetRequest {
    podhost_network::PodNetRequest {
        uid: pod.uid.clone(),
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
        netns: ctx.layout.pod_ns_dir(&pod.uid).join("net"),
        host_ports: podhost_model::host_ports::host_ports(&pod.pod),
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
        let request = pod_net_request(ctx, pod);
        if matches!(backend, podhost_network::PodNetwork::None) && !request.host_ports.is_empty() {
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
pub(super) async fn teardown_network(ctx: &Ctx, pod: &PodInfo) {
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
            // gave the pod nothing; what an earlier one left is released when it starts
            // (unless it started just now: then at the next attempt).
            Err(podhost_network::NetworkError::PodCidrPending) => {
                if ctx.network.release_when_started(&pod.uid) {
                    return;
                }
                match ctx.network.backend().await {
                    Ok(backend) => backend.teardown(&pod.uid).await,
                    Err(e) => Err(e),
                }
            }
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
/// container's CreateContainerConfigError; so is one in a container's mounts, which
/// does not keep the volumes from being made.
async fn setup_volumes(ctx: &Ctx, pod: &PodInfo) -> Result<(), WorkerError> {
    let dir = ctx.layout.pod_volumes_dir(&pod.uid);
    let containers = ctx.layout.pod_dir(&pod.uid).join("containers");
    let spec = pod.pod.clone();
    let node_memory = ctx.allocatable_memory();
    let made = tokio::task::spawn_blocking(move || {
        // A container of the pod has an attempt dir from its first start on.
        let ran = std::fs::read_dir(&containers).is_ok_and(|dirs| {
            dirs.flatten()
                .any(|c| !podhost_disk::layout::attempts(&c.path()).is_empty())
        });
        let state = if ran {
            PodVolumesState::ContainersRan
        } else {
            PodVolumesState::BeforeContainers
        };
        match podhost_volume::plan::plan_pod_volumes(&spec, &dir, node_memory) {
            Ok(plan) => podhost_volume::setup_pod_volumes(&plan, state),
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

/// The pod's cgroup with the kubelet's pod-level values (full cgroup v2 mode).
fn setup_pod_cgroup(ctx: &Ctx, pod: &PodInfo) -> Result<(), podhost_runtime::RuntimeError> {
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
        let shape = podhost_runtime::sandbox::SandboxShape {
            host_network: pod.host_network,
            host_ipc: pod.host_ipc,
            shared_pid: false,
            userns: None,
        };
        let ns_dir = ctx.layout.pod_ns_dir(&pod.uid);
        let made = tokio::task::spawn_blocking(move || {
            podhost_runtime::sandbox::create_on_own_thread(&ns_dir, &hostname, shape)
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
