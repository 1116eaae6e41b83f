//! The executor of one pod: observe, ask the pod-sync core, perform, repeat.
//!
//! Everything that happens to the pod's containers arrives here as a [`Report`] (from
//! the start, exit and hook tasks), a termination order, an image load or a timer; each
//! is folded into the observed state, and [`sync_pod`] decides what to do next. This file
//! decides nothing itself.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use k8s_openapi::api::core::v1::{Container, EphemeralContainer};
use nix::sys::signal::Signal;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use super::adopt::adopt_pod;
use super::context::{Ctx, PodInfo};
use super::ephemeral::{self, EphemeralError, EphemeralRequest};
use super::facts::{container_facts, pod_facts};
use super::hook::{HookPoint, handler_target, run_hook};
use super::report::{Report, ReportReceiver, ReportSender, Running, report_channel};
use podhost_image::gc::ImageLease;
use podhost_model::phase::PodPhase;
use podhost_model::podsync::{
    Action, ContainerKind, ContainerObserved, Decision, PodFacts, PodObserved, PodStatusView,
    SignalKind, sync_pod,
};
use podhost_probe::{ContainerProbes, ProbeReport, ProbedInstance, run_prober};
use podhost_runtime::process_handle::{Delivery, ProcessHandle};
use podhost_status::EventKind;

mod resize;

/// The pod worker's order: `Some(grace)` once the pod terminates.
pub type TermRx = watch::Receiver<Option<Duration>>;

/// An eviction ordered by the node's eviction manager.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvictOrder {
    pub message: String,
    pub grace: Duration,
}

/// Runs the pod's containers until the pod has terminated and none of them runs.
pub(super) async fn run_containers(
    ctx: Arc<Ctx>,
    pod: Arc<PodInfo>,
    sandbox: Option<super::sandbox::Sandbox>,
    term: TermRx,
    mut evict: watch::Receiver<Option<EvictOrder>>,
    latest: watch::Receiver<Arc<k8s_openapi::api::core::v1::Pod>>,
) {
    let requests = ctx.ephemeral.register(&pod.uid);
    let mut facts = pod_facts(&pod, ctx.backoff);
    let mut ephemeral_specs = HashMap::new();
    let ephemeral = ephemeral::load(&ctx, &pod.uid);
    for e in &ephemeral {
        if let Ok(c) = ephemeral::as_container(e) {
            facts
                .ephemeral_containers
                .push(container_facts(&c, ContainerKind::Ephemeral));
            ephemeral_specs.insert(c.name.clone(), Box::new(c));
        }
    }
    if !ephemeral.is_empty() {
        ctx.store.set_ephemeral_containers(&pod.uid, &ephemeral);
    }
    // Boxed: the adoption's state would otherwise be part of this future for the pod's
    // whole life (see `pod::run`).
    let (observed, adopted) = Box::pin(adopt_pod(&ctx, &pod, &facts)).await;
    let (reports_tx, reports) = report_channel();
    let (probe_tx, probe_reports) = mpsc::unbounded_channel();
    let mut exec = Executor {
        probe_tx,
        probers: HashMap::new(),
        ephemeral_specs,
        ephemeral,
        ctx,
        pod,
        facts,
        observed,
        reports_tx,
        tasks: JoinSet::new(),
        running: HashMap::new(),
        leases: HashMap::new(),
        published: None,
    };
    let spec_updates = latest.clone();
    super::content::spawn_refresher(&exec.ctx, &exec.pod, latest, &mut exec.tasks);
    if let Some(sandbox) = sandbox {
        exec.tasks.spawn(super::sandbox::guard(
            exec.ctx.clone(),
            exec.pod.clone(),
            sandbox,
            exec.reports_tx.clone(),
            term.clone(),
        ));
    }
    super::local_storage::spawn_watch(&exec.ctx, &exec.pod, &mut exec.tasks, &exec.reports_tx);
    let evictions = exec.reports_tx.clone();
    exec.tasks.spawn(async move {
        if let Ok(order) = evict.wait_for(Option::is_some).await
            && let Some(EvictOrder { message, grace }) = order.clone()
        {
            let _ = evictions.send(Report::Evict { message, grace });
        }
    });
    for a in adopted {
        exec.watch_exit(a.container, a.run, a.exit);
    }
    exec.load_allocation();
    // An API pod may have gained ephemeral containers while no daemon ran.
    exec.apply_spec_update(&exec.pod.pod.clone());
    exec.run(term, reports, probe_reports, requests, spec_updates)
        .await;
    exec.ctx.ephemeral.unregister(&exec.pod.uid);
}

struct Executor {
    ctx: Arc<Ctx>,
    pod: Arc<PodInfo>,
    facts: PodFacts,
    /// The specs of the ephemeral containers added by `podhost debug`; the pod's own
    /// containers are read from the shared pod (`pod.pod`), not copied for each worker
    /// (~2 KiB a container, for the pod's whole life). Boxed: a map's spare slots then
    /// cost a pointer, not a whole `Container`.
    ephemeral_specs: HashMap<String, Box<Container>>,
    /// The ephemeral containers added by `podhost debug`, as recorded.
    ephemeral: Vec<EphemeralContainer>,
    observed: PodObserved,
    reports_tx: ReportSender,
    /// Start, exit and hook tasks; aborted when the pod is done (a hook still running
    /// past the grace period is killed with it).
    tasks: JoinSet<()>,
    /// Where the probers report changed results.
    probe_tx: mpsc::UnboundedSender<Box<ProbeReport>>,
    /// Each running instance's prober, aborted when it exits.
    probers: HashMap<String, tokio::task::AbortHandle>,
    /// The running instances, for signals and hooks.
    running: HashMap<String, Running>,
    /// Keeps each container's image from image GC while it may use it (kubernetes#18140).
    leases: HashMap<String, ImageLease>,
    published: Option<PodStatusView>,
}

impl Executor {
    /// The spec of the pod's container (init, regular or ephemeral) named `name`.
    fn spec(&self, name: &str) -> Option<&Container> {
        let spec = self.pod.pod.spec.as_ref();
        spec.into_iter()
            .flat_map(|s| s.init_containers.iter().flatten().chain(&s.containers))
            .find(|c| c.name == name)
            .or_else(|| self.ephemeral_specs.get(name).map(|c| &**c))
    }

    async fn run(
        &mut self,
        mut term: TermRx,
        mut reports: ReportReceiver,
        mut probe_reports: mpsc::UnboundedReceiver<Box<ProbeReport>>,
        mut requests: mpsc::UnboundedReceiver<EphemeralRequest>,
        mut spec_updates: watch::Receiver<Arc<k8s_openapi::api::core::v1::Pod>>,
    ) {
        let mut images = self.ctx.images_changed.clone();
        let (mut term_open, mut images_open, mut updates_open) = (true, true, true);
        loop {
            if let Some(grace) = *term.borrow_and_update() {
                self.observed.on_terminate(Utc::now(), grace);
            }
            #[cfg(debug_assertions)]
            injected_panic(&self.pod.name);
            let now = Utc::now();
            let pass = std::time::Instant::now();
            let decision = sync_pod(&self.facts, &self.observed, now);
            self.publish(&decision);
            podhost_metrics::pod_sync(pass.elapsed());
            if decision.pod_done {
                break;
            }
            if !decision.actions.is_empty() {
                for action in decision.actions {
                    self.perform(action, now);
                }
                continue;
            }
            let wake = decision
                .wake_at
                .map(|at| (at - now).to_std().unwrap_or_default());
            tokio::select! {
                Some(report) = reports.recv() => self.fold(*report),
                Some(report) = probe_reports.recv() => self.fold_probe(*report),
                Some(request) = requests.recv() => {
                    let answer = self.add_ephemeral(*request.container);
                    let _ = request.reply.send(answer);
                }
                changed = term.changed(), if term_open => term_open = changed.is_ok(),
                changed = images.changed(), if images_open => match changed {
                    Ok(()) => self.observed.on_image_loaded(),
                    Err(_) => images_open = false,
                },
                changed = spec_updates.changed(), if updates_open => match changed {
                    Ok(()) => {
                        let pod = spec_updates.borrow_and_update().clone();
                        self.apply_spec_update(&pod);
                    }
                    Err(_) => updates_open = false,
                },
                _ = tokio::time::sleep(resize::RETRY_EVERY), if self.resize_waiting() => {
                    let latest = spec_updates.borrow().clone();
                    self.retry_waiting_resize(&latest);
                }
                _ = sleep_for(wake) => {}
            }
            while let Ok(report) = reports.try_recv() {
                self.fold(*report);
            }
            while let Ok(report) = probe_reports.try_recv() {
                self.fold_probe(*report);
            }
            // A finished task's memory (its whole future) stays in the set until joined:
            // without this, every start and hook of the pod's life would stay allocated.
            while self.tasks.try_join_next().is_some() {}
        }
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
    }

    /// Records the decision's events and, when it changed, its status.
    fn publish(&mut self, decision: &Decision) {
        for e in &decision.events {
            let kind = if e.warning {
                EventKind::Warning
            } else {
                EventKind::Normal
            };
            let object = if e.container.is_empty() {
                format!("pod/{}", self.pod.name)
            } else {
                self.pod.object(&e.container)
            };
            self.ctx
                .store
                .pod_event(&self.pod.uid, kind, e.reason, &object, e.message.clone());
        }
        if self.published.as_ref() != Some(&decision.status) {
            // Start latency counts pods this worker saw start, not adopted running ones.
            if decision.status.phase == PodPhase::Running
                && self
                    .published
                    .as_ref()
                    .is_some_and(|p| p.phase != PodPhase::Running)
            {
                podhost_metrics::pod_running(&self.pod.uid);
            }
            self.ctx.store.publish_sync(&self.pod.uid, &decision.status);
            self.published = Some(decision.status.clone());
        }
        self.observed.on_published(decision);
    }

    fn perform(&mut self, action: Action, now: chrono::DateTime<Utc>) {
        let name = action.container().to_string();
        let Some(mut spec) = self.spec(&name).cloned() else {
            return;
        };
        let Some(obs) = self.observed.container_mut(&name) else {
            return;
        };
        match action {
            Action::Start {
                attempt,
                image,
                backoff_after,
                ..
            } => {
                obs.on_start_begun(now, backoff_after, &image);
                let target_init = self.target_init(&name);
                // The core's image: an API pod's updated one, which the shared pod
                // object this worker started with does not have.
                let lease = self.ctx.leases.lease(&image);
                spec.image = Some(image);
                // The new lease is taken before the old one (a changed image's) goes.
                self.leases.insert(name.clone(), lease);
                // The resources allocated to it, which a resize may have changed since
                // the pod object this worker started with.
                if let Some(facts) = self
                    .facts
                    .init_containers
                    .iter_mut()
                    .chain(self.facts.containers.iter_mut())
                    .find(|f| f.name == name)
                {
                    let resources = &mut facts.resources;
                    let resized =
                        resources.allocated != podhost_model::resize::Allocation::of(&spec);
                    if resized {
                        let mut requirements = spec.resources.take().unwrap_or_default();
                        let allocated = resources.allocated.requirements();
                        requirements.requests = allocated.requests;
                        requirements.limits = allocated.limits;
                        spec.resources = Some(requirements);
                    }
                    let record = resized && resources.applied != resources.allocated;
                    resources.applied = resources.allocated.clone();
                    resources.restart_pending = false;
                    if record {
                        self.save_applied();
                    }
                }
                self.tasks.spawn(super::start::start(
                    self.ctx.clone(),
                    self.pod.clone(),
                    spec,
                    attempt,
                    target_init,
                    self.reports_tx.clone(),
                ));
            }
            Action::RunPostStart { .. } => {
                obs.on_post_start_begun(now);
                let handler = spec.lifecycle.as_ref().and_then(|l| l.post_start.clone());
                self.spawn_hook(name, HookPoint::PostStart, handler);
            }
            Action::RunPreStop { timeout, .. } => {
                obs.on_hook_started(now);
                let handler = spec.lifecycle.as_ref().and_then(|l| l.pre_stop.clone());
                self.spawn_hook(name, HookPoint::PreStop { timeout }, handler);
            }
            Action::Signal { signal, .. } => {
                obs.on_signal_sent(signal, now);
                let Some(run) = self.running.get(&name) else {
                    return;
                };
                let (sig, grace) = match signal {
                    SignalKind::Stop { grace } => (run.stop_signal, Some(grace)),
                    SignalKind::Kill => (Signal::SIGKILL, None),
                };
                let pid = run.init.pid();
                match grace {
                    Some(grace) => {
                        tracing::info!(container = %run.container_id, pid, signal = %sig, ?grace, "sending stop signal")
                    }
                    None => {
                        tracing::info!(container = %run.container_id, pid, "grace period over, sending SIGKILL")
                    }
                }
                // Through the handle opened at the start: a reaped init (its pid maybe
                // another process's by now) is never signalled; its exit report follows.
                match run.init.signal(sig) {
                    Ok(Delivery::Sent) => {}
                    Ok(Delivery::Gone) => {
                        tracing::info!(container = %run.container_id, pid, "the container's init is gone already; nothing signalled")
                    }
                    Err(e) => tracing::warn!(error = %e, "signal failed"),
                }
            }
        }
    }

    /// Applies what the kubelet applies of a running pod's changed spec: a new
    /// `activeDeadlineSeconds` (counted from the pod's start, as before), a container's
    /// new image (the core restarts it), and ephemeral containers added through the API
    /// (`pods/ephemeralcontainers`), each started once. The API server allows no other
    /// change to a running pod's containers.
    fn apply_spec_update(&mut self, pod: &k8s_openapi::api::core::v1::Pod) {
        let Some(spec) = pod.spec.as_ref() else {
            return;
        };
        // Any change of the spec (even one a running pod does not follow, such as its
        // tolerations) is observed: the status says which generation it reflects.
        if pod.metadata.generation > self.facts.generation {
            self.facts.generation = pod.metadata.generation;
        }
        // Labels and annotations, as the next container start reads them: the downward
        // API's environment variables and the `subPathExpr`s made of them (a start that
        // failed on a missing annotation succeeds once it is set, as with the kubelet,
        // which builds every start from the pod's latest object).
        let current = &self.pod.pod.metadata;
        if current.labels != pod.metadata.labels || current.annotations != pod.metadata.annotations
        {
            let mut info = (*self.pod).clone();
            let mut object = (*info.pod).clone();
            object.metadata.labels.clone_from(&pod.metadata.labels);
            object
                .metadata
                .annotations
                .clone_from(&pod.metadata.annotations);
            info.pod = Arc::new(object);
            self.pod = Arc::new(info);
            self.observed.on_metadata_changed();
        }
        self.resize_to(pod);
        self.facts.active_deadline = spec
            .active_deadline_seconds
            .map(|s| Duration::from_secs(podhost_model::convert::non_negative_u64(s)));
        // A new image: the core restarts a regular container or sidecar with it, and any
        // container's next start uses it.
        let containers = spec
            .init_containers
            .iter()
            .flatten()
            .chain(&spec.containers);
        for c in containers {
            let facts = self
                .facts
                .init_containers
                .iter_mut()
                .chain(self.facts.containers.iter_mut())
                .find(|f| f.name == c.name);
            if let Some(facts) = facts
                && let Some(image) = &c.image
                && *image != facts.image
            {
                tracing::info!(pod = %self.pod.name, container = %c.name, from = %facts.image, to = %image, "the container's image changed in the API server");
                facts.image.clone_from(image);
            }
        }
        for e in spec.ephemeral_containers.iter().flatten() {
            if self.ephemeral.iter().any(|known| known.name == e.name) {
                continue;
            }
            if let Err(error) = self.add_ephemeral(e.clone()) {
                tracing::warn!(pod = %self.pod.name, container = %e.name, %error, "ephemeral container of the API not started");
                self.ctx.store.pod_event(
                    &self.pod.uid,
                    EventKind::Warning,
                    "Failed",
                    &format!("pod/{}", self.pod.name),
                    format!("ephemeral container {:?} not started: {error}", e.name),
                );
            }
        }
    }

    /// Adds an ephemeral container (it starts at the next sync), recorded on disk first.
    fn add_ephemeral(&mut self, e: EphemeralContainer) -> Result<(), EphemeralError> {
        let pod = self.pod.name.clone();
        if self.observed.terminating.is_some() {
            return Err(EphemeralError::Terminating { pod });
        }
        if self.spec(&e.name).is_some() {
            return Err(EphemeralError::NameTaken { pod, name: e.name });
        }
        if let Some(target) = &e.target_container_name
            && self.spec(target).is_none()
        {
            return Err(EphemeralError::UnknownTarget {
                pod,
                target: target.clone(),
            });
        }
        let c = ephemeral::as_container(&e).map_err(|why| EphemeralError::Invalid {
            pod: pod.clone(),
            why: why.to_string(),
        })?;
        let mut list = self.ephemeral.clone();
        list.push(e);
        ephemeral::save(&self.ctx, &self.pod.uid, &pod, &list)?;
        self.ctx
            .store
            .set_ephemeral_containers(&self.pod.uid, &list);
        self.ephemeral = list;
        self.facts
            .ephemeral_containers
            .push(container_facts(&c, ContainerKind::Ephemeral));
        self.observed
            .ephemeral_containers
            .push(ContainerObserved::new(&c.name));
        self.ephemeral_specs.insert(c.name.clone(), Box::new(c));
        Ok(())
    }

    /// The init of the container whose pid namespace `container` (ephemeral) joins.
    fn target_init(&self, container: &str) -> Option<ProcessHandle> {
        let target = self
            .ephemeral
            .iter()
            .find(|e| e.name == container)?
            .target_container_name
            .as_ref()?;
        self.running.get(target).map(|r| r.init.clone())
    }

    fn spawn_hook(
        &mut self,
        container: String,
        point: HookPoint,
        handler: Option<k8s_openapi::api::core::v1::LifecycleHandler>,
    ) {
        let (Some(run), Some(handler)) = (self.running.get(&container).cloned(), handler) else {
            return;
        };
        let Some(spec) = self.spec(&container).cloned() else {
            return;
        };
        self.tasks.spawn(run_hook(
            self.ctx.clone(),
            self.pod.clone(),
            spec,
            point,
            handler,
            run,
            self.reports_tx.clone(),
        ));
    }

    fn fold(&mut self, report: Report) {
        let now = Utc::now();
        match report {
            Report::Started {
                container,
                run,
                image_id,
                exit,
            } => {
                if let Some(obs) = self.observed.container_mut(&container) {
                    obs.image_id = image_id;
                    obs.on_started(
                        run.attempt,
                        run.started.started_at,
                        format!("podhost://{}", run.container_id),
                    );
                }
                self.watch_exit(container, run, exit);
            }
            Report::Blocked {
                container,
                kind,
                message,
            } => {
                let generations = (
                    self.observed.image_generation,
                    self.observed.config_generation,
                );
                if let Some(obs) = self.observed.container_mut(&container) {
                    obs.on_start_blocked(kind, message, now, generations);
                }
            }
            Report::Exited {
                container,
                attempt,
                termination,
                released,
                recorded,
            } => {
                self.running.remove(&container);
                if let Some(prober) = self.probers.remove(&container) {
                    prober.abort();
                }
                if let Some(obs) = self.observed.container_mut(&container) {
                    obs.on_exited(attempt, termination, released);
                    if !recorded {
                        obs.on_exit_not_yet_recorded();
                    }
                }
            }
            Report::Recorded { container } => {
                if let Some(obs) = self.observed.container_mut(&container) {
                    obs.on_exit_recorded();
                }
            }
            Report::Released { container } => {
                if let Some(obs) = self.observed.container_mut(&container) {
                    obs.on_released();
                }
            }
            Report::Evict { message, grace } => self.observed.on_evicted(now, message, grace),
            Report::Sandbox { problem } => self.observed.sandbox_problem = problem,
            Report::PostStartEnded { container, failure } => {
                if let Some(obs) = self.observed.container_mut(&container) {
                    obs.on_post_start_ended(now, failure);
                }
            }
            Report::HookEnded { container, failure } => {
                if let Some(obs) = self.observed.container_mut(&container) {
                    obs.on_hook_ended(now, failure);
                }
            }
        }
    }

    /// A probe's result changed; a report of an older instance is stale.
    fn fold_probe(&mut self, report: ProbeReport) {
        let id = format!("podhost://{}", report.container_id);
        let current = self
            .observed
            .container_mut(&report.container)
            .is_some_and(|obs| obs.container_id.as_deref() == Some(id.as_str()));
        if !current {
            return;
        }
        if let Some(warning) = &report.warning {
            self.ctx.store.pod_event(
                &self.pod.uid,
                EventKind::Warning,
                "ProbeWarning",
                &format!("pod/{}/{}", self.pod.name, report.container),
                format!("{} probe warning: {warning}", report.kind.title()),
            );
        }
        if report.changed
            && let Some(obs) = self.observed.container_mut(&report.container)
        {
            obs.on_probe_result(report.kind, report.result, report.message);
        }
    }

    /// Starts the prober of the running instance `run` of `container`, if it has probes.
    fn start_prober(&mut self, container: &str, run: &Running) {
        let Some(spec) = self.spec(container) else {
            return;
        };
        if spec.startup_probe.is_none()
            && spec.liveness_probe.is_none()
            && spec.readiness_probe.is_none()
        {
            return;
        }
        let probes = match ContainerProbes::of_container(spec, &format!("container {container}")) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(pod = %self.pod.name, container, error = %e, "probes cannot run");
                return;
            }
        };
        let instance = ProbedInstance {
            container: container.to_string(),
            started_at: run.started.started_at,
            target: handler_target(&self.ctx, &self.pod, &run.container_id),
            series: podhost_metrics::ProbeSeries {
                namespace: self.pod.namespace.clone(),
                pod: self.pod.name.clone(),
                pod_uid: self.pod.uid.clone(),
                container: container.to_string(),
            },
        };
        let handle = self
            .tasks
            .spawn(run_prober(probes, instance, self.probe_tx.clone()));
        if let Some(old) = self.probers.insert(container.to_string(), handle) {
            old.abort();
        }
    }

    /// Keeps the running instance and awaits its exit.
    fn watch_exit(&mut self, container: String, run: Running, exit: super::report::ExitFuture) {
        self.start_prober(&container, &run);
        let attempt = run.attempt;
        self.running.insert(container.clone(), run);
        self.tasks.spawn(super::exit::watch(
            self.ctx.clone(),
            self.pod.clone(),
            container,
            attempt,
            exit,
            self.reports_tx.clone(),
        ));
    }
}

/// Sleeps `wake`, or forever when there is nothing to wake up for.
async fn sleep_for(wake: Option<Duration>) {
    match wake {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}

/// Debug builds only: `PODHOST_TEST_PANIC_POD_SYNC=<pod name>` makes that pod's sync loop
/// panic, so that a test sees the daemon end instead of releasing a pod whose containers
/// still run.
#[cfg(debug_assertions)]
fn injected_panic(pod: &str) {
    if std::env::var_os("PODHOST_TEST_PANIC_POD_SYNC").is_some_and(|v| v == pod) {
        panic!("injected by PODHOST_TEST_PANIC_POD_SYNC={pod}");
    }
}
