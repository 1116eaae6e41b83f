//! The prober of one container instance: each of its probes on its own schedule (as the
//! kubelet's per-probe workers), reporting only changes of the container's result.
//! Liveness and readiness wait until the container has started (its startup probe
//! succeeded, or it has none); the startup probe stops then.

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Container;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch;

use super::{HandlerTarget, run_handler};
use podhost_model::probe::{
    ActionError, ProbeAction, ProbeKind, ProbeResult, ProbeTiming, ProbeTracker,
};

/// One probe: what it runs and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeSpec {
    pub action: ProbeAction,
    pub timing: ProbeTiming,
}

/// A container's probes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerProbes {
    pub startup: Option<ProbeSpec>,
    pub liveness: Option<ProbeSpec>,
    pub readiness: Option<ProbeSpec>,
}

impl ContainerProbes {
    /// The probes of `container`, whose spec is at `field` (e.g. `spec.containers[0]`).
    pub fn of_container(container: &Container, field: &str) -> Result<Self, ActionError> {
        let ports = container.ports.as_deref().unwrap_or_default();
        let spec = |kind: ProbeKind, probe: Option<&k8s_openapi::api::core::v1::Probe>| {
            probe
                .map(|p| {
                    Ok(ProbeSpec {
                        action: ProbeAction::of_probe(
                            p,
                            ports,
                            &format!("{field}.{}", kind.field()),
                        )?,
                        timing: ProbeTiming::of(p),
                    })
                })
                .transpose()
        };
        Ok(Self {
            startup: spec(ProbeKind::Startup, container.startup_probe.as_ref())?,
            liveness: spec(ProbeKind::Liveness, container.liveness_probe.as_ref())?,
            readiness: spec(ProbeKind::Readiness, container.readiness_probe.as_ref())?,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.startup.is_none() && self.liveness.is_none() && self.readiness.is_none()
    }
}

/// The running instance the probes are for.
#[derive(Debug, Clone)]
pub struct ProbedInstance {
    /// The container's name in the pod.
    pub container: String,
    /// When the instance started (initial delays count from here).
    pub started_at: DateTime<Utc>,
    pub target: HandlerTarget,
    /// Its labels on the probe counter.
    pub series: podhost_metrics::ProbeSeries,
}

/// A changed result of one probe of one container instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeReport {
    pub container: String,
    /// The libcontainer id of the instance probed (a report of an older instance is stale).
    pub container_id: String,
    pub kind: ProbeKind,
    pub result: ProbeResult,
    /// The failure's text ("HTTP probe failed with statuscode: 500"); empty on success.
    pub message: String,
    /// Whether `result` is a change (else the report only carries `warning`).
    pub changed: bool,
    /// A successful run's warning (the kubelet's `ProbeWarning` event, each time).
    pub warning: Option<String>,
    /// For a liveness/startup failure: the probe's own grace for the kill, if it has one.
    pub termination_grace: Option<Duration>,
}

/// Probes the instance until the task is dropped or aborted, or nothing is left to
/// probe (every probe on hold or finished); sends each change of a probe's result.
/// Initial results are not sent: they are [`ProbeKind::initial_result`]. Reports travel
/// boxed: the pod's channel keeps its first block of 32 slots for the pod's whole life,
/// 32 pointers instead of 32 reports (3 KiB per pod).
pub async fn run_prober(
    probes: ContainerProbes,
    instance: ProbedInstance,
    reports: UnboundedSender<Box<ProbeReport>>,
) {
    // Only the startup probe's loop holds the sender: once it ends (started, or on
    // hold), the others see either `started` or a closed channel, and end with it.
    let (started_tx, started_rx) = watch::channel(probes.startup.is_none());
    let worker = |kind, spec: Option<ProbeSpec>, started_tx: Option<watch::Sender<bool>>| {
        let (instance, reports, started_rx) = (&instance, reports.clone(), started_rx.clone());
        async move {
            if let Some(spec) = spec {
                probe_loop(kind, spec, instance, started_rx, started_tx, reports).await;
            }
        }
    };
    tokio::join!(
        worker(ProbeKind::Startup, probes.startup, Some(started_tx)),
        worker(ProbeKind::Liveness, probes.liveness, None),
        worker(ProbeKind::Readiness, probes.readiness, None),
    );
}

/// How long until `due` (zero when past).
fn until(due: DateTime<Utc>) -> Duration {
    (due - Utc::now()).to_std().unwrap_or_default()
}

async fn probe_loop(
    kind: ProbeKind,
    spec: ProbeSpec,
    instance: &ProbedInstance,
    mut started: watch::Receiver<bool>,
    started_tx: Option<watch::Sender<bool>>,
    reports: UnboundedSender<Box<ProbeReport>>,
) {
    let mut tracker = ProbeTracker::new(kind, spec.timing, instance.started_at);
    loop {
        let is_started = *started.borrow_and_update();
        let Some(due) = tracker.next_due(is_started) else {
            let waits_for_start = !is_started && kind != ProbeKind::Startup && !tracker.on_hold();
            if !waits_for_start || started.changed().await.is_err() {
                return;
            }
            continue;
        };
        tokio::time::sleep(until(due)).await;
        let probed_at = Utc::now();
        let outcome = run_handler(&instance.target, &spec.action, Some(spec.timing.timeout)).await;
        podhost_metrics::probe_ran(&instance.series, kind_label(kind), outcome_label(&outcome));
        if let podhost_model::probe::Outcome::Unknown(why) = &outcome {
            tracing::warn!(container = %instance.container, probe = kind.field(), error = %why, "probe could not run");
        }
        let changed = tracker.on_result(outcome.result(), probed_at);
        let warning = outcome.warning().map(str::to_string);
        let Some(result) = changed.or(warning.as_ref().map(|_| ProbeResult::Success)) else {
            continue;
        };
        if let Some(tx) = started_tx
            .as_ref()
            .filter(|_| result == ProbeResult::Success)
        {
            let _ = tx.send(true);
        }
        let report = ProbeReport {
            container: instance.container.clone(),
            container_id: instance.target.container_id.clone(),
            kind,
            result,
            message: outcome.message().to_string(),
            changed: changed.is_some(),
            warning,
            termination_grace: (result == ProbeResult::Failure && kind.failure_restarts())
                .then_some(spec.timing.termination_grace)
                .flatten(),
        };
        if reports.send(Box::new(report)).is_err() {
            return;
        }
    }
}

/// The kubelet's `probe_type` label.
fn kind_label(kind: ProbeKind) -> &'static str {
    match kind {
        ProbeKind::Startup => "Startup",
        ProbeKind::Liveness => "Liveness",
        ProbeKind::Readiness => "Readiness",
    }
}

/// The kubelet's `result` label.
fn outcome_label(outcome: &podhost_model::probe::Outcome) -> &'static str {
    match outcome {
        podhost_model::probe::Outcome::Success | podhost_model::probe::Outcome::Warning(_) => {
            "successful"
        }
        podhost_model::probe::Outcome::Failure(_) => "failed",
        podhost_model::probe::Outcome::Unknown(_) => "unknown",
    }
}
