//! The final status of a pod of the API server once its worker has released it, as the
//! kubelet's status manager `TerminatePod` makes it: every container status not
//! terminated becomes terminated (`ContainerStatusUnknown`, 137), and the phase is
//! terminal — `getPhase` with `podIsTerminal`: Succeeded when every container exited
//! 0, else Failed. Static pods are left alone there (kubernetes#116484), as here.

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateTerminated, ContainerStatus, PodStatus,
};

/// The kubelet's reason for a container that was not terminated when its pod was.
pub const REASON_UNKNOWN: &str = "ContainerStatusUnknown";
/// The kubelet's message with it.
pub const MESSAGE_UNKNOWN: &str = "The container could not be located when the pod was terminated";

/// Succeeded or Failed: the phases a pod never leaves.
pub fn is_terminal(status: &PodStatus) -> bool {
    matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"))
}

/// `status` made final (see the module's doc).
pub fn terminal_status(mut status: PodStatus) -> PodStatus {
    for list in [
        &mut status.init_container_statuses,
        &mut status.container_statuses,
        &mut status.ephemeral_container_statuses,
    ]
    .into_iter()
    .flatten()
    {
        list.iter_mut().for_each(mark_terminated);
    }
    if !is_terminal(&status) {
        let regular = status.container_statuses.as_deref().unwrap_or_default();
        let all_succeeded = !regular.is_empty()
            && regular.iter().all(|c| {
                c.state
                    .as_ref()
                    .and_then(|s| s.terminated.as_ref())
                    .is_some_and(|t| t.exit_code == 0)
            });
        status.phase = Some(if all_succeeded { "Succeeded" } else { "Failed" }.to_string());
    }
    status
}

fn mark_terminated(c: &mut ContainerStatus) {
    let terminated = c.state.as_ref().is_some_and(|s| s.terminated.is_some());
    if terminated {
        return;
    }
    // Only the state, as the kubelet (readiness and lastState stay as they were).
    c.state = Some(ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: 137,
            reason: Some(REASON_UNKNOWN.to_string()),
            message: Some(MESSAGE_UNKNOWN.to_string()),
            ..ContainerStateTerminated::default()
        }),
        ..ContainerState::default()
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerStateRunning, ContainerStateWaiting};

    fn exited(name: &str, code: i32) -> ContainerStatus {
        ContainerStatus {
            name: name.into(),
            state: Some(ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: code,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn status(phase: &str, containers: Vec<ContainerStatus>) -> PodStatus {
        PodStatus {
            phase: Some(phase.into()),
            container_statuses: Some(containers),
            ..Default::default()
        }
    }

    #[test]
    fn a_deleted_pod_whose_containers_exited_0_succeeded_otherwise_failed() {
        let s = terminal_status(status("Running", vec![exited("a", 0), exited("b", 0)]));
        assert_eq!(s.phase.as_deref(), Some("Succeeded"));
        let s = terminal_status(status("Running", vec![exited("a", 0), exited("b", 137)]));
        assert_eq!(s.phase.as_deref(), Some("Failed"));
    }

    #[test]
    fn a_terminal_phase_stays() {
        let s = terminal_status(status("Succeeded", vec![exited("a", 1)]));
        assert_eq!(s.phase.as_deref(), Some("Succeeded"));
    }

    #[test]
    fn containers_not_terminated_become_unknown_137_and_the_pod_fails() {
        let waiting = ContainerStatus {
            name: "w".into(),
            state: Some(ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some("ContainerCreating".into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let running = ContainerStatus {
            name: "r".into(),
            ready: true,
            state: Some(ContainerState {
                running: Some(ContainerStateRunning::default()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let s = terminal_status(status("Pending", vec![waiting, running]));
        assert_eq!(s.phase.as_deref(), Some("Failed"));
        for c in s.container_statuses.unwrap() {
            let t = c.state.unwrap().terminated.unwrap();
            assert_eq!(
                (t.exit_code, t.reason.as_deref()),
                (137, Some(REASON_UNKNOWN))
            );
        }
    }

    #[test]
    fn a_pod_without_container_statuses_fails() {
        let s = terminal_status(PodStatus {
            phase: Some("Pending".into()),
            ..Default::default()
        });
        assert_eq!(s.phase.as_deref(), Some("Failed"));
    }
}
