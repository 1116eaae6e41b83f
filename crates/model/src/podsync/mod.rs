//! The pod-sync core: one pure decision per sync, in the spirit of the kubelet's
//! `computePodActions`.
//!
//! [`sync_pod`] takes the pod's spec facts ([`PodFacts`]), what the worker has observed
//! of its containers ([`PodObserved`]) and `now`, and returns a [`Decision`]: the actions to
//! perform (start a container, run a preStop hook, send a signal), the events to record,
//! when to wake up if nothing else happens, and the pod's resulting status (phase,
//! conditions, container states with reasons). Restart policy, CrashLoopBackOff, image and
//! configuration back-off, termination ordering and the grace arithmetic are decided here
//! and nowhere else; so are the sandbox's lifecycle ([`decide_sandbox`]: create, keep,
//! repair one part, recreate) and the image pull policy ([`pull_decision`]).
//!
//! No I/O, no clock reads, no tokio: the worker observes (shim exits, hook results,
//! timers), folds each observation into [`PodObserved`] with its `on_*` methods (pure
//! transitions too), performs the actions, and asks again.

mod action;
mod container;
mod facts;
mod health;
mod init;
mod observed;
mod pull;
mod sandbox;
mod status;
mod stop;

#[cfg(test)]
mod tests;

pub use action::{Action, Decision, SignalKind, SyncEvent};
pub use facts::{ContainerFacts, ContainerKind, Hook, PodFacts, ProbeFacts};
pub use observed::{
    BlockKind, ContainerObserved, Health, HookProgress, Instance, PodObserved, ProbeKind,
    ProbeResult, ShownWaiting, StartBlock, StopProgress, Termination, TerminationOrder,
};
pub use pull::{PullDecision, pull_decision};
pub use sandbox::{
    FailureKind, FailureResponse, SandboxObserved, SandboxPlan, SandboxStep, StepState,
    decide_sandbox, on_step_failure, step_backoff,
};
pub use status::{PodStatusView, conditions, terminated_state};

use chrono::{DateTime, Utc};

use container::{Turn, decide};
use init::InitProgress;
use status::waiting;

/// Why the pod stops while it is not being terminated from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopCause {
    /// Ordered by the worker (manifest removed or replaced, daemon policy).
    Ordered,
    /// `activeDeadlineSeconds` passed: the pod failed with DeadlineExceeded.
    Deadline,
    /// An init container failed under restartPolicy Never: the pod failed.
    InitFailed,
    /// Every regular container finished for good: the sidecars go too.
    Completed,
    /// The node evicted the pod (local storage over a limit, node pressure): it failed.
    Evicted,
}

/// The grace of a local-storage eviction (the kubelet's, then the 2 s floor applies).
pub const EVICTION_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// The message of a pod failed by its `activeDeadlineSeconds`, as the kubelet's.
pub const DEADLINE_MESSAGE: &str = "Pod was active on the node longer than the specified deadline";

/// The one decision of a sync: see the module documentation.
pub fn sync_pod(pod: &PodFacts, observed: &PodObserved, now: DateTime<Utc>) -> Decision {
    let mut decision = Decision::default();
    let init = init::progress(pod, observed);
    let stopping = stop_order(pod, observed, &init, now, &mut decision);
    let (init_states, states) = match &stopping {
        Some((order, _)) => {
            let initialized = init == InitProgress::Done;
            stop::decide_pod(pod, observed, order, initialized, now, &mut decision)
        }
        None => {
            let init_states = init::decide_init(pod, observed, now, &mut decision);
            let states = if init == InitProgress::Done {
                regular(pod, observed, now, &mut decision)
            } else {
                vec![waiting("PodInitializing", None); pod.containers.len()]
            };
            (init_states, states)
        }
    };
    let (states, ephemeral_states) = split_ephemeral(pod, states, observed, now, &mut decision);
    decision.init_container_states = init_states;
    decision.container_states = states;
    decision.ephemeral_container_states = ephemeral_states;
    decision.pod_done =
        observed.terminating.is_some() && observed.all().all(ContainerObserved::is_settled);
    let cause = stopping.map(|(_, cause)| cause);
    decision.status = status::pod_status(pod, observed, &decision, &init, cause, now);
    for c in observed.all() {
        for (kind, message) in &c.unhealthy {
            decision.event(
                true,
                "Unhealthy",
                &c.name,
                format!("{} probe failed: {message}", probe_name(*kind)),
            );
        }
    }
    decision
}

/// Splits the stop path's states (regular then ephemeral) or, while the pod runs, decides
/// the ephemeral containers: each started once, never restarted.
fn split_ephemeral(
    pod: &PodFacts,
    mut states: Vec<k8s_openapi::api::core::v1::ContainerState>,
    observed: &PodObserved,
    now: DateTime<Utc>,
    out: &mut Decision,
) -> (
    Vec<k8s_openapi::api::core::v1::ContainerState>,
    Vec<k8s_openapi::api::core::v1::ContainerState>,
) {
    if states.len() > pod.containers.len() {
        let ephemeral = states.split_off(pod.containers.len());
        return (states, ephemeral);
    }
    let turn = Turn {
        policy: super::restart::RestartPolicy::Never,
        hold_first_start: false,
        image_generation: observed.image_generation,
        config_generation: observed.config_generation,
    };
    let ephemeral = pod
        .ephemeral_containers
        .iter()
        .zip(&observed.ephemeral_containers)
        .map(|(spec, obs)| decide(pod, spec, obs, &turn, now, out))
        .collect();
    (states, ephemeral)
}

/// The probe's name as the kubelet's `Unhealthy` events spell it.
fn probe_name(kind: ProbeKind) -> &'static str {
    match kind {
        ProbeKind::Startup => "Startup",
        ProbeKind::Liveness => "Liveness",
        ProbeKind::Readiness => "Readiness",
    }
}

/// The regular containers, once the pod is initialized. A first start waits while an
/// earlier container's postStart hook runs (the kubelet starts them in order, each
/// after the previous one's hook returned).
fn regular(
    pod: &PodFacts,
    observed: &PodObserved,
    now: DateTime<Utc>,
    out: &mut Decision,
) -> Vec<k8s_openapi::api::core::v1::ContainerState> {
    let mut hold = false;
    let mut states = Vec::new();
    for (spec, obs) in pod.containers.iter().zip(&observed.containers) {
        let turn = Turn {
            policy: pod.restart_policy,
            hold_first_start: hold,
            image_generation: observed.image_generation,
            config_generation: observed.config_generation,
        };
        states.push(decide(pod, spec, obs, &turn, now, out));
        hold |= matches!(obs.instance, Instance::Running { .. })
            && spec.post_start.is_some()
            && !matches!(obs.post_start, HookProgress::Ended { .. });
    }
    states
}

/// The order the pod's containers stop under, if they stop: the worker's, else one the
/// pod's own state implies (deadline, failed init, completed regular containers).
fn stop_order(
    pod: &PodFacts,
    observed: &PodObserved,
    init: &InitProgress,
    now: DateTime<Utc>,
    out: &mut Decision,
) -> Option<(TerminationOrder, StopCause)> {
    if let Some(order) = observed.terminating {
        return Some((order, StopCause::Ordered));
    }
    if let Some((at, message, grace)) = &observed.evicted {
        if observed.phase != Some(phase::PodPhase::Failed) {
            out.event(true, "Evicted", "", message.clone());
        }
        let order = TerminationOrder {
            since: *at,
            grace: *grace,
        };
        return Some((order, StopCause::Evicted));
    }
    let order = |since| TerminationOrder {
        since,
        grace: pod.grace,
    };
    if let (Some(deadline), Some(start)) = (pod.active_deadline, observed.start_time) {
        let at = start + deadline;
        if now >= at {
            if observed.phase != Some(phase::PodPhase::Failed) {
                out.event(true, "DeadlineExceeded", "", DEADLINE_MESSAGE.to_string());
            }
            return Some((order(at), StopCause::Deadline));
        }
        out.wake(at);
    }
    if let InitProgress::Failed { at, .. } = init {
        return Some((order(*at), StopCause::InitFailed));
    }
    if *init == InitProgress::Done {
        return completed_at(pod, observed).map(|at| (order(at), StopCause::Completed));
    }
    None
}

/// When the last regular container finished for good, if all did (none restarts).
fn completed_at(pod: &PodFacts, observed: &PodObserved) -> Option<DateTime<Utc>> {
    let mut last = None;
    for (spec, obs) in pod.containers.iter().zip(&observed.containers) {
        let Instance::Exited { termination, .. } = &obs.instance else {
            return None;
        };
        if pod.restart_policy.should_restart(termination.exit_code)
            || container::stopped_for_change(spec, obs)
        {
            return None;
        }
        last = last.max(Some(termination.finished_at));
    }
    last
}

use super::phase;
