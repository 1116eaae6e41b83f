//! Phase and conditions from container statuses (the kubelet's getPhase and conditions).

use k8s_openapi::api::core::v1::{ContainerStatus, PodCondition, PodStatus};

use crate::model::phase::{ContainerSummary, PodPhase, pod_phase};
use crate::model::restart::RestartPolicy;

fn summary(c: &ContainerStatus) -> ContainerSummary {
    let state = c.state.as_ref();
    if state.and_then(|s| s.running.as_ref()).is_some() {
        return ContainerSummary::Running;
    }
    if let Some(t) = state.and_then(|s| s.terminated.as_ref()) {
        return ContainerSummary::Terminated {
            exit_code: t.exit_code,
        };
    }
    let last_exit = c
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .map(|t| t.exit_code);
    ContainerSummary::Waiting { last_exit }
}

/// Recomputes `phase` and the four standard conditions; transition times move only when a
/// condition's status changes. A terminal phase never goes back (as the kubelet).
pub fn recompute(status: &mut PodStatus, policy: RestartPolicy, container_count: usize) {
    let statuses = status.container_statuses.clone().unwrap_or_default();
    let mut summaries: Vec<ContainerSummary> = statuses.iter().map(summary).collect();
    while summaries.len() < container_count {
        summaries.push(ContainerSummary::Waiting { last_exit: None });
    }
    let new_phase = pod_phase(policy, &summaries);
    let old = status.phase.as_deref();
    let terminal = matches!(old, Some("Succeeded") | Some("Failed"));
    if !terminal {
        status.phase = Some(new_phase.as_str().to_string());
    }
    let all_ready = container_count > 0
        && statuses.len() == container_count
        && statuses.iter().all(|c| c.ready);
    let now = super::store::k8s_time(chrono::Utc::now());
    let mut conds = status.conditions.clone().unwrap_or_default();
    let running_or_done = new_phase != PodPhase::Pending || status.start_time.is_some();
    for (kind, ok) in [
        ("PodScheduled", true),
        ("Initialized", true),
        ("ContainersReady", all_ready),
        ("Ready", all_ready),
        ("PodReadyToStartContainers", running_or_done),
    ] {
        let value = if ok { "True" } else { "False" };
        match conds.iter_mut().find(|c| c.type_ == kind) {
            Some(c) if c.status == value => {}
            Some(c) => {
                c.status = value.to_string();
                c.last_transition_time = Some(now.clone());
            }
            None => conds.push(PodCondition {
                type_: kind.to_string(),
                status: value.to_string(),
                last_transition_time: Some(now.clone()),
                ..Default::default()
            }),
        }
    }
    status.conditions = Some(conds);
}
