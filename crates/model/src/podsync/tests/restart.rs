//! Restart policy, CrashLoopBackOff and blocked starts (kubelet-semantics §3).

use super::*;
use crate::phase::PodPhase;
use RestartPolicy::{Always, Never, OnFailure};

/// A container that ran 0..1 s and exited with `code`, its shim released.
fn exited_once(pod: &PodFacts, code: i32) -> PodObserved {
    let mut obs = observed(pod);
    let c = &mut obs.containers[0];
    begin_start(c, t(0.0), Default::default());
    c.on_started(0, t(0.0), "podhost://a0".into());
    c.on_exited(0, exit(code, 0.0, 1.0), true);
    obs
}

#[test]
fn a_new_container_starts_at_once_with_attempt_zero() {
    let pod = one(Always);
    let d = sync_pod(&pod, &observed(&pod), t(0.0));
    assert_eq!(starts(&d), vec![("app".to_string(), 0)]);
    assert_eq!(reason(&d, 0), "ContainerCreating");
    assert_eq!(d.status.phase, PodPhase::Pending);
    assert_eq!(d.wake_at, None);
}

#[test]
fn restart_policy_by_exit_code() {
    // (policy, exit code, restarted, phase once it stays down)
    let table = [
        (Always, 0, true, PodPhase::Running),
        (Always, 1, true, PodPhase::Running),
        (Always, 137, true, PodPhase::Running),
        (OnFailure, 0, false, PodPhase::Succeeded),
        (OnFailure, 1, true, PodPhase::Running),
        (OnFailure, 137, true, PodPhase::Running),
        (Never, 0, false, PodPhase::Succeeded),
        (Never, 1, false, PodPhase::Failed),
        (Never, 137, false, PodPhase::Failed),
    ];
    for (policy, code, restarted, phase) in table {
        let pod = one(policy);
        let d = sync_pod(&pod, &exited_once(&pod, code), t(1.0));
        let case = format!("{policy:?} exit {code}");
        assert_eq!(!starts(&d).is_empty(), restarted, "{case}");
        assert_eq!(d.status.phase, phase, "{case}");
        if restarted {
            assert_eq!(starts(&d), vec![("app".to_string(), 1)], "{case}");
        } else {
            assert_eq!(
                reason(&d, 0),
                if code == 0 {
                    "Terminated:Completed"
                } else {
                    "Terminated:Error"
                },
                "{case}"
            );
        }
    }
}

#[test]
fn crash_loop_delays_are_kubelets_0_10_20_40_80_160_300_300() {
    let pod = one(Always);
    let mut obs = observed(&pod);
    let mut now = 0.0;
    let mut delays = Vec::new();
    let mut d = step(&pod, &mut obs, t(now));
    for attempt in 0..9u32 {
        // Started, ran 1 s, exited 1.
        assert_eq!(
            starts(&d),
            vec![("app".to_string(), attempt)],
            "attempt {attempt}"
        );
        obs.containers[0].on_started(attempt, t(now), format!("podhost://a{attempt}"));
        obs.containers[0].on_exited(attempt, exit(1, now, now + 1.0), true);
        now += 1.0;
        d = step(&pod, &mut obs, t(now));
        if !starts(&d).is_empty() {
            delays.push(0);
            continue;
        }
        assert_eq!(reason(&d, 0), "CrashLoopBackOff");
        let at = d.wake_at.unwrap_or_default();
        delays.push((at - t(now)).num_seconds());
        now = (at - t(0.0)).num_milliseconds() as f64 / 1000.0;
        d = step(&pod, &mut obs, t(now));
    }
    assert_eq!(delays, vec![0, 10, 20, 40, 80, 160, 300, 300, 300]);
    assert_eq!(obs.containers[0].restart_count, 8);
}

#[test]
fn crash_loop_message_event_and_last_state() {
    let pod = one(Always);
    let mut obs = exited_once(&pod, 2);
    // The first restart is immediate; the second exit waits 10 s.
    let d = step(&pod, &mut obs, t(1.0));
    assert_eq!(starts(&d).len(), 1);
    obs.containers[0].on_started(1, t(1.0), "podhost://a1".into());
    obs.containers[0].on_exited(1, exit(2, 1.0, 2.0), true);
    let d = step(&pod, &mut obs, t(2.0));
    let w = d.container_states[0].waiting.clone().unwrap_or_default();
    assert_eq!(w.reason.as_deref(), Some("CrashLoopBackOff"));
    assert_eq!(
        w.message.as_deref(),
        Some("back-off 10s restarting failed container=app pod=web_default(u1)")
    );
    assert_eq!(d.wake_at, Some(t(12.0)));
    assert_eq!(d.events.len(), 1);
    assert_eq!((d.events[0].warning, d.events[0].reason), (true, "BackOff"));
    let cs = &d.status.container_statuses[0];
    assert_eq!(cs.restart_count, 1);
    let last = cs
        .last_state
        .clone()
        .unwrap_or_default()
        .terminated
        .unwrap_or_default();
    assert_eq!((last.exit_code, last.reason.as_deref()), (2, Some("Error")));
    // The event is recorded once per back-off, not per sync.
    let again = step(&pod, &mut obs, t(5.0));
    assert!(again.events.is_empty());
    assert_eq!(reason(&again, 0), "CrashLoopBackOff");
    // At the deadline it starts attempt 2.
    let due = step(&pod, &mut obs, t(12.0));
    assert_eq!(starts(&due), vec![("app".to_string(), 2)]);
}

#[test]
fn back_off_counts_from_the_exit_not_from_the_sync() {
    let pod = one(Always);
    let mut obs = exited_once(&pod, 1);
    step(&pod, &mut obs, t(1.0));
    obs.containers[0].on_started(1, t(1.0), "podhost://a1".into());
    obs.containers[0].on_exited(1, exit(1, 1.0, 2.0), true);
    // A daemon that comes back 7 s after the exit waits the remaining 3 s.
    let d = sync_pod(&pod, &obs, t(9.0));
    assert_eq!(d.wake_at, Some(t(12.0)));
    // One that comes back after the delay starts at once.
    assert_eq!(starts(&sync_pod(&pod, &obs, t(30.0))).len(), 1);
}

#[test]
fn a_run_longer_than_ten_minutes_resets_the_back_off() {
    let pod = one(Always);
    let mut obs = observed(&pod);
    let c = &mut obs.containers[0];
    for _ in 0..5 {
        c.backoff.next_delay(&pod.backoff, secs(1));
    }
    c.on_started(5, t(0.0), "podhost://a5".into());
    c.on_exited(5, exit(1, 0.0, 601.0), true);
    let d = sync_pod(&pod, &obs, t(601.0));
    assert_eq!(starts(&d), vec![("app".to_string(), 6)]);
    // Exactly 600 s is not longer than the window: the back-off stays.
    let mut obs = observed(&pod);
    let c = &mut obs.containers[0];
    for _ in 0..5 {
        c.backoff.next_delay(&pod.backoff, secs(1));
    }
    c.on_exited(5, exit(1, 0.0, 600.0), true);
    let d = sync_pod(&pod, &obs, t(600.0));
    assert!(starts(&d).is_empty());
    assert_eq!(d.wake_at, Some(t(760.0)));
}

#[test]
fn no_restart_before_the_shim_released_the_container() {
    let pod = one(Always);
    let mut obs = exited_once(&pod, 1);
    if let Instance::Exited { released, .. } = &mut obs.containers[0].instance {
        *released = false;
    }
    let d = sync_pod(&pod, &obs, t(100.0));
    assert!(starts(&d).is_empty());
    assert_eq!(reason(&d, 0), "Terminated:Error");
    obs.containers[0].on_released();
    assert_eq!(starts(&sync_pod(&pod, &obs, t(100.0))).len(), 1);
}

#[test]
fn nothing_happens_while_starting_or_running() {
    let pod = one(Always);
    let mut obs = observed(&pod);
    let d = step(&pod, &mut obs, t(0.0));
    assert_eq!(starts(&d).len(), 1);
    let d = sync_pod(&pod, &obs, t(50.0));
    assert!(d.actions.is_empty() && d.wake_at.is_none());
    obs.containers[0].on_started(0, t(0.1), "podhost://a0".into());
    let d = sync_pod(&pod, &obs, t(50.0));
    assert!(d.actions.is_empty() && d.wake_at.is_none());
    assert_eq!(reason(&d, 0), "Running");
    assert_eq!(d.status.phase, PodPhase::Running);
}

#[test]
fn image_pull_error_then_back_off_then_retry() {
    let pod = one(Always);
    let mut obs = observed(&pod);
    step(&pod, &mut obs, t(0.0));
    obs.containers[0].on_start_blocked(BlockKind::Image, "no such host".into(), t(0.5), (0, 0));
    // ErrImagePull shows for a second, then ImagePullBackOff with one Normal event.
    let d = step(&pod, &mut obs, t(0.6));
    assert_eq!(reason(&d, 0), "ErrImagePull");
    assert_eq!(d.wake_at, Some(t(1.5)));
    assert!(d.events.is_empty());
    let d = step(&pod, &mut obs, t(1.5));
    assert_eq!(reason(&d, 0), "ImagePullBackOff");
    let w = d.container_states[0].waiting.clone().unwrap_or_default();
    assert_eq!(
        w.message.as_deref(),
        Some("Back-off pulling image \"img-app\": no such host")
    );
    assert_eq!(d.events.len(), 1);
    assert_eq!(
        (d.events[0].warning, d.events[0].reason),
        (false, "BackOff")
    );
    assert_eq!(d.wake_at, Some(t(10.5)));
    assert!(step(&pod, &mut obs, t(5.0)).events.is_empty());
    // The retry keeps attempt 0 (nothing ran) and the back-off stays shown while it
    // runs, as the kubelet's reason cache keeps it; the next failure waits 20 s.
    let d = step(&pod, &mut obs, t(10.5));
    assert_eq!(starts(&d), vec![("app".to_string(), 0)]);
    assert_eq!(reason(&d, 0), "ImagePullBackOff");
    assert_eq!(
        reason(&step(&pod, &mut obs, t(10.8)), 0),
        "ImagePullBackOff"
    );
    obs.containers[0].on_start_blocked(BlockKind::Image, "no such host".into(), t(11.0), (0, 0));
    assert_eq!(sync_pod(&pod, &obs, t(12.0)).wake_at, Some(t(31.0)));
}

#[test]
fn a_config_error_stays_shown_with_its_message_until_the_retry_starts_the_container() {
    let pod = one(Always);
    let mut obs = observed(&pod);
    step(&pod, &mut obs, t(0.0));
    assert_eq!(
        reason(&step(&pod, &mut obs, t(0.1)), 0),
        "ContainerCreating"
    );
    let message = "secret \"db\" not found";
    obs.containers[0].on_start_blocked(BlockKind::Config, message.into(), t(0.5), (0, 0));
    for at in [1.0, 10.5, 10.9] {
        let d = step(&pod, &mut obs, t(at));
        let w = d.container_states[0].waiting.clone().unwrap_or_default();
        assert_eq!(
            (w.reason.as_deref(), w.message.as_deref()),
            (Some("CreateContainerConfigError"), Some(message)),
            "at {at} s"
        );
    }
    obs.containers[0].on_started(0, t(11.0), "podhost://a0".into());
    assert_eq!(reason(&step(&pod, &mut obs, t(11.1)), 0), "Running");
    // A restart after an exit is an ordinary start again: ContainerCreating.
    obs.containers[0].on_exited(0, exit(1, 11.0, 12.0), true);
    let d = step(&pod, &mut obs, t(12.0));
    assert_eq!(starts(&d).len(), 1);
    assert_eq!(
        reason(&step(&pod, &mut obs, t(12.1)), 0),
        "ContainerCreating"
    );
}

#[test]
fn a_config_error_is_retried_at_once_when_the_pods_metadata_changes_and_an_image_error_is_not() {
    for (kind, retried) in [(BlockKind::Config, true), (BlockKind::Image, false)] {
        let pod = one(Always);
        let mut obs = observed(&pod);
        step(&pod, &mut obs, t(0.0));
        let generations = (obs.image_generation, obs.config_generation);
        obs.containers[0].on_start_blocked(kind, "m".into(), t(0.5), generations);
        assert!(starts(&step(&pod, &mut obs, t(1.0))).is_empty(), "{kind:?}");
        // An annotation the container's environment reads was set.
        obs.on_metadata_changed();
        let d = step(&pod, &mut obs, t(1.5));
        assert_eq!(starts(&d).len(), usize::from(retried), "{kind:?}");
    }
}

#[test]
fn blocked_start_retry_delays_double_per_kind() {
    // (kind, failures in a row, retry after seconds, reason shown after 2 s)
    let table = [
        (BlockKind::Image, 1, 10, "ImagePullBackOff"),
        (BlockKind::Image, 3, 40, "ImagePullBackOff"),
        (BlockKind::ImageNeverPull, 1, 10, "ErrImageNeverPull"),
        (BlockKind::ImageNeverPull, 7, 300, "ErrImageNeverPull"),
        (BlockKind::Config, 1, 10, "CreateContainerConfigError"),
        (BlockKind::Config, 2, 20, "CreateContainerConfigError"),
        (BlockKind::Config, 9, 300, "CreateContainerConfigError"),
    ];
    for (kind, failures, after, shown) in table {
        let pod = one(Always);
        let mut obs = observed(&pod);
        for _ in 0..failures {
            obs.containers[0].on_start_blocked(kind, "m".into(), t(0.0), (0, 0));
        }
        let case = format!("{kind:?} x{failures}");
        let d = sync_pod(&pod, &obs, t(2.0));
        assert_eq!(reason(&d, 0), shown, "{case}");
        assert_eq!(d.wake_at, Some(t(after as f64)), "{case}");
        assert!(d.actions.is_empty(), "{case}");
        assert_eq!(
            starts(&sync_pod(&pod, &obs, t(after as f64))).len(),
            1,
            "{case}"
        );
    }
}

#[test]
fn a_loaded_image_ends_any_blocked_wait_at_once() {
    for kind in [
        BlockKind::Image,
        BlockKind::ImageNeverPull,
        BlockKind::Config,
    ] {
        let pod = one(Always);
        let mut obs = observed(&pod);
        obs.containers[0].on_start_blocked(kind, "m".into(), t(0.0), (0, 0));
        assert!(sync_pod(&pod, &obs, t(1.0)).actions.is_empty());
        obs.on_image_loaded();
        assert_eq!(starts(&sync_pod(&pod, &obs, t(1.0))).len(), 1, "{kind:?}");
    }
}

#[test]
fn a_started_container_forgets_its_blocked_streak() {
    let pod = one(Always);
    let mut obs = observed(&pod);
    let c = &mut obs.containers[0];
    c.on_start_blocked(BlockKind::Image, "m".into(), t(0.0), (0, 0));
    c.on_start_blocked(BlockKind::Image, "m".into(), t(10.0), (0, 0));
    c.on_started(0, t(30.0), "podhost://a0".into());
    c.on_exited(0, exit(1, 30.0, 31.0), true);
    c.on_start_blocked(BlockKind::Image, "m".into(), t(31.0), (0, 0));
    assert_eq!(sync_pod(&pod, &obs, t(32.0)).wake_at, Some(t(41.0)));
}

#[test]
fn a_failed_start_counts_as_an_exit_and_uses_its_attempt() {
    let pod = one(Always);
    let mut obs = observed(&pod);
    step(&pod, &mut obs, t(0.0));
    let mut failed = exit(128, 0.0, 0.0);
    failed.reason = Some("StartError".into());
    failed.message = Some("shim did not start".into());
    obs.containers[0].on_exited(0, failed, true);
    let d = step(&pod, &mut obs, t(0.0));
    assert_eq!(starts(&d), vec![("app".to_string(), 1)]);
    let d = sync_pod(&pod, &obs, t(0.0));
    let last = d.status.container_statuses[0]
        .last_state
        .clone()
        .unwrap_or_default();
    assert_eq!(
        last.terminated.and_then(|t| t.reason).as_deref(),
        Some("StartError")
    );
}

#[test]
fn containers_of_one_pod_are_decided_independently() {
    let pod = pod(Always, &[("a", Hook::None), ("b", Hook::None)]);
    let mut obs = observed(&pod);
    let d = step(&pod, &mut obs, t(0.0));
    assert_eq!(starts(&d).len(), 2);
    obs.containers[0].on_started(0, t(0.1), "podhost://a".into());
    let d = step(&pod, &mut obs, t(0.2));
    assert_eq!(d.status.phase, PodPhase::Pending, "b has not started");
    obs.containers[1].on_started(0, t(0.3), "podhost://b".into());
    obs.containers[1].on_exited(0, exit(3, 0.3, 0.4), true);
    let d = step(&pod, &mut obs, t(0.5));
    assert_eq!(starts(&d), vec![("b".to_string(), 1)]);
    assert_eq!(d.status.phase, PodPhase::Running);
}

#[test]
fn never_pull_shows_err_image_never_pull_and_no_back_off_event() {
    let pod = one(Always);
    let mut obs = observed(&pod);
    step(&pod, &mut obs, t(0.0));
    obs.containers[0].on_start_blocked(
        BlockKind::ImageNeverPull,
        "not present".into(),
        t(0.0),
        (0, 0),
    );
    for at in [0.1, 1.5, 5.0, 9.9] {
        let d = step(&pod, &mut obs, t(at));
        assert_eq!(reason(&d, 0), "ErrImageNeverPull", "at {at}");
        assert!(d.events.is_empty(), "at {at}");
    }
}

#[test]
fn err_image_pull_shows_no_longer_than_a_short_back_off() {
    let mut pod = one(Always);
    pod.backoff = BackoffPolicy {
        initial: Duration::from_millis(200),
        max: Duration::from_millis(500),
    };
    let mut obs = observed(&pod);
    step(&pod, &mut obs, t(0.0));
    obs.containers[0].on_start_blocked(BlockKind::Image, "m".into(), t(0.0), (0, 0));
    let d = step(&pod, &mut obs, t(0.1));
    assert_eq!(reason(&d, 0), "ErrImagePull");
    assert_eq!(d.wake_at, Some(t(0.2)));
    assert_eq!(starts(&step(&pod, &mut obs, t(0.2))).len(), 1);
}

#[test]
fn phase_of_blocked_containers() {
    // Never ran: Pending. Blocked after an exit (a restart that cannot start): Running.
    let pod = one(Always);
    let mut obs = observed(&pod);
    obs.containers[0].on_start_blocked(BlockKind::Config, "m".into(), t(0.0), (0, 0));
    assert_eq!(sync_pod(&pod, &obs, t(1.0)).status.phase, PodPhase::Pending);
    let mut obs = exited_once(&pod, 1);
    begin_start(&mut obs.containers[0], t(1.0), Default::default());
    obs.containers[0].on_start_blocked(BlockKind::Config, "m".into(), t(1.0), (0, 0));
    let d = sync_pod(&pod, &obs, t(2.0));
    assert_eq!(d.status.phase, PodPhase::Running);
    let cs = &d.status.container_statuses[0];
    assert_eq!(cs.restart_count, 0, "nothing ran in the blocked attempt");
    assert!(
        cs.last_state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .is_some()
    );
}

#[test]
fn a_blocked_retry_uses_the_attempt_after_the_last_that_ran() {
    let pod = one(Always);
    let mut obs = exited_once(&pod, 1);
    let d = step(&pod, &mut obs, t(1.0));
    assert_eq!(starts(&d), vec![("app".to_string(), 1)]);
    obs.containers[0].on_start_blocked(BlockKind::Config, "m".into(), t(1.0), (0, 0));
    let d = step(&pod, &mut obs, t(11.0));
    assert_eq!(
        starts(&d),
        vec![("app".to_string(), 1)],
        "attempt 1 never ran"
    );
}

#[test]
fn an_exit_not_yet_recorded_is_shown_but_the_phase_waits_for_the_record() {
    for (policy, code, final_phase) in [
        (Never, 0, PodPhase::Succeeded),
        (Never, 1, PodPhase::Failed),
        (OnFailure, 0, PodPhase::Succeeded),
    ] {
        let pod = one(policy);
        let mut obs = observed(&pod);
        obs.phase = Some(PodPhase::Running);
        let c = &mut obs.containers[0];
        begin_start(c, t(0.0), Default::default());
        c.on_started(0, t(0.0), "podhost://a0".into());
        c.on_exited(0, exit(code, 0.0, 1.0), false);
        c.on_exit_not_yet_recorded();
        let case = format!("{policy:?} exit {code}");
        let d = sync_pod(&pod, &obs, t(1.0));
        assert_eq!(d.status.phase, PodPhase::Running, "{case}");
        assert!(
            reason(&d, 0).starts_with("Terminated:"),
            "{case}: shown at once"
        );
        obs.containers[0].on_exit_recorded();
        let d = sync_pod(&pod, &obs, t(1.0));
        assert_eq!(d.status.phase, final_phase, "{case}");
        // The release implies the record (the shim fsyncs before its clean-up).
        obs.containers[0].on_exit_not_yet_recorded();
        obs.containers[0].on_released();
        assert_eq!(
            sync_pod(&pod, &obs, t(1.0)).status.phase,
            final_phase,
            "{case}"
        );
    }
}
