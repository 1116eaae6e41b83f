//! What the probe results and the postStart hook mean for a running instance: whether it
//! is started and ready, and whether it must be killed (kubelet-semantics §1, §4).

use std::time::Duration;

use super::observed::{ContainerObserved, HookProgress, Instance, ProbeResult};
use super::{ContainerFacts, PodFacts};

/// Why a running instance is killed, and how.
pub(super) struct KillCause {
    pub grace: Duration,
    /// The `Killing` event's message.
    pub killing: String,
    /// A warning recorded when the kill begins (reason, message).
    pub warning: Option<(&'static str, String)>,
}

/// The postStart hook returned successfully (or there is none).
pub(super) fn post_start_done(spec: &ContainerFacts, obs: &ContainerObserved) -> bool {
    !spec.post_start.is_some()
        || matches!(obs.post_start, HookProgress::Ended { failure: None, .. })
}

/// The instance runs, its postStart returned and its startup probe (if any) succeeded:
/// `status.started`, and what lets the next sidecar start.
pub(super) fn started(spec: &ContainerFacts, obs: &ContainerObserved) -> bool {
    let runs = match obs.instance {
        Instance::Running { .. } => true,
        // Being replaced for a changed definition: the instance that ran is what is
        // shown until its successor runs (see `ContainerObserved::replacing`).
        Instance::Starting { .. } => obs.replacing.is_some(),
        Instance::Exited { .. } => super::container::stopped_for_change(spec, obs),
        Instance::None | Instance::Blocked(_) => false,
    };
    runs && post_start_done(spec, obs)
        && (spec.startup_probe.is_none() || obs.health.startup == ProbeResult::Success)
}

/// `status.ready` of a regular container or sidecar: started, and its readiness probe
/// (if any) succeeded.
pub(super) fn ready(spec: &ContainerFacts, obs: &ContainerObserved) -> bool {
    started(spec, obs) && (!spec.readiness_probe || obs.health.readiness == ProbeResult::Success)
}

/// Why the running instance must be killed, if it must: its definition changed (first, as
/// in the kubelet's `computePodActions`), a failed postStart hook, a failed startup probe,
/// or a failed liveness probe once started.
pub(super) fn kill_cause(
    pod: &PodFacts,
    spec: &ContainerFacts,
    obs: &ContainerObserved,
) -> Option<KillCause> {
    let name = &spec.name;
    if super::container::definition_changed(spec, obs) {
        return Some(KillCause {
            grace: pod.grace,
            killing: format!("Container {name} definition changed, will be restarted"),
            warning: None,
        });
    }
    if let HookProgress::Ended {
        failure: Some(msg), ..
    } = &obs.post_start
    {
        return Some(KillCause {
            grace: pod.grace,
            killing: "FailedPostStartHook".to_string(),
            warning: Some((
                "FailedPostStartHook",
                format!("PostStartHook failed: {msg}"),
            )),
        });
    }
    let probe_kill = |probe: &str, facts: super::ProbeFacts| KillCause {
        grace: facts.termination_grace.unwrap_or(pod.grace),
        killing: format!("Container {name} failed {probe} probe, will be restarted"),
        warning: None,
    };
    if let Some(facts) = spec.startup_probe
        && obs.health.startup == ProbeResult::Failure
    {
        return Some(probe_kill("startup", facts));
    }
    if let Some(facts) = spec.liveness_probe
        && obs.health.liveness == ProbeResult::Failure
        && started(spec, obs)
    {
        return Some(probe_kill("liveness", facts));
    }
    None
}
