//! Pod phase from its containers' states (kubelet `getPhase`, regular containers only).

use super::restart::RestartPolicy;

/// What the phase computation needs to know about one container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerSummary {
    Running,
    /// Not running; `last_exit` is the exit code of the previous instance if there was one.
    Waiting {
        last_exit: Option<i32>,
    },
    Terminated {
        exit_code: i32,
    },
}

/// `status.phase`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
}

impl PodPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Running => "Running",
            Self::Succeeded => "Succeeded",
            Self::Failed => "Failed",
        }
    }
}

/// Computes the phase as the kubelet does for a pod without init containers.
pub fn pod_phase(policy: RestartPolicy, containers: &[ContainerSummary]) -> PodPhase {
    let (mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0);
    for c in containers {
        match *c {
            ContainerSummary::Running => running += 1,
            ContainerSummary::Terminated { exit_code } => {
                stopped += 1;
                if exit_code == 0 {
                    succeeded += 1;
                }
            }
            ContainerSummary::Waiting {
                last_exit: Some(code),
            } => {
                stopped += 1;
                if code == 0 {
                    succeeded += 1;
                }
            }
            ContainerSummary::Waiting { last_exit: None } => waiting += 1,
        }
    }
    if waiting > 0 || containers.is_empty() {
        return PodPhase::Pending;
    }
    if running > 0 {
        return PodPhase::Running;
    }
    debug_assert_eq!(stopped, containers.len());
    match policy {
        RestartPolicy::Always => PodPhase::Running,
        _ if succeeded == stopped => PodPhase::Succeeded,
        RestartPolicy::Never => PodPhase::Failed,
        RestartPolicy::OnFailure => PodPhase::Running,
    }
}

#[cfg(test)]
mod tests {
    use super::ContainerSummary::*;
    use super::*;

    #[test]
    fn phases() {
        use RestartPolicy::*;
        assert_eq!(
            pod_phase(Always, &[Waiting { last_exit: None }]),
            PodPhase::Pending
        );
        assert_eq!(
            pod_phase(Always, &[Running, Waiting { last_exit: None }]),
            PodPhase::Pending
        );
        assert_eq!(pod_phase(Never, &[Running]), PodPhase::Running);
        assert_eq!(
            pod_phase(Always, &[Terminated { exit_code: 0 }]),
            PodPhase::Running
        );
        assert_eq!(
            pod_phase(Never, &[Terminated { exit_code: 0 }]),
            PodPhase::Succeeded
        );
        assert_eq!(
            pod_phase(OnFailure, &[Terminated { exit_code: 0 }]),
            PodPhase::Succeeded
        );
        assert_eq!(
            pod_phase(
                Never,
                &[Terminated { exit_code: 0 }, Terminated { exit_code: 2 }]
            ),
            PodPhase::Failed
        );
        assert_eq!(
            pod_phase(OnFailure, &[Waiting { last_exit: Some(1) }]),
            PodPhase::Running
        );
    }
}
