//! The pod status a sync produces: phase (`getPhase`), conditions, container states.

use super::*;
use crate::phase::PodPhase;

#[test]
fn terminated_reasons() {
    // (exit code, known reason, shown reason)
    let table = [
        (0, None, "Completed"),
        (1, None, "Error"),
        (137, Some("OOMKilled"), "OOMKilled"),
        (
            137,
            Some("ContainerStatusUnknown"),
            "ContainerStatusUnknown",
        ),
        (128, Some("StartError"), "StartError"),
    ];
    for (code, known, shown) in table {
        let mut e = exit(code, 0.0, 1.0);
        e.reason = known.map(str::to_string);
        let state = terminated_state(&e).terminated.unwrap_or_default();
        assert_eq!(state.reason.as_deref(), Some(shown));
        assert_eq!(state.exit_code, code);
    }
}

#[test]
fn a_terminal_phase_never_goes_back() {
    let pod = one(RestartPolicy::Never);
    let mut obs = observed(&pod);
    obs.containers[0].on_exited(0, exit(0, 0.0, 1.0), true);
    let d = step(&pod, &mut obs, t(1.0));
    assert_eq!(d.status.phase, PodPhase::Succeeded);
    // Even if a (stale) observation says it runs again, the phase stays.
    obs.containers[0].on_started(1, t(2.0), "podhost://a1".into());
    assert_eq!(
        step(&pod, &mut obs, t(2.0)).status.phase,
        PodPhase::Succeeded
    );
}

#[test]
fn phase_table() {
    use RestartPolicy::*;
    // (policy, [(running?, exit code of the current or last instance)], phase)
    // None = never ran, Some(None) = running, Some(Some(code)) = exited with code.
    type Row = (RestartPolicy, &'static [Option<Option<i32>>], PodPhase);
    let table: &[Row] = &[
        (Always, &[None], PodPhase::Pending),
        (Always, &[Some(None), None], PodPhase::Pending),
        (Never, &[Some(None)], PodPhase::Running),
        (Never, &[Some(None), Some(Some(1))], PodPhase::Running),
        (Never, &[Some(Some(0)), Some(Some(0))], PodPhase::Succeeded),
        (Never, &[Some(Some(0)), Some(Some(2))], PodPhase::Failed),
        (OnFailure, &[Some(Some(0))], PodPhase::Succeeded),
        (Always, &[Some(Some(0)), Some(None)], PodPhase::Running),
    ];
    for (policy, containers, phase) in table {
        let names: Vec<(String, Hook)> = (0..containers.len())
            .map(|i| (format!("c{i}"), Hook::None))
            .collect();
        let refs: Vec<(&str, Hook)> = names.iter().map(|(n, p)| (n.as_str(), *p)).collect();
        let pod = pod(*policy, &refs);
        let mut obs = observed(&pod);
        for (c, state) in obs.containers.iter_mut().zip(containers.iter()) {
            match state {
                None => begin_start(c, t(0.0), Default::default()),
                Some(None) => c.on_started(0, t(0.0), "podhost://x".into()),
                Some(Some(code)) => c.on_exited(0, exit(*code, 0.0, 1.0), false),
            }
        }
        let d = sync_pod(&pod, &obs, t(1.0));
        assert_eq!(d.status.phase, *phase, "{policy:?} {containers:?}");
    }
}

#[test]
fn conditions_move_only_on_change() {
    let pod = one(RestartPolicy::Always);
    let mut obs = observed(&pod);
    let d = step(&pod, &mut obs, t(0.0));
    let ready = |d: &Decision| {
        d.status
            .conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .map(|c| (c.status.clone(), c.last_transition_time.clone()))
    };
    let (value, at) = ready(&d).unwrap_or_default();
    assert_eq!(value, "False");
    let types: Vec<&str> = d
        .status
        .conditions
        .iter()
        .map(|c| c.type_.as_str())
        .collect();
    assert_eq!(
        types,
        [
            "PodScheduled",
            "Initialized",
            "ContainersReady",
            "Ready",
            "PodReadyToStartContainers"
        ]
    );
    assert_eq!(
        ready(&step(&pod, &mut obs, t(5.0))).unwrap_or_default().1,
        at,
        "unchanged"
    );
    obs.containers[0].on_started(0, t(6.0), "podhost://a0".into());
    let (value, moved) = ready(&step(&pod, &mut obs, t(6.0))).unwrap_or_default();
    assert_eq!(value, "True");
    assert_ne!(moved, at);
    assert_eq!(
        obs.start_time,
        Some(t(0.0)),
        "startTime is the first sync's"
    );
}

#[test]
fn container_status_fields() {
    let pod = one(RestartPolicy::Always);
    let mut obs = observed(&pod);
    obs.containers[0].image_id = "sha256:abc".into();
    obs.containers[0].on_started(3, t(1.0), "podhost://u1-app-3".into());
    let d = sync_pod(&pod, &obs, t(2.0));
    let cs = &d.status.container_statuses[0];
    assert_eq!(cs.name, "app");
    assert_eq!(cs.image, "img-app");
    assert_eq!(cs.image_id, "sha256:abc");
    assert_eq!(cs.container_id.as_deref(), Some("podhost://u1-app-3"));
    assert_eq!(cs.restart_count, 3);
    assert!(cs.ready);
    assert_eq!(cs.started, Some(true));
}

#[test]
fn the_status_and_each_node_condition_carry_the_generation_followed() {
    let mut pod = one(RestartPolicy::Always);
    let mut obs = observed(&pod);
    let generations = |d: &Decision| -> Vec<(String, Option<i64>)> {
        d.status
            .conditions
            .iter()
            .map(|c| (c.type_.clone(), c.observed_generation))
            .collect()
    };
    // A pod without a generation (a static pod's manifest) shows none.
    let d = step(&pod, &mut obs, t(0.0));
    assert_eq!(d.status.observed_generation, None);
    assert!(generations(&d).iter().all(|(_, g)| g.is_none()));

    // A condition someone else owns (a readiness gate's) keeps what its writer set.
    obs.conditions
        .push(k8s_openapi::api::core::v1::PodCondition {
            type_: "example.com/gate".into(),
            status: "True".into(),
            observed_generation: Some(1),
            ..Default::default()
        });
    pod.generation = Some(3);
    let d = step(&pod, &mut obs, t(1.0));
    assert_eq!(d.status.observed_generation, Some(3));
    for (kind, generation) in generations(&d) {
        let expected = if kind == "example.com/gate" { 1 } else { 3 };
        assert_eq!(generation, Some(expected), "{kind}");
    }
    // A later generation moves them all, with no transition of their status.
    let before = d.status.conditions.clone();
    pod.generation = Some(4);
    let d = step(&pod, &mut obs, t(2.0));
    assert_eq!(d.status.observed_generation, Some(4));
    for (old, new) in before.iter().zip(&d.status.conditions) {
        assert_eq!(
            old.last_transition_time, new.last_transition_time,
            "{}",
            old.type_
        );
        assert_eq!(old.status, new.status, "{}", old.type_);
    }
    assert!(
        generations(&d)
            .iter()
            .filter(|(k, _)| k != "example.com/gate")
            .all(|(_, g)| *g == Some(4))
    );
}
