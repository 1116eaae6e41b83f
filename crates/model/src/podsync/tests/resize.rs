//! In-place resize as the core shows it: each container's `resources` (applied) and
//! `allocatedResources`, the pod's `observedGeneration`, the resize conditions while a
//! resize is pending or in progress (gone once done), and a `RestartContainer` resize
//! restarting the container like a changed definition.

use super::*;
use crate::resize::{Allocation, ResizeCondition};
use RestartPolicy::Always;

fn allocation(cpu: &str, memory: &str) -> Allocation {
    let both = || {
        [("cpu", cpu), ("memory", memory)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    Allocation {
        requests: both(),
        limits: both(),
    }
}

/// `app` with 100m/64Mi allocated and applied, at generation 1.
fn sized() -> PodFacts {
    let mut pod = one(Always);
    pod.generation = Some(1);
    pod.containers[0].resources =
        crate::resize::ContainerAllocation::started_as(allocation("100m", "64Mi"));
    pod
}

fn running(pod: &PodFacts) -> PodObserved {
    let mut obs = observed(pod);
    step(pod, &mut obs, t(0.0));
    obs.containers[0].on_started(0, t(0.0), "podhost://a0".into());
    obs
}

fn resize_conditions(d: &Decision) -> Vec<(String, Option<String>, Option<i64>)> {
    d.status
        .conditions
        .iter()
        .filter(|c| c.type_.starts_with("PodResize"))
        .map(|c| (c.type_.clone(), c.reason.clone(), c.observed_generation))
        .collect()
}

#[test]
fn the_status_shows_the_applied_resources_the_allocated_requests_and_the_generation() {
    let pod = sized();
    let mut obs = running(&pod);
    let d = step(&pod, &mut obs, t(1.0));
    let s = &d.status.container_statuses[0];
    let resources = s.resources.as_ref().expect("resources");
    assert_eq!(resources.limits.as_ref().unwrap()["memory"].0, "64Mi");
    assert_eq!(s.allocated_resources.as_ref().unwrap()["cpu"].0, "100m");
    assert_eq!(d.status.observed_generation, Some(1));
    assert!(resize_conditions(&d).is_empty());
}

#[test]
fn a_resize_in_progress_shows_its_condition_until_applied_then_none() {
    let mut pod = sized();
    let mut obs = running(&pod);
    // Allocated, not yet applied (the memory limit was below usage).
    pod.generation = Some(2);
    pod.containers[0].resources.allocated = allocation("200m", "32Mi");
    obs.resize = Some(ResizeCondition::in_progress(
        Some("below usage".into()),
        Some(2),
    ));
    let d = step(&pod, &mut obs, t(2.0));
    assert_eq!(
        resize_conditions(&d),
        [(
            "PodResizeInProgress".to_string(),
            Some("Error".to_string()),
            Some(2)
        )]
    );
    let s = &d.status.container_statuses[0];
    assert_eq!(s.allocated_resources.as_ref().unwrap()["cpu"].0, "200m");
    assert_eq!(
        s.resources.as_ref().unwrap().requests.as_ref().unwrap()["cpu"].0,
        "100m",
        "the cgroups still have the old values"
    );
    let since = d
        .status
        .conditions
        .last()
        .unwrap()
        .last_transition_time
        .clone();
    let d = step(&pod, &mut obs, t(3.0));
    assert_eq!(
        d.status.conditions.last().unwrap().last_transition_time,
        since,
        "unchanged, it keeps its transition time"
    );
    // Applied: the condition goes, no container restarted.
    pod.containers[0].resources.applied = allocation("200m", "32Mi");
    obs.resize = None;
    let d = step(&pod, &mut obs, t(4.0));
    assert!(resize_conditions(&d).is_empty());
    assert!(signals(&d).is_empty());
    assert_eq!(d.status.container_statuses[0].restart_count, 0);
}

#[test]
fn an_infeasible_resize_is_pending_with_its_reason_and_message() {
    let pod = sized();
    let mut obs = running(&pod);
    obs.resize = Some(ResizeCondition::infeasible(
        "Node didn't have enough capacity: cpu".into(),
        Some(1),
    ));
    let d = step(&pod, &mut obs, t(1.0));
    let c = d.status.conditions.last().unwrap();
    assert_eq!(c.type_, "PodResizePending");
    assert_eq!(c.status, "True");
    assert_eq!(c.reason.as_deref(), Some("Infeasible"));
    assert_eq!(
        c.message.as_deref(),
        Some("Node didn't have enough capacity: cpu")
    );
}

#[test]
fn a_restart_container_resize_stops_the_container_and_starts_it_again_at_once() {
    let mut pod = sized();
    let mut obs = running(&pod);
    pod.containers[0].resources.allocated = allocation("100m", "128Mi");
    pod.containers[0].resources.restart_pending = true;
    let d = step(&pod, &mut obs, t(5.0));
    assert_eq!(signals(&d), [SignalKind::Stop { grace: secs(30) }]);
    obs.containers[0].on_exited(0, exit(143, 0.0, 6.0), true);
    let d = step(&pod, &mut obs, t(6.0));
    assert!(
        d.actions
            .iter()
            .any(|a| matches!(a, Action::Start { container, .. } if container == "app")),
        "{:?}",
        d.actions
    );
    // The worker starts it with its allocation: the restart is no longer pending.
    pod.containers[0].resources.applied = allocation("100m", "128Mi");
    pod.containers[0].resources.restart_pending = false;
    obs.containers[0].on_started(1, t(6.0), "podhost://a1".into());
    let d = step(&pod, &mut obs, t(7.0));
    assert!(signals(&d).is_empty());
    assert_eq!(d.status.container_statuses[0].restart_count, 1);
}
