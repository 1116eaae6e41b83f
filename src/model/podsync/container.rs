//! One container's decision while the pod runs: start, restart with CrashLoopBackOff,
//! retry a blocked start, or leave it be.

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::ContainerState;

use super::super::backoff::Backoff;
use super::action::{Action, Decision};
use super::observed::{BlockKind, ContainerObserved, Instance, StartBlock, Termination};
use super::status::{running, terminated_state, waiting};
use super::{ContainerFacts, PodFacts};

/// How long `ErrImagePull` shows before `ImagePullBackOff` (at most the back-off itself).
pub const ERR_IMAGE_PULL_SHOWN: Duration = Duration::from_secs(1);

/// Decides for `obs` while the pod is not terminating; pushes its state to `out`.
pub(super) fn decide(
    pod: &PodFacts,
    spec: &ContainerFacts,
    obs: &ContainerObserved,
    image_generation: u64,
    now: DateTime<Utc>,
    out: &mut Decision,
) {
    let state = match &obs.instance {
        Instance::None => {
            start(spec, obs, obs.backoff.clone(), out);
            waiting("ContainerCreating", None)
        }
        Instance::Starting { .. } => waiting("ContainerCreating", None),
        Instance::Running { started_at } => running(*started_at),
        Instance::Blocked(block) => blocked(pod, spec, obs, block, image_generation, now, out),
        Instance::Exited {
            termination,
            released,
        } => exited(pod, spec, obs, termination, *released, now, out),
    };
    out.container_states.push(state);
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
        backoff_after,
    });
}

fn blocked(
    pod: &PodFacts,
    spec: &ContainerFacts,
    obs: &ContainerObserved,
    block: &StartBlock,
    image_generation: u64,
    now: DateTime<Utc>,
    out: &mut Decision,
) -> ContainerState {
    let delay = Backoff::retry_delay(&pod.backoff, block.failures);
    let retry_at = block.since + delay;
    if now >= retry_at || block.image_generation != image_generation {
        start(spec, obs, obs.backoff.clone(), out);
        return waiting("ContainerCreating", None);
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
            if obs.shown_waiting.as_deref() != Some("ImagePullBackOff") {
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

fn exited(
    pod: &PodFacts,
    spec: &ContainerFacts,
    obs: &ContainerObserved,
    termination: &Termination,
    released: bool,
    now: DateTime<Utc>,
    out: &mut Decision,
) -> ContainerState {
    let shown = terminated_state(termination);
    if !pod.restart_policy.should_restart(termination.exit_code) {
        return shown;
    }
    let (delay, backoff_after) = obs.backoff.after_exit(&pod.backoff, termination.ran_for());
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
        if obs.shown_waiting.as_deref() != Some("CrashLoopBackOff") {
            out.event(true, "BackOff", &spec.name, message.clone());
        }
        return waiting("CrashLoopBackOff", Some(message));
    }
    // The cgroup and rootfs must be released before a new instance takes them.
    if released {
        start(spec, obs, backoff_after, out);
    }
    shown
}
