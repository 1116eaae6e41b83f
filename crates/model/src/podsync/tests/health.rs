//! Probes' effects (kubelet-semantics §4), postStart (§1) and activeDeadlineSeconds.

use super::*;
use crate::phase::PodPhase;

fn running(pod: &PodFacts) -> PodObserved {
    let mut obs = observed(pod);
    step(pod, &mut obs, t(0.0));
    let c = &mut obs.containers[0];
    c.on_started(0, t(0.0), "podhost://a0".into());
    obs
}

fn ready_of(d: &Decision) -> (Option<bool>, bool) {
    let s = &d.status.container_statuses[0];
    (s.started, s.ready)
}

#[test]
fn readiness_starts_failed_and_drives_ready_and_the_conditions() {
    let mut pod = one(RestartPolicy::Always);
    pod.containers[0].readiness_probe = true;
    let mut obs = running(&pod);
    let d = step(&pod, &mut obs, t(1.0));
    assert_eq!(ready_of(&d), (Some(true), false));
    obs.containers[0].on_probe_result(ProbeKind::Readiness, ProbeResult::Success, String::new());
    let d = step(&pod, &mut obs, t(2.0));
    assert_eq!(ready_of(&d), (Some(true), true));
    let ready = |d: &Decision| {
        d.status
            .conditions
            .iter()
            .filter(|c| c.type_ == "Ready" || c.type_ == "ContainersReady")
            .map(|c| c.status.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(ready(&d), vec!["True", "True"]);
    obs.containers[0].on_probe_result(
        ProbeKind::Readiness,
        ProbeResult::Failure,
        "HTTP 503".into(),
    );
    let d = step(&pod, &mut obs, t(3.0));
    assert_eq!(ready(&d), vec!["False", "False"]);
    assert_eq!(d.events.len(), 1);
    assert_eq!(d.events[0].reason, "Unhealthy");
    assert_eq!(d.events[0].message, "Readiness probe failed: HTTP 503");
    assert!(d.actions.is_empty(), "readiness never kills");
    let d = step(&pod, &mut obs, t(4.0));
    assert!(d.events.is_empty(), "the event is recorded once");
}

#[test]
fn started_follows_the_startup_probe_and_liveness_waits_for_it() {
    let mut pod = one(RestartPolicy::Always);
    pod.containers[0].startup_probe = Some(ProbeFacts::default());
    pod.containers[0].liveness_probe = Some(ProbeFacts::default());
    let mut obs = running(&pod);
    let d = step(&pod, &mut obs, t(1.0));
    assert_eq!(ready_of(&d), (Some(false), false));
    // A liveness failure before started kills nothing (its prober does not run yet).
    obs.containers[0].on_probe_result(ProbeKind::Liveness, ProbeResult::Failure, "x".into());
    let d = step(&pod, &mut obs, t(2.0));
    assert!(d.actions.is_empty());
    obs.containers[0].on_probe_result(ProbeKind::Startup, ProbeResult::Success, String::new());
    let d = step(&pod, &mut obs, t(3.0));
    assert_eq!(d.status.container_statuses[0].started, Some(true));
    assert!(!d.actions.is_empty(), "now the liveness failure counts");
}

#[test]
fn liveness_failure_kills_with_the_probe_level_grace_and_restarts() {
    for (probe_grace, stop_grace) in [(None, 30), (Some(5), 5), (Some(1), 2)] {
        let mut pod = one(RestartPolicy::Always);
        pod.containers[0].liveness_probe = Some(ProbeFacts {
            termination_grace: probe_grace.map(secs),
        });
        let mut obs = running(&pod);
        obs.containers[0].on_probe_result(
            ProbeKind::Liveness,
            ProbeResult::Failure,
            "dial tcp 127.0.0.1:80: connection refused".into(),
        );
        let d = step(&pod, &mut obs, t(10.0));
        let reasons: Vec<_> = d.events.iter().map(|e| e.reason).collect();
        assert_eq!(reasons, vec!["Killing", "Unhealthy"], "{probe_grace:?}");
        assert_eq!(
            d.events[0].message,
            "Container app failed liveness probe, will be restarted"
        );
        assert_eq!(
            d.events[1].message,
            "Liveness probe failed: dial tcp 127.0.0.1:80: connection refused"
        );
        assert_eq!(
            d.actions,
            vec![Action::Signal {
                container: "app".into(),
                signal: SignalKind::Stop {
                    grace: secs(stop_grace)
                }
            }],
            "{probe_grace:?}"
        );
        let d = step(&pod, &mut obs, t(10.0 + stop_grace as f64));
        assert_eq!(
            d.actions,
            vec![Action::Signal {
                container: "app".into(),
                signal: SignalKind::Kill
            }]
        );
        obs.containers[0].on_exited(0, exit(137, 0.0, 11.0 + stop_grace as f64), true);
        let d = step(&pod, &mut obs, t(11.0 + stop_grace as f64));
        assert_eq!(starts(&d), vec![("app".to_string(), 1)], "restarted");
        // The new instance starts from the initial results: no kill.
        obs.containers[0].on_started(1, t(12.0 + stop_grace as f64), "podhost://a1".into());
        let d = step(&pod, &mut obs, t(13.0 + stop_grace as f64));
        assert!(d.actions.is_empty());
    }
}

#[test]
fn a_startup_failure_kills_and_never_restarts_under_never() {
    let mut pod = one(RestartPolicy::Never);
    pod.containers[0].startup_probe = Some(ProbeFacts::default());
    let mut obs = running(&pod);
    obs.containers[0].on_probe_result(ProbeKind::Startup, ProbeResult::Failure, "timeout".into());
    let d = step(&pod, &mut obs, t(5.0));
    assert_eq!(
        d.events[0].message,
        "Container app failed startup probe, will be restarted"
    );
    obs.containers[0].on_exited(0, exit(137, 0.0, 6.0), true);
    let d = step(&pod, &mut obs, t(6.0));
    assert!(starts(&d).is_empty());
    assert_eq!(d.status.phase, PodPhase::Failed);
}

#[test]
fn a_probe_kill_runs_the_pre_stop_hook_first() {
    let mut pod = pod(RestartPolicy::Always, &[("app", Hook::Exec)]);
    pod.containers[0].liveness_probe = Some(ProbeFacts::default());
    let mut obs = running(&pod);
    obs.containers[0].on_probe_result(ProbeKind::Liveness, ProbeResult::Failure, "x".into());
    let d = step(&pod, &mut obs, t(5.0));
    assert_eq!(
        d.actions,
        vec![Action::RunPreStop {
            container: "app".into(),
            timeout: secs(30)
        }]
    );
}

#[test]
fn post_start_runs_after_start_and_the_container_is_not_running_until_it_returns() {
    let mut pod = pod(
        RestartPolicy::Always,
        &[("app", Hook::None), ("second", Hook::None)],
    );
    pod.containers[0].post_start = Hook::Exec;
    let mut obs = observed(&pod);
    let d = step(&pod, &mut obs, t(0.0));
    assert_eq!(starts(&d).len(), 2, "both start (nothing runs a hook yet)");
    obs.containers[0].on_started(0, t(0.0), "podhost://a0".into());
    let d = step(&pod, &mut obs, t(0.1));
    assert_eq!(
        d.actions,
        vec![Action::RunPostStart {
            container: "app".into()
        }]
    );
    assert_eq!(reason(&d, 0), "ContainerCreating");
    let d = step(&pod, &mut obs, t(0.2));
    assert!(d.actions.is_empty(), "the hook runs once");
    assert_eq!(d.status.phase, PodPhase::Pending);
    obs.containers[0].on_post_start_ended(t(1.0), None);
    let d = step(&pod, &mut obs, t(1.0));
    assert_eq!(reason(&d, 0), "Running");
}

#[test]
fn a_later_first_start_waits_for_an_earlier_post_start_hook() {
    let mut pod = pod(
        RestartPolicy::Always,
        &[("app", Hook::None), ("second", Hook::None)],
    );
    pod.containers[0].post_start = Hook::Exec;
    let mut obs = observed(&pod);
    begin_start(&mut obs.containers[0], t(0.0), Default::default());
    obs.containers[0].on_started(0, t(0.0), "podhost://a0".into());
    let d = step(&pod, &mut obs, t(0.0));
    assert_eq!(
        d.actions,
        vec![Action::RunPostStart {
            container: "app".into()
        }],
        "second waits"
    );
    obs.containers[0].on_post_start_ended(t(1.0), None);
    let d = step(&pod, &mut obs, t(1.0));
    assert_eq!(starts(&d), vec![("second".to_string(), 0)]);
}

#[test]
fn a_failing_post_start_kills_the_container_which_restarts_under_back_off() {
    let mut pod = one(RestartPolicy::Always);
    pod.containers[0].post_start = Hook::Exec;
    let mut obs = running(&pod);
    step(&pod, &mut obs, t(0.1));
    obs.containers[0].on_post_start_ended(t(0.5), Some("[\"false\"] exited with 1: ".into()));
    let d = step(&pod, &mut obs, t(0.5));
    let reasons: Vec<_> = d.events.iter().map(|e| e.reason).collect();
    assert_eq!(reasons, vec!["FailedPostStartHook", "Killing"]);
    assert_eq!(d.events[1].message, "FailedPostStartHook");
    assert_eq!(reason(&d, 0), "PostStartHookError");
    assert!(matches!(
        d.actions[..],
        [Action::Signal {
            signal: SignalKind::Stop { .. },
            ..
        }]
    ));
    obs.containers[0].on_exited(0, exit(143, 0.0, 1.0), true);
    let d = step(&pod, &mut obs, t(1.0));
    assert_eq!(
        starts(&d),
        vec![("app".to_string(), 1)],
        "first restart at once"
    );
    obs.containers[0].on_started(1, t(1.0), "podhost://a1".into());
    step(&pod, &mut obs, t(1.0));
    obs.containers[0].on_post_start_ended(t(1.5), Some("again".into()));
    step(&pod, &mut obs, t(1.5));
    obs.containers[0].on_exited(1, exit(143, 1.0, 2.0), true);
    let d = step(&pod, &mut obs, t(2.0));
    assert_eq!(reason(&d, 0), "CrashLoopBackOff");
}

#[test]
fn active_deadline_fails_the_pod_and_stops_its_containers() {
    let mut pod = one(RestartPolicy::Always);
    pod.active_deadline = Some(secs(60));
    let mut obs = running(&pod);
    let d = step(&pod, &mut obs, t(30.0));
    assert_eq!(d.wake_at, Some(t(60.0)));
    assert_eq!(d.status.phase, PodPhase::Running);
    let d = step(&pod, &mut obs, t(60.0));
    assert_eq!(d.status.phase, PodPhase::Failed);
    assert_eq!(d.status.reason.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(d.status.message.as_deref(), Some(DEADLINE_MESSAGE));
    let reasons: Vec<_> = d.events.iter().map(|e| e.reason).collect();
    assert_eq!(reasons, vec!["DeadlineExceeded", "Killing"]);
    obs.containers[0].on_exited(0, exit(143, 0.0, 61.0), true);
    let d = step(&pod, &mut obs, t(61.0));
    assert!(starts(&d).is_empty(), "nothing restarts");
    assert_eq!(d.status.phase, PodPhase::Failed);
    assert!(d.events.is_empty(), "DeadlineExceeded is recorded once");
}

#[test]
fn an_evicted_pod_fails_and_its_containers_stop_with_the_eviction_grace() {
    let pod = one(RestartPolicy::Always);
    let mut obs = running(&pod);
    let message = "Usage of EmptyDir volume \"scratch\" exceeds the limit \"1Mi\".";
    obs.on_evicted(t(20.0), message.to_string(), crate::podsync::EVICTION_GRACE);
    let d = step(&pod, &mut obs, t(20.0));
    assert_eq!(d.status.phase, PodPhase::Failed);
    assert_eq!(d.status.reason.as_deref(), Some("Evicted"));
    assert_eq!(d.status.message.as_deref(), Some(message));
    assert!(
        d.status
            .conditions
            .iter()
            .any(|c| c.type_ == "DisruptionTarget"
                && c.status == "True"
                && c.reason.as_deref() == Some("TerminationByKubelet")
                && c.message.as_deref() == Some(message))
    );
    let reasons: Vec<_> = d.events.iter().map(|e| e.reason).collect();
    assert_eq!(reasons, vec!["Evicted", "Killing"]);
    assert_eq!(
        d.actions,
        vec![Action::Signal {
            container: "app".into(),
            signal: SignalKind::Stop { grace: secs(2) }
        }]
    );
    obs.containers[0].on_exited(0, exit(143, 0.0, 21.0), true);
    let d = step(&pod, &mut obs, t(21.0));
    assert!(
        d.actions.is_empty() && d.events.is_empty(),
        "no restart, one event"
    );
    assert_eq!(d.status.phase, PodPhase::Failed);
}

#[test]
fn a_soft_eviction_stops_the_containers_with_its_own_grace() {
    let pod = one(RestartPolicy::Always);
    let mut obs = running(&pod);
    obs.on_evicted(t(20.0), "low on memory".to_string(), secs(7));
    let d = step(&pod, &mut obs, t(20.0));
    assert_eq!(d.status.phase, PodPhase::Failed);
    assert_eq!(
        d.actions,
        vec![Action::Signal {
            container: "app".into(),
            signal: SignalKind::Stop { grace: secs(7) }
        }]
    );
}
