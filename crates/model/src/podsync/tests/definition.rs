//! A container whose definition changed (an API pod's image updated): the kubelet kills
//! a running regular container or sidecar and starts it again with the new image,
//! whatever the restart policy, from no back-off (its back-off is keyed by the
//! container's hash); the next start of any container uses the new image.

use super::*;
use crate::k8s_time::to_k8s;
use crate::phase::PodPhase;
use RestartPolicy::{Always, Never};

/// `pod` with container `name`'s image replaced.
fn with_image(pod: &PodFacts, name: &str, image: &str) -> PodFacts {
    let mut changed = pod.clone();
    for c in changed
        .init_containers
        .iter_mut()
        .chain(changed.containers.iter_mut())
    {
        if c.name == name {
            c.image = image.to_string();
        }
    }
    changed
}

fn started_images(d: &Decision) -> Vec<(String, String)> {
    d.actions
        .iter()
        .filter_map(|a| match a {
            Action::Start {
                container, image, ..
            } => Some((container.clone(), image.clone())),
            _ => None,
        })
        .collect()
}

/// `app` started from its spec's image and running since 0 s.
fn running_app(pod: &PodFacts) -> PodObserved {
    let mut obs = observed(pod);
    let d = step(pod, &mut obs, t(0.0));
    assert_eq!(started_images(&d), [("app".into(), "img-app".into())]);
    obs.containers[0].on_started(0, t(0.0), "podhost://a0".into());
    obs
}

#[test]
fn a_running_container_whose_image_changed_is_killed_and_started_again_with_it() {
    for policy in [Always, Never] {
        let pod = one(policy);
        let mut obs = running_app(&pod);
        let new = with_image(&pod, "app", "img-v2");
        // The status shows the image that runs until the new one does.
        let d = step(&new, &mut obs, t(5.0));
        let status = &d.status.container_statuses[0];
        assert_eq!(status.image, "img-app", "{policy:?}");
        assert_eq!(
            signals(&d),
            [SignalKind::Stop { grace: secs(30) }],
            "{policy:?}: stopped with the pod's grace"
        );
        let killing: Vec<&str> = d
            .events
            .iter()
            .filter(|e| e.reason == "Killing")
            .map(|e| e.message.as_str())
            .collect();
        assert_eq!(
            killing,
            ["Container app definition changed, will be restarted"],
            "{policy:?}"
        );
        // It exits on the signal; whatever the policy, it starts again at once.
        obs.containers[0].on_exited(0, exit(143, 0.0, 6.0), true);
        let d = step(&new, &mut obs, t(6.0));
        assert_eq!(
            started_images(&d),
            [("app".into(), "img-v2".into())],
            "{policy:?}"
        );
        // Between the kill and the new start the status stays as it was (the kubelet
        // publishes none inside the sync that kills and starts): running since 0 s,
        // ready, the pod Ready.
        shown_as_before_the_kill(&d, policy);
        let d = step(&new, &mut obs, t(6.5));
        assert!(matches!(
            obs.containers[0].instance,
            Instance::Starting { .. }
        ));
        shown_as_before_the_kill(&d, policy);
        obs.containers[0].on_started(1, t(6.0), "podhost://a1".into());
        let d = step(&new, &mut obs, t(7.0));
        assert_eq!(reason(&d, 0), "Running", "{policy:?}");
        assert_eq!(d.status.container_statuses[0].image, "img-v2");
        assert!(signals(&d).is_empty(), "{policy:?}: the new one stays");
    }
}

/// `d` shows `app` as it was before its kill: running since 0 s, ready, no last state.
fn shown_as_before_the_kill(d: &Decision, policy: RestartPolicy) {
    let status = &d.status.container_statuses[0];
    let running = status.state.as_ref().and_then(|s| s.running.as_ref());
    assert_eq!(
        running.and_then(|r| r.started_at.clone()),
        Some(to_k8s(t(0.0))),
        "{policy:?}: {status:?}"
    );
    assert!(status.ready, "{policy:?}");
    assert_eq!(status.last_state, None, "{policy:?}");
    let ready = d.status.conditions.iter().find(|c| c.type_ == "Ready");
    assert_eq!(ready.map(|c| c.status.as_str()), Some("True"), "{policy:?}");
    assert_eq!(d.status.phase, PodPhase::Running, "{policy:?}");
}

#[test]
fn a_crash_looping_container_starts_at_once_with_a_new_image_and_its_back_off_starts_over() {
    let pod = one(Always);
    let mut obs = observed(&pod);
    let (mut now, mut attempt) = (0.0, 0u32);
    // Five quick crashes (restarts after 0, 10, 20 and 40 s): the next waits 80 s.
    while attempt < 5 {
        let d = step(&pod, &mut obs, t(now));
        if starts(&d).is_empty() {
            now = (d.wake_at.expect("a back-off") - t(0.0)).as_seconds_f64();
            continue;
        }
        obs.containers[0].on_started(attempt, t(now), format!("podhost://a{attempt}"));
        obs.containers[0].on_exited(attempt, exit(1, now, now + 1.0), true);
        now += 1.0;
        attempt += 1;
    }
    let d = step(&pod, &mut obs, t(now));
    assert_eq!(reason(&d, 0), "CrashLoopBackOff");
    assert_eq!(d.wake_at, Some(t(now + 80.0)));
    let new = with_image(&pod, "app", "img-v2");
    let d = step(&new, &mut obs, t(now + 1.0));
    assert_eq!(started_images(&d), [("app".into(), "img-v2".into())]);
    // It was not running: its new start shows as one, not as the crashed instance.
    let d = step(&new, &mut obs, t(now + 1.5));
    assert_eq!(reason(&d, 0), "ContainerCreating");
    assert!(!d.status.container_statuses[0].ready);
    // The next crash waits the first delay, 10 s, not 160 s.
    obs.containers[0].on_started(5, t(now + 1.0), "podhost://a5".into());
    obs.containers[0].on_exited(5, exit(1, now + 1.0, now + 2.0), true);
    let d = step(&new, &mut obs, t(now + 2.0));
    assert_eq!(reason(&d, 0), "CrashLoopBackOff");
    assert_eq!(d.wake_at, Some(t(now + 12.0)));
}

#[test]
fn a_container_that_ended_by_itself_follows_its_restart_policy_after_a_change() {
    let pod = one(Never);
    let mut obs = running_app(&pod);
    obs.containers[0].on_exited(0, exit(0, 0.0, 3.0), true);
    let d = step(&with_image(&pod, "app", "img-v2"), &mut obs, t(5.0));
    assert!(starts(&d).is_empty(), "{:?}", d.actions);
    assert_eq!(reason(&d, 0), "Terminated:Completed");
    // The terminated state's image is the one that ran.
    assert_eq!(d.status.container_statuses[0].image, "img-app");
}

#[test]
fn an_image_pull_back_off_ends_at_once_for_a_new_image() {
    let pod = one(Always);
    let mut obs = observed(&pod);
    step(&pod, &mut obs, t(0.0));
    for (failure, at) in [(1, 0.0), (2, 10.0), (3, 30.0)] {
        obs.containers[0].on_start_blocked(BlockKind::Image, "not found".into(), t(at), (0, 0));
        let Instance::Blocked(block) = &obs.containers[0].instance else {
            panic!("not blocked")
        };
        assert_eq!(block.failures, failure);
        if failure < 3 {
            let d = step(&pod, &mut obs, t(at + 40.0));
            assert_eq!(starts(&d).len(), 1);
        }
    }
    let d = step(&pod, &mut obs, t(31.0));
    assert!(starts(&d).is_empty(), "still backing off");
    let new = with_image(&pod, "app", "img-v2");
    let d = step(&new, &mut obs, t(32.0));
    assert_eq!(started_images(&d), [("app".into(), "img-v2".into())]);
    // The new image's failures count from one.
    obs.containers[0].on_start_blocked(BlockKind::Image, "not found".into(), t(33.0), (0, 0));
    let Instance::Blocked(block) = &obs.containers[0].instance else {
        panic!("not blocked")
    };
    assert_eq!(block.failures, 1);
}

#[test]
fn a_sidecar_is_restarted_with_its_new_image_but_a_running_init_container_is_not() {
    let mut pod = one(Always);
    pod.init_containers = [
        ("init", ContainerKind::Init),
        ("side", ContainerKind::Sidecar),
    ]
    .into_iter()
    .map(|(n, kind)| ContainerFacts {
        kind,
        ..ContainerFacts::new(n, &format!("img-{n}"))
    })
    .collect();
    let mut obs = observed(&pod);
    // `init` runs.
    let d = step(&pod, &mut obs, t(0.0));
    assert_eq!(started_images(&d), [("init".into(), "img-init".into())]);
    obs.container_mut("init")
        .expect("init")
        .on_started(0, t(0.0), "podhost://i0".into());
    let new = with_image(&pod, "init", "img-init-v2");
    let d = step(&new, &mut obs, t(1.0));
    assert!(d.actions.is_empty(), "{:?}", d.actions);
    // It completes; the sidecar starts and runs.
    obs.container_mut("init")
        .expect("init")
        .on_exited(0, exit(0, 0.0, 2.0), true);
    let d = step(&new, &mut obs, t(2.0));
    assert_eq!(started_images(&d), [("side".into(), "img-side".into())]);
    obs.container_mut("side")
        .expect("side")
        .on_started(0, t(2.0), "podhost://s0".into());
    step(&new, &mut obs, t(3.0));
    let new = with_image(&new, "side", "img-side-v2");
    let d = step(&new, &mut obs, t(4.0));
    assert_eq!(signals(&d), [SignalKind::Stop { grace: secs(30) }]);
    obs.container_mut("side")
        .expect("side")
        .on_exited(0, exit(143, 2.0, 5.0), true);
    let d = step(&new, &mut obs, t(5.0));
    assert!(started_images(&d).contains(&("side".into(), "img-side-v2".into())));
}

#[test]
fn an_adopted_instance_without_a_recorded_image_is_left_running() {
    let pod = one(Always);
    let mut obs = observed(&pod);
    obs.containers[0].on_started(0, t(0.0), "podhost://a0".into());
    assert_eq!(obs.containers[0].started_image, None);
    let d = step(&with_image(&pod, "app", "img-v2"), &mut obs, t(1.0));
    assert!(d.actions.is_empty(), "{:?}", d.actions);
}
