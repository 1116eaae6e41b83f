//! One container's decision while the pod runs: start, restart with CrashLoopBackOff,
//! retry a blocked start, run its postStart hook, kill it when a probe or its postStart
//! failed, or leave it be.

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::ContainerState;

use super::super::backoff::Backoff;
use super::super::restart::RestartPolicy;
use super::action::{Action, Decision};
use super::health::{kill_cause, post_start_done};
use super::observed::{
    BlockKind, ContainerObserved, HookProgress, Instance, StartBlock, Termination,
};
use super::status::{creating, running, starting, terminated_state, waiting};
use super::stop::{SignalGate, stop_instance};
use super::{ContainerFacts, ContainerKind, PodFacts};

/// How long `ErrImagePull` shows before `ImagePullBackOff` (at most the back-off itself).
pub const ERR_IMAGE_PULL_SHOWN: Duration = Duration::from_secs(1);

/// How one container is decided on while the pod is not terminating.
pub(super) struct Turn {
    pub policy: RestartPolicy,
    /// A first start must wait (an earlier container's postStart hook still runs).
    pub hold_first_start: bool,
    pub image_generation: u64,
    pub config_generation: u64,
}

/// Decides for `obs` while the pod is not terminating, and returns its state.
pub(super) fn decide(
    pod: &PodFacts,
    spec: &ContainerFacts,
    obs: &ContainerObserved,
    turn: &Turn,
    now: DateTime<Utc>,
    out: &mut Decision,
) -> ContainerState {
    match &obs.instance {
        Instance::None if turn.hold_first_start => waiting(creating(pod), None),
        Instance::None => {
            start(spec, obs, obs.backoff.clone(), out);
            waiting(creating(pod), None)
        }
        // Replacing an instance whose image changed: shown running until the new one is.
        Instance::Starting { .. } => match &obs.replacing {
            Some(replaced) => running(replaced.started_at),
            None => starting(obs, creating(pod)),
        },
        Instance::Running { started_at } => running_instance(pod, spec, obs, *started_at, now, out),
        Instance::Blocked(block) => blocked(pod, spec, obs, block, turn, now, out),
        Instance::Exited {
            termination,
            released,
        } => exited(
            pod,
            spec,
            obs,
            turn.policy,
            termination,
            *released,
            now,
            out,
        ),
    }
}

/// A running instance: its postStart hook first; killed when the hook or a probe failed.
fn running_instance(
    pod: &PodFacts,
    spec: &ContainerFacts,
    obs: &ContainerObserved,
    started_at: DateTime<Utc>,
    now: DateTime<Utc>,
    out: &mut Decision,
) -> ContainerState {
    if let Some(cause) = kill_cause(pod, spec, obs) {
        if obs.stop.began_at.is_none()
            && let Some((reason, message)) = &cause.warning
        {
            out.event(true, reason, &spec.name, message.clone());
        }
        stop_instance(
            spec,
            obs,
            cause.grace,
            &cause.killing,
            SignalGate::Now,
            now,
            out,
        );
        return match &obs.post_start {
            HookProgress::Ended {
                failure: Some(msg), ..
            } => waiting("PostStartHookError", Some(msg.clone())),
            _ => running(started_at),
        };
    }
    if spec.post_start.is_some() && obs.post_start == HookProgress::NotRun {
        out.actions.push(Action::RunPostStart {
            container: spec.name.clone(),
        });
    }
    if post_start_done(spec, obs) {
        running(started_at)
    } else {
        waiting("ContainerCreating", None)
    }
}

/// The spec names another image than the one the container's instance was made from, or
/// a resize restarts it (`resizePolicy: RestartContainer`): its definition changed. Only
/// regular containers and sidecars act on it, as the kubelet's; a running init container
/// finishes as it is.
pub(super) fn definition_changed(spec: &ContainerFacts, obs: &ContainerObserved) -> bool {
    matches!(spec.kind, ContainerKind::Regular | ContainerKind::Sidecar)
        && obs
            .started_image
            .as_deref()
            .is_some_and(|image| image != spec.image || spec.resources.restart_pending)
}

/// The instance was stopped because the container's definition changed: it starts again
/// whatever the restart policy, and counts as running for the pod's phase meanwhile (the
/// kubelet kills and starts it in one sync, so no phase of its ever sees it stopped).
pub(super) fn stopped_for_change(spec: &ContainerFacts, obs: &ContainerObserved) -> bool {
    definition_changed(spec, obs) && obs.stop.began_at.is_some()
}

fn start(
    spec: &ContainerFacts,
    obs: &ContainerObserved,
    backoff_after: Backoff,
    out: &mut Decision,
) {
    out.actions.push(Action::Start {
        container: spec.name.clone(),
        attempt: obs.next_attempt,
        image: spec.image.clone(),
        backoff_after,
    });
}

fn blocked(
    pod: &PodFacts,
    spec: &ContainerFacts,
    obs: &ContainerObserved,
    block: &StartBlock,
    turn: &Turn,
    now: DateTime<Utc>,
    out: &mut Decision,
) -> ContainerState {
    let delay = Backoff::retry_delay(&pod.backoff, block.failures);
    let retry_at = block.since + delay;
    // A new image in the spec is tried at once, as a newly loaded one is.
    // So is a configuration error once the pod's labels or annotations changed.
    let config_changed =
        block.kind == BlockKind::Config && block.config_generation != turn.config_generation;
    if now >= retry_at
        || block.image_generation != turn.image_generation
        || config_changed
        || definition_changed(spec, obs)
    {
        start(spec, obs, obs.backoff.clone(), out);
        return starting(obs, creating(pod));
    }
    out.wake(retry_at);
    match block.kind {
        BlockKind::Config => waiting("CreateContainerConfigError", Some(block.message.clone())),
        BlockKind::ImageNeverPull => waiting("ErrImageNeverPull", Some(block.message.clone())),
        BlockKind::Image => {
            let shown_until = block.since + ERR_IMAGE_PULL_SHOWN.min(delay);
            if now < shown_until {
                out.wake(shown_until);
                return waiting("ErrImagePull", Some(block.message.clone()));
            }
            if obs.shown_reason() != Some("ImagePullBackOff") {
                out.event(
                    false,
                    "BackOff",
                    &spec.name,
                    format!("Back-off pulling image \"{}\"", spec.image),
                );
            }
            waiting(
                "ImagePullBackOff",
                Some(format!(
                    "Back-off pulling image \"{}\": {}",
                    spec.image, block.message
                )),
            )
        }
    }
}

#[allow(clippy::too_many_arguments)] // one decision's inputs, each a different fact
fn exited(
    pod: &PodFacts,
    spec: &ContainerFacts,
    obs: &ContainerObserved,
    policy: RestartPolicy,
    termination: &Termination,
    released: bool,
    now: DateTime<Utc>,
    out: &mut Decision,
) -> ContainerState {
    let shown = terminated_state(termination);
    // A container stopped because its definition changed starts again whatever the
    // restart policy; one that ended by itself follows the policy. Either way a changed
    // definition starts from no back-off (the kubelet keys back-off by container hash).
    let changed = definition_changed(spec, obs);
    if !stopped_for_change(spec, obs) && !policy.should_restart(termination.exit_code) {
        return shown;
    }
    let backoff = if changed {
        Backoff::default()
    } else {
        obs.backoff.clone()
    };
    let (delay, backoff_after) = backoff.after_exit(&pod.backoff, termination.ran_for());
    let restart_at = termination.finished_at + delay;
    if now < restart_at {
        out.wake(restart_at);
        let message = format!(
            "back-off {}s restarting failed container={} pod={}_{}({})",
            delay.as_secs(),
            spec.name,
            pod.name,
            pod.namespace,
            pod.uid
        );
        if obs.shown_reason() != Some("CrashLoopBackOff") {
            out.event(true, "BackOff", &spec.name, message.clone());
        }
        return waiting("CrashLoopBackOff", Some(message));
    }
    // The cgroup and rootfs must be released before a new instance takes them.
    if released {
        start(spec, obs, backoff_after, out);
    }
    // Stopped for its new definition: shown running until the new instance runs, as the
    // kubelet publishes nothing between the kill and the start of one sync.
    if stopped_for_change(spec, obs) {
        return running(termination.started_at);
    }
    shown
}
