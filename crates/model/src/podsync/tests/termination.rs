//! Termination: preStop, the stop signal with what is left of the grace (≥ 2 s), SIGKILL
//! (kubelet-semantics §1), and the pod worker's rules (§12).

use super::*;

fn running_pod(pre_stop: Hook) -> (PodFacts, PodObserved) {
    let pod = pod(RestartPolicy::Always, &[("app", pre_stop)]);
    let mut obs = observed(&pod);
    begin_start(&mut obs.containers[0], t(0.0), Default::default());
    obs.containers[0].on_started(0, t(0.0), "podhost://a0".into());
    (pod, obs)
}

fn event_reasons(d: &Decision) -> Vec<&'static str> {
    d.events.iter().map(|e| e.reason).collect()
}

#[test]
fn without_a_hook_the_stop_signal_then_sigkill_after_the_grace() {
    // (pod grace s, stop grace s): the stop signal always gets at least 2 s.
    for (grace, stop_grace) in [(30, 30), (5, 5), (2, 2), (1, 2)] {
        let (pod, mut obs) = running_pod(Hook::None);
        obs.on_terminate(t(100.0), secs(grace));
        let d = step(&pod, &mut obs, t(100.0));
        assert_eq!(event_reasons(&d), vec!["Killing"], "grace {grace}");
        assert_eq!(d.events[0].message, "Stopping container app");
        assert_eq!(
            signals(&d),
            vec![SignalKind::Stop {
                grace: secs(stop_grace)
            }],
            "grace {grace}"
        );
        let d = step(&pod, &mut obs, t(100.0));
        assert!(
            d.actions.is_empty() && d.events.is_empty(),
            "grace {grace}: nothing twice"
        );
        assert_eq!(d.wake_at, Some(t(100.0 + stop_grace as f64)));
        let d = step(&pod, &mut obs, t(100.0 + stop_grace as f64));
        assert_eq!(signals(&d), vec![SignalKind::Kill], "grace {grace}");
        let d = step(&pod, &mut obs, t(200.0));
        assert!(d.actions.is_empty(), "SIGKILL is sent once");
        assert!(!d.pod_done, "the container still runs");
    }
}

#[test]
fn exec_hook_time_is_deducted_truncated_to_seconds() {
    // (grace, hook took, stop grace): kubelet deducts whole seconds, floors at 2 s.
    let table = [
        (30.0, 4.9, 26),
        (30.0, 0.3, 30),
        (30.0, 29.0, 2),
        (5.0, 4.0, 2),
        (10.0, 7.99, 3),
    ];
    for (grace, took, stop_grace) in table {
        let (pod, mut obs) = running_pod(Hook::Exec);
        obs.on_terminate(t(0.0), Duration::from_secs_f64(grace));
        let d = step(&pod, &mut obs, t(0.0));
        assert_eq!(event_reasons(&d), vec!["Killing"]);
        assert_eq!(
            d.actions,
            vec![Action::RunPreStop {
                container: "app".into(),
                timeout: Duration::from_secs_f64(grace)
            }]
        );
        assert!(
            step(&pod, &mut obs, t(1.0)).actions.is_empty(),
            "the hook runs"
        );
        obs.containers[0].on_hook_ended(t(took), None);
        let d = step(&pod, &mut obs, t(took + 0.05));
        let case = format!("grace {grace} took {took}");
        assert_eq!(
            signals(&d),
            vec![SignalKind::Stop {
                grace: secs(stop_grace)
            }],
            "{case}"
        );
        assert!(d.events.is_empty(), "{case}: no second Killing");
    }
}

#[test]
fn a_failed_hook_is_a_warning_and_the_stop_goes_on() {
    let (pod, mut obs) = running_pod(Hook::Exec);
    obs.on_terminate(t(0.0), secs(30));
    step(&pod, &mut obs, t(0.0));
    obs.containers[0].on_hook_ended(t(1.0), Some("[\"false\"] exited with 1: ".into()));
    let d = step(&pod, &mut obs, t(1.0));
    assert_eq!(event_reasons(&d), vec!["FailedPreStopHook"]);
    assert!(d.events[0].warning);
    assert!(d.events[0].message.starts_with("PreStopHook failed: "));
    assert_eq!(signals(&d), vec![SignalKind::Stop { grace: secs(29) }]);
}

#[test]
fn a_hook_past_the_grace_is_abandoned_with_a_warning_and_two_seconds_left() {
    let (pod, mut obs) = running_pod(Hook::Exec);
    obs.on_terminate(t(0.0), secs(10));
    let d = step(&pod, &mut obs, t(0.0));
    assert_eq!(d.wake_at, Some(t(10.0)));
    let d = step(&pod, &mut obs, t(10.0));
    assert_eq!(event_reasons(&d), vec!["FailedPreStopHook"]);
    assert_eq!(
        d.events[0].message,
        "PreStop hook not completed in grace period (10s)"
    );
    assert_eq!(signals(&d), vec![SignalKind::Stop { grace: secs(2) }]);
    // Its late end changes nothing; SIGKILL follows 2 s after the stop signal.
    obs.containers[0].on_hook_ended(t(11.0), Some("late".into()));
    let d = step(&pod, &mut obs, t(11.0));
    assert!(d.actions.is_empty() && d.events.is_empty());
    assert_eq!(
        signals(&step(&pod, &mut obs, t(12.0))),
        vec![SignalKind::Kill]
    );
}

#[test]
fn a_sleep_hook_past_the_grace_ends_without_a_warning() {
    let (pod, mut obs) = running_pod(Hook::Sleep(secs(60)));
    obs.on_terminate(t(0.0), secs(5));
    let d = step(&pod, &mut obs, t(0.0));
    assert!(matches!(d.actions[..], [Action::RunPreStop { .. }]));
    let d = step(&pod, &mut obs, t(5.0));
    assert!(d.events.is_empty());
    assert_eq!(signals(&d), vec![SignalKind::Stop { grace: secs(2) }]);
}

#[test]
fn a_shorter_grace_ordered_later_shortens_the_wait_for_sigkill() {
    let (pod, mut obs) = running_pod(Hook::None);
    obs.on_terminate(t(0.0), secs(30));
    step(&pod, &mut obs, t(0.0));
    obs.on_terminate(t(1.0), secs(5));
    obs.on_terminate(t(1.5), secs(60));
    assert_eq!(
        obs.terminating.map(|o| o.grace),
        Some(secs(5)),
        "grace only shrinks"
    );
    let d = step(&pod, &mut obs, t(1.5));
    assert_eq!(d.wake_at, Some(t(5.0)));
    assert_eq!(
        signals(&step(&pod, &mut obs, t(5.0))),
        vec![SignalKind::Kill]
    );
}

#[test]
fn a_container_that_exits_during_its_hook_gets_no_signal() {
    let (pod, mut obs) = running_pod(Hook::Exec);
    obs.on_terminate(t(0.0), secs(30));
    step(&pod, &mut obs, t(0.0));
    obs.containers[0].on_exited(0, exit(0, 0.0, 1.0), false);
    let d = step(&pod, &mut obs, t(1.0));
    assert!(d.actions.is_empty());
    assert!(!d.pod_done, "its shim has not released it yet");
    obs.containers[0].on_released();
    let d = step(&pod, &mut obs, t(1.2));
    assert!(d.pod_done);
    assert!(d.actions.is_empty());
}

#[test]
fn nothing_starts_once_the_pod_terminates() {
    // An exited container due for restart, a blocked one and a never-started one.
    let pod = pod(
        RestartPolicy::Always,
        &[
            ("exited", Hook::None),
            ("blocked", Hook::None),
            ("new", Hook::None),
        ],
    );
    let mut obs = observed(&pod);
    obs.containers[0].on_exited(0, exit(1, 0.0, 1.0), true);
    obs.containers[1].on_start_blocked(BlockKind::Image, "m".into(), t(0.0), (0, 0));
    obs.on_terminate(t(2.0), secs(30));
    obs.on_image_loaded();
    let d = step(&pod, &mut obs, t(500.0));
    assert!(d.actions.is_empty());
    assert!(d.pod_done);
    assert_eq!(reason(&d, 0), "Terminated:Error");
    assert_eq!(reason(&d, 1), "ErrImagePull");
    assert_eq!(reason(&d, 2), "ContainerCreating");
}

#[test]
fn a_starting_container_is_stopped_once_it_runs() {
    let pod = one(RestartPolicy::Always);
    let mut obs = observed(&pod);
    step(&pod, &mut obs, t(0.0));
    obs.on_terminate(t(0.1), secs(30));
    let d = step(&pod, &mut obs, t(0.1));
    assert!(
        d.actions.is_empty() && !d.pod_done,
        "waits for the start to end"
    );
    obs.containers[0].on_started(0, t(0.2), "podhost://a0".into());
    let d = step(&pod, &mut obs, t(0.2));
    assert_eq!(signals(&d), vec![SignalKind::Stop { grace: secs(30) }]);
}

#[test]
fn every_running_container_is_stopped_in_parallel() {
    let pod = pod(
        RestartPolicy::Always,
        &[("a", Hook::None), ("b", Hook::Exec), ("c", Hook::None)],
    );
    let mut obs = observed(&pod);
    for (i, c) in obs.containers.iter_mut().enumerate() {
        c.on_started(0, t(0.0), format!("podhost://{i}"));
    }
    obs.on_terminate(t(1.0), secs(30));
    let d = step(&pod, &mut obs, t(1.0));
    let kinds: Vec<(&str, bool)> = d
        .actions
        .iter()
        .map(|a| (a.container(), matches!(a, Action::RunPreStop { .. })))
        .collect();
    assert_eq!(kinds, vec![("a", false), ("b", true), ("c", false)]);
    assert_eq!(event_reasons(&d), vec!["Killing", "Killing", "Killing"]);
}

#[test]
fn an_empty_pod_is_done_at_once() {
    let pod = pod(RestartPolicy::Always, &[]);
    let mut obs = observed(&pod);
    obs.on_terminate(t(0.0), secs(30));
    assert!(sync_pod(&pod, &obs, t(0.0)).pod_done);
}
