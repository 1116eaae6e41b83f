//! Which attempt's log a `containerLogs` request reads, or why there is none, in the
//! kubelet's words (its `validateContainerLogStatus`): `kubectl logs` of a container
//! still waiting says why it waits ("is waiting to start: ContainerCreating") instead of
//! a bare not-found, and `--previous` of a container that never terminated says so.

use k8s_openapi::api::core::v1::ContainerStatus;

/// The log to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogAttempt {
    /// The current attempt (running, or the last one that terminated).
    Current,
    /// The attempt before it (`previous=true`, or the last terminated one when the
    /// next has not started).
    Previous,
}

/// Why a container has no log to show, in the kubelet's words (served as 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoLog {
    #[error("container \"{container}\" in pod \"{pod}\" is waiting to start{why}")]
    WaitingToStart {
        pod: String,
        container: String,
        /// ": <reason>", or " - no logs yet" without one.
        why: String,
    },
    #[error("container \"{container}\" in pod \"{pod}\" is terminated")]
    Terminated { pod: String, container: String },
    #[error("previous terminated container \"{container}\" in pod \"{pod}\" not found")]
    NoPrevious { pod: String, container: String },
}

/// The kubelet's answer for `container` of `pod`. `status` is the container's status,
/// `None` when it has none yet.
pub fn log_attempt(
    status: Option<&ContainerStatus>,
    pod: &str,
    container: &str,
    previous: bool,
) -> Result<LogAttempt, NoLog> {
    let waiting_to_start = |why: &str| NoLog::WaitingToStart {
        pod: pod.to_string(),
        container: container.to_string(),
        why: why.to_string(),
    };
    let terminated = || NoLog::Terminated {
        pod: pod.to_string(),
        container: container.to_string(),
    };
    let Some(status) = status else {
        return Err(waiting_to_start(" - no logs yet"));
    };
    let state = status.state.clone().unwrap_or_default();
    let last_terminated = status
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref());
    let has_id = |t: &k8s_openapi::api::core::v1::ContainerStateTerminated| {
        t.container_id.as_deref().is_some_and(|id| !id.is_empty())
    };
    if previous {
        return match last_terminated {
            Some(t) if has_id(t) => Ok(LogAttempt::Previous),
            _ => Err(NoLog::NoPrevious {
                pod: pod.to_string(),
                container: container.to_string(),
            }),
        };
    }
    if state.running.is_some() {
        return Ok(LogAttempt::Current);
    }
    if let Some(t) = &state.terminated {
        if has_id(t) {
            return Ok(LogAttempt::Current);
        }
        return match last_terminated {
            Some(last) if has_id(last) => Ok(LogAttempt::Previous),
            _ => Err(terminated()),
        };
    }
    if let Some(last) = last_terminated {
        return if has_id(last) {
            Ok(LogAttempt::Previous)
        } else {
            Err(terminated())
        };
    }
    match state.waiting.as_ref() {
        Some(w) => Err(match w.reason.as_deref().unwrap_or_default() {
            "ErrImagePull" => waiting_to_start(": image can't be pulled"),
            "ImagePullBackOff" => waiting_to_start(": trying and failing to pull image"),
            reason => waiting_to_start(&format!(": {reason}")),
        }),
        None => Err(waiting_to_start(" - no logs yet")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    };

    fn status(state: ContainerState, last: Option<ContainerStateTerminated>) -> ContainerStatus {
        ContainerStatus {
            name: "app".into(),
            state: Some(state),
            last_state: last.map(|t| ContainerState {
                terminated: Some(t),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn waiting(reason: &str) -> ContainerState {
        ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn terminated(id: &str) -> ContainerStateTerminated {
        ContainerStateTerminated {
            container_id: Some(id.into()),
            exit_code: 1,
            ..Default::default()
        }
    }

    fn running() -> ContainerState {
        ContainerState {
            running: Some(ContainerStateRunning::default()),
            ..Default::default()
        }
    }

    #[test]
    fn a_waiting_container_says_why_in_the_kubelets_words() {
        let ask = |s: &ContainerStatus| {
            log_attempt(Some(s), "web", "app", false).map_err(|e| e.to_string())
        };
        assert_eq!(
            ask(&status(waiting("ContainerCreating"), None)),
            Err("container \"app\" in pod \"web\" is waiting to start: ContainerCreating".into())
        );
        assert_eq!(
            ask(&status(waiting("ErrImagePull"), None)),
            Err(
                "container \"app\" in pod \"web\" is waiting to start: image can't be pulled"
                    .into()
            )
        );
        assert_eq!(
            ask(&status(waiting("ImagePullBackOff"), None)),
            Err("container \"app\" in pod \"web\" is waiting to start: trying and failing to pull image".into())
        );
        assert_eq!(
            log_attempt(None, "web", "app", false).map_err(|e| e.to_string()),
            Err("container \"app\" in pod \"web\" is waiting to start - no logs yet".into())
        );
    }

    #[test]
    fn running_terminated_and_previous_attempts() {
        let ask = |s: &ContainerStatus, previous| {
            log_attempt(Some(s), "web", "app", previous).map_err(|e| e.to_string())
        };
        assert_eq!(
            ask(&status(running(), None), false),
            Ok(LogAttempt::Current)
        );
        let restarted = status(running(), Some(terminated("podhost://a-0")));
        assert_eq!(ask(&restarted, true), Ok(LogAttempt::Previous));
        assert_eq!(
            ask(&status(running(), None), true),
            Err("previous terminated container \"app\" in pod \"web\" not found".into())
        );
        // In back-off after a crash: the last terminated attempt's log.
        let backing_off = status(
            waiting("CrashLoopBackOff"),
            Some(terminated("podhost://a-0")),
        );
        assert_eq!(ask(&backing_off, false), Ok(LogAttempt::Previous));
        let done = ContainerState {
            terminated: Some(terminated("podhost://a-1")),
            ..Default::default()
        };
        assert_eq!(ask(&status(done, None), false), Ok(LogAttempt::Current));
        let never_started = ContainerState {
            terminated: Some(terminated("")),
            ..Default::default()
        };
        assert_eq!(
            ask(&status(never_started, None), false),
            Err("container \"app\" in pod \"web\" is terminated".into())
        );
    }
}
