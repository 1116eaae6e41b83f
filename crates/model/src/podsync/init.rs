//! Init containers and sidecars while the pod runs (the kubelet's
//! `computeInitContainerActions`): init containers run one by one to completion; a
//! sidecar (`restartPolicy: Always`) is started in its turn, and the next init container
//! waits until it is started (running, postStart returned, startupProbe passed); sidecars
//! are restarted whenever they exit. The pod is initialized once every init container
//! completed and every sidecar was started.

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::ContainerState;

use super::action::Decision;
use super::container::{Turn, decide};
use super::health::started;
use super::observed::{ContainerObserved, Instance, Termination};
use super::status::{terminated_state, waiting};
use super::{ContainerFacts, ContainerKind, PodFacts, PodObserved};
use crate::restart::RestartPolicy;

/// Where the init sequence stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum InitProgress {
    /// Every init container completed and every sidecar was started.
    Done,
    /// Still initializing.
    Running,
    /// An init container failed and the pod's restart policy is Never: the pod failed.
    Failed {
        container: String,
        at: DateTime<Utc>,
    },
}

/// Where the init sequence stands, from what was observed (no decision).
pub(super) fn progress(pod: &PodFacts, observed: &PodObserved) -> InitProgress {
    for (spec, obs) in pod.init_containers.iter().zip(&observed.init_containers) {
        match spec.kind {
            ContainerKind::Sidecar if obs.started_once || started(spec, obs) => {}
            ContainerKind::Init if completed(obs) => {}
            ContainerKind::Init => {
                if let Some(t) = failed(obs)
                    && pod.restart_policy == RestartPolicy::Never
                {
                    return InitProgress::Failed {
                        container: spec.name.clone(),
                        at: t.finished_at,
                    };
                }
                return InitProgress::Running;
            }
            ContainerKind::Sidecar | ContainerKind::Regular | ContainerKind::Ephemeral => {
                return InitProgress::Running;
            }
        }
    }
    InitProgress::Done
}

/// The instance exited with 0 (an init container's success).
fn completed(obs: &ContainerObserved) -> bool {
    matches!(&obs.instance, Instance::Exited { termination, .. }
        if termination.exit_code == 0 && termination.reason.as_deref() != Some("OOMKilled"))
}

/// The instance exited and failed (non-zero, or OOMKilled, as `isInitContainerFailed`).
fn failed(obs: &ContainerObserved) -> Option<&Termination> {
    match &obs.instance {
        Instance::Exited { termination, .. } if !completed(obs) => Some(termination),
        _ => None,
    }
}

/// Decides for the init containers while the pod runs; returns their states.
pub(super) fn decide_init(
    pod: &PodFacts,
    observed: &PodObserved,
    now: DateTime<Utc>,
    out: &mut Decision,
) -> Vec<ContainerState> {
    let mut states = Vec::new();
    // Once one is not through, the ones after it wait for their turn.
    let mut blocked = false;
    for (spec, obs) in pod.init_containers.iter().zip(&observed.init_containers) {
        let turn = Turn {
            policy: pod.restart_policy_of(spec.kind),
            hold_first_start: false,
            image_generation: observed.image_generation,
            config_generation: observed.config_generation,
        };
        let state = match spec.kind {
            // A sidecar already started once is kept running whatever comes after it.
            ContainerKind::Sidecar if obs.started_once => decide(pod, spec, obs, &turn, now, out),
            _ if blocked => not_yet(obs),
            ContainerKind::Init if completed(obs) => decide(pod, spec, obs, &turn, now, out),
            ContainerKind::Sidecar
            | ContainerKind::Init
            | ContainerKind::Regular
            | ContainerKind::Ephemeral => {
                let state = decide(pod, spec, obs, &turn, now, out);
                blocked = !through(spec, obs);
                state
            }
        };
        states.push(state);
    }
    states
}

/// The container no longer holds up the next one.
fn through(spec: &ContainerFacts, obs: &ContainerObserved) -> bool {
    match spec.kind {
        ContainerKind::Sidecar => obs.started_once || started(spec, obs),
        ContainerKind::Init | ContainerKind::Regular | ContainerKind::Ephemeral => completed(obs),
    }
}

/// The state of an init container whose turn has not come: its last end, else waiting.
fn not_yet(obs: &ContainerObserved) -> ContainerState {
    match &obs.instance {
        Instance::Exited { termination, .. } => terminated_state(termination),
        _ => waiting("PodInitializing", None),
    }
}
