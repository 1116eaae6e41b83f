//! Pods and containers by state, counted from the pods' published status at scrape
//! time (the kubelet counts its runtime's view; podhost's status is that view).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

/// What the gauges `kubelet_running_pods`, `kubelet_running_containers` and
/// `podhost_pods` show.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodCounts {
    /// Pods with at least one running container (the kubelet: a ready sandbox).
    pub running_pods: i64,
    /// Containers by the kubelet's `container_state`: `running`, `exited` (the last
    /// instance ended: terminated, or waiting to restart after it), `created` (waiting
    /// for its first start).
    pub containers: BTreeMap<&'static str, i64>,
    /// Pods by `status.phase`.
    pub phases: BTreeMap<&'static str, i64>,
}

const PHASES: [&str; 5] = ["Pending", "Running", "Succeeded", "Failed", "Unknown"];
const CONTAINER_STATES: [&str; 3] = ["created", "running", "exited"];

impl PodCounts {
    /// Counts `pods`; every phase and state is present, with 0 when none is in it.
    pub fn of<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> Self {
        let mut counts = Self {
            running_pods: 0,
            containers: CONTAINER_STATES.iter().map(|s| (*s, 0)).collect(),
            phases: PHASES.iter().map(|p| (*p, 0)).collect(),
        };
        for pod in pods {
            let Some(status) = pod.status.as_ref() else {
                *counts.phases.entry("Pending").or_default() += 1;
                continue;
            };
            let phase = status.phase.as_deref().unwrap_or("Pending");
            let phase = PHASES.iter().find(|p| **p == phase).unwrap_or(&"Unknown");
            *counts.phases.entry(phase).or_default() += 1;
            let containers = status
                .container_statuses
                .iter()
                .chain(&status.init_container_statuses)
                .chain(&status.ephemeral_container_statuses)
                .flatten();
            let mut any_running = false;
            for c in containers {
                let state = container_state(c);
                any_running |= state == Some("running");
                if let Some(state) = state {
                    *counts.containers.entry(state).or_default() += 1;
                }
            }
            counts.running_pods += i64::from(any_running);
        }
        counts
    }
}

fn container_state(c: &ContainerStatus) -> Option<&'static str> {
    let state = c.state.as_ref()?;
    if state.running.is_some() {
        Some("running")
    } else if state.terminated.is_some()
        || c.last_state
            .as_ref()
            .is_some_and(|l| l.terminated.is_some())
    {
        Some("exited")
    } else if state.waiting.is_some() {
        Some("created")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn pods_and_containers_are_counted_by_state() {
        let running = pod(serde_json::json!({"status": {"phase": "Running",
            "containerStatuses": [
                {"name": "a", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
                 "state": {"running": {}}},
                {"name": "b", "image": "i", "imageID": "", "ready": false, "restartCount": 2,
                 "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                 "lastState": {"terminated": {"exitCode": 1}}}]}}));
        let pending = pod(serde_json::json!({"status": {"phase": "Pending",
            "containerStatuses": [
                {"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                 "state": {"waiting": {"reason": "ContainerCreating"}}}]}}));
        let done = pod(serde_json::json!({"status": {"phase": "Succeeded",
            "containerStatuses": [
                {"name": "d", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                 "state": {"terminated": {"exitCode": 0}}}]}}));
        let counts = PodCounts::of([&running, &pending, &done, &Pod::default()]);
        assert_eq!(counts.running_pods, 1);
        assert_eq!(counts.containers["running"], 1);
        assert_eq!(counts.containers["exited"], 2);
        assert_eq!(counts.containers["created"], 1);
        assert_eq!(counts.phases["Running"], 1);
        assert_eq!(counts.phases["Pending"], 2);
        assert_eq!(counts.phases["Succeeded"], 1);
        assert_eq!(counts.phases["Failed"], 0);
    }
}
