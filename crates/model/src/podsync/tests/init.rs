//! Init containers and sidecars (kubelet-semantics §1, §3): one by one to completion,
//! sidecars started in turn and kept running, the pod's phase and conditions meanwhile,
//! and the stop order (regular containers first, sidecars in reverse declaration order).

use super::*;
use crate::phase::PodPhase;
use RestartPolicy::{Always, Never, OnFailure};

/// A pod with these init containers (`true` = sidecar) and one regular container `app`.
fn pod_with_init(policy: RestartPolicy, init: &[(&str, bool)]) -> PodFacts {
    let mut p = pod(policy, &[("app", Hook::None)]);
    p.init_containers = init
        .iter()
        .map(|(n, sidecar)| ContainerFacts {
            kind: if *sidecar {
                ContainerKind::Sidecar
            } else {
                ContainerKind::Init
            },
            ..ContainerFacts::new(n, &format!("img-{n}"))
        })
        .collect();
    p
}

fn run(obs: &mut PodObserved, name: &str, attempt: u32, at: f64) {
    let c = obs.container_mut(name).expect("container");
    if !matches!(c.instance, Instance::Starting { .. }) {
        begin_start(c, t(at), Default::default());
    }
    c.on_started(attempt, t(at), format!("podhost://{name}{attempt}"));
}

fn end(obs: &mut PodObserved, name: &str, attempt: u32, code: i32, at: f64) {
    let c = obs.container_mut(name).expect("container");
    c.on_exited(attempt, exit(code, at - 1.0, at), true);
}

fn init_reason(d: &Decision, i: usize) -> String {
    let s = &d.init_container_states[i];
    if let Some(w) = &s.waiting {
        return w.reason.clone().unwrap_or_default();
    }
    if let Some(t) = &s.terminated {
        return format!("Terminated:{}", t.reason.clone().unwrap_or_default());
    }
    "Running".into()
}

fn condition(d: &Decision, kind: &str) -> String {
    d.status
        .conditions
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| c.status.clone())
        .unwrap_or_default()
}

#[test]
fn init_containers_run_one_by_one_before_the_app() {
    let pod = pod_with_init(Always, &[("one", false), ("two", false)]);
    let mut obs = observed(&pod);
    let d = step(&pod, &mut obs, t(0.0));
    assert_eq!(starts(&d), vec![("one".to_string(), 0)], "only the first");
    assert_eq!(init_reason(&d, 1), "PodInitializing");
    assert_eq!(reason(&d, 0), "PodInitializing");
    assert_eq!(d.status.phase, PodPhase::Pending);
    assert_eq!(condition(&d, "Initialized"), "False");
    run(&mut obs, "one", 0, 0.0);
    let d = step(&pod, &mut obs, t(0.5));
    assert!(starts(&d).is_empty(), "two waits while one runs");
    end(&mut obs, "one", 0, 0, 1.0);
    let d = step(&pod, &mut obs, t(1.0));
    assert_eq!(starts(&d), vec![("two".to_string(), 0)]);
    assert_eq!(init_reason(&d, 0), "Terminated:Completed");
    run(&mut obs, "two", 0, 1.0);
    end(&mut obs, "two", 0, 0, 2.0);
    let d = step(&pod, &mut obs, t(2.0));
    assert_eq!(starts(&d), vec![("app".to_string(), 0)]);
    assert_eq!(condition(&d, "Initialized"), "True");
    run(&mut obs, "app", 0, 2.0);
    let d = step(&pod, &mut obs, t(3.0));
    assert!(
        starts(&d).is_empty(),
        "completed init containers never run again"
    );
    assert_eq!(d.status.phase, PodPhase::Running);
    assert_eq!(condition(&d, "Ready"), "True");
    assert!(d.status.init_container_statuses.iter().all(|s| s.ready));
}

#[test]
fn a_failing_init_container_under_each_restart_policy() {
    // (policy, restarted, phase)
    for (policy, restarted, phase) in [
        (Always, true, PodPhase::Pending),
        (OnFailure, true, PodPhase::Pending),
        (Never, false, PodPhase::Failed),
    ] {
        let pod = pod_with_init(policy, &[("one", false)]);
        let mut obs = observed(&pod);
        step(&pod, &mut obs, t(0.0));
        run(&mut obs, "one", 0, 0.0);
        end(&mut obs, "one", 0, 1, 1.0);
        let d = step(&pod, &mut obs, t(1.0));
        assert_eq!(!starts(&d).is_empty(), restarted, "{policy:?}");
        assert_eq!(d.status.phase, phase, "{policy:?}");
        assert_eq!(
            reason(&d, 0),
            "PodInitializing",
            "{policy:?}: app never starts"
        );
        if restarted {
            // The second failure backs off as CrashLoopBackOff.
            run(&mut obs, "one", 1, 1.0);
            end(&mut obs, "one", 1, 1, 2.0);
            let d = step(&pod, &mut obs, t(2.0));
            assert!(starts(&d).is_empty(), "{policy:?}");
            assert_eq!(init_reason(&d, 0), "CrashLoopBackOff", "{policy:?}");
            assert_eq!(d.wake_at, Some(t(12.0)), "{policy:?}");
        }
        let d = step(&pod, &mut obs, t(500.0));
        assert!(
            d.actions.iter().all(|a| a.container() == "one"),
            "{policy:?}: the app waits"
        );
    }
}

#[test]
fn an_oom_killed_init_container_counts_as_failed() {
    let pod = pod_with_init(Never, &[("one", false)]);
    let mut obs = observed(&pod);
    step(&pod, &mut obs, t(0.0));
    run(&mut obs, "one", 0, 0.0);
    let mut oom = exit(0, 0.0, 1.0);
    oom.reason = Some("OOMKilled".into());
    obs.init_containers[0].on_exited(0, oom, true);
    let d = step(&pod, &mut obs, t(1.0));
    assert_eq!(d.status.phase, PodPhase::Failed);
    assert!(starts(&d).is_empty());
}

#[test]
fn a_sidecar_holds_the_next_one_until_started_then_keeps_running() {
    let mut pod = pod_with_init(Always, &[("proxy", true), ("setup", false)]);
    pod.init_containers[0].startup_probe = Some(ProbeFacts::default());
    let mut obs = observed(&pod);
    let d = step(&pod, &mut obs, t(0.0));
    assert_eq!(starts(&d), vec![("proxy".to_string(), 0)]);
    run(&mut obs, "proxy", 0, 0.0);
    let d = step(&pod, &mut obs, t(1.0));
    assert!(starts(&d).is_empty(), "startupProbe not passed yet");
    assert_eq!(init_reason(&d, 0), "Running");
    assert_eq!(d.status.init_container_statuses[0].started, Some(false));
    obs.init_containers[0].on_probe_result(ProbeKind::Startup, ProbeResult::Success, String::new());
    let d = step(&pod, &mut obs, t(2.0));
    assert_eq!(starts(&d), vec![("setup".to_string(), 0)]);
    assert_eq!(d.status.init_container_statuses[0].started, Some(true));
    run(&mut obs, "setup", 0, 2.0);
    end(&mut obs, "setup", 0, 0, 3.0);
    let d = step(&pod, &mut obs, t(3.0));
    assert_eq!(starts(&d), vec![("app".to_string(), 0)]);
    run(&mut obs, "app", 0, 3.0);
    // The sidecar crashes: restarted (Always, whatever the pod's policy), the app stays.
    end(&mut obs, "proxy", 0, 1, 10.0);
    let d = step(&pod, &mut obs, t(10.0));
    assert_eq!(starts(&d), vec![("proxy".to_string(), 1)]);
    assert_eq!(condition(&d, "Initialized"), "True");
    assert_eq!(condition(&d, "Ready"), "False", "a sidecar that is down");
}

#[test]
fn sidecars_restart_even_when_the_pod_says_never() {
    let pod = pod_with_init(Never, &[("proxy", true)]);
    let mut obs = observed(&pod);
    step(&pod, &mut obs, t(0.0));
    run(&mut obs, "proxy", 0, 0.0);
    let d = step(&pod, &mut obs, t(0.5));
    assert_eq!(starts(&d), vec![("app".to_string(), 0)]);
    run(&mut obs, "app", 0, 0.5);
    end(&mut obs, "proxy", 0, 0, 5.0);
    let d = step(&pod, &mut obs, t(5.0));
    assert_eq!(starts(&d), vec![("proxy".to_string(), 1)]);
}

#[test]
fn a_job_like_pod_completes_when_its_regular_containers_do_and_its_sidecar_is_stopped() {
    let pod = pod_with_init(Never, &[("proxy", true)]);
    let mut obs = observed(&pod);
    step(&pod, &mut obs, t(0.0));
    run(&mut obs, "proxy", 0, 0.0);
    step(&pod, &mut obs, t(0.5));
    run(&mut obs, "app", 0, 0.5);
    end(&mut obs, "app", 0, 0, 5.0);
    let d = step(&pod, &mut obs, t(5.0));
    assert_eq!(d.status.phase, PodPhase::Succeeded);
    assert_eq!(
        d.actions,
        vec![Action::Signal {
            container: "proxy".into(),
            signal: SignalKind::Stop { grace: secs(30) }
        }]
    );
    end(&mut obs, "proxy", 0, 143, 6.0);
    let d = step(&pod, &mut obs, t(6.0));
    assert!(d.actions.is_empty(), "the sidecar is not restarted");
    assert_eq!(d.status.phase, PodPhase::Succeeded);
    assert!(
        !d.pod_done,
        "a static pod stays listed until its manifest goes"
    );
}

#[test]
fn on_termination_sidecars_stop_after_the_regular_containers_in_reverse_order() {
    let mut pod = pod_with_init(Always, &[("first", true), ("second", true)]);
    pod.init_containers[1].pre_stop = Hook::Exec;
    let mut obs = observed(&pod);
    for (i, name) in ["first", "second", "app"].iter().enumerate() {
        step(&pod, &mut obs, t(i as f64));
        run(&mut obs, name, 0, i as f64);
    }
    obs.on_terminate(t(10.0), secs(30));
    let d = step(&pod, &mut obs, t(10.0));
    // The app gets its stop signal, the second sidecar's preStop runs at once, and the
    // first sidecar waits.
    assert_eq!(
        d.actions,
        vec![
            Action::RunPreStop {
                container: "second".into(),
                timeout: secs(30)
            },
            Action::Signal {
                container: "app".into(),
                signal: SignalKind::Stop { grace: secs(30) }
            },
        ]
    );
    obs.container_mut("second")
        .expect("c")
        .on_hook_ended(t(11.0), None);
    let d = step(&pod, &mut obs, t(11.0));
    assert!(d.actions.is_empty(), "second waits for the app");
    end(&mut obs, "app", 0, 143, 12.0);
    let d = step(&pod, &mut obs, t(12.0));
    assert_eq!(
        d.actions,
        vec![Action::Signal {
            container: "second".into(),
            signal: SignalKind::Stop { grace: secs(28) }
        }],
        "its wait and hook (2 s) are deducted"
    );
    end(&mut obs, "second", 0, 143, 13.0);
    let d = step(&pod, &mut obs, t(13.0));
    assert_eq!(
        d.actions,
        vec![Action::Signal {
            container: "first".into(),
            signal: SignalKind::Stop { grace: secs(27) }
        }]
    );
    end(&mut obs, "first", 0, 143, 14.0);
    let d = step(&pod, &mut obs, t(14.0));
    assert!(d.pod_done);
}

#[test]
fn a_sidecar_waiting_for_its_turn_is_signalled_when_the_grace_is_over() {
    let pod = pod_with_init(Always, &[("proxy", true)]);
    let mut obs = observed(&pod);
    step(&pod, &mut obs, t(0.0));
    run(&mut obs, "proxy", 0, 0.0);
    step(&pod, &mut obs, t(1.0));
    run(&mut obs, "app", 0, 1.0);
    obs.on_terminate(t(10.0), secs(5));
    let d = step(&pod, &mut obs, t(10.0));
    assert_eq!(d.actions.len(), 1, "only the app");
    assert_eq!(d.wake_at, Some(t(15.0)));
    let d = step(&pod, &mut obs, t(15.0));
    assert_eq!(
        d.actions,
        vec![
            Action::Signal {
                container: "proxy".into(),
                signal: SignalKind::Stop { grace: secs(2) }
            },
            Action::Signal {
                container: "app".into(),
                signal: SignalKind::Kill
            },
        ]
    );
}

/// A condition's (reason, message), empty strings for none.
fn explained(d: &Decision, kind: &str) -> (String, String) {
    let c = d
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == kind)
        .expect(kind);
    (
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    )
}

#[test]
fn false_conditions_name_the_incomplete_and_unready_containers_in_the_kubelets_words() {
    let pod = pod_with_init(Always, &[("init1", false), ("init2", false)]);
    let mut obs = observed(&pod);
    let d = step(&pod, &mut obs, t(0.0));
    // Every container of a pod with init containers waits as PodInitializing before
    // it has an instance, the init container being started included.
    assert_eq!(init_reason(&d, 0), "PodInitializing");
    assert_eq!(init_reason(&d, 1), "PodInitializing");
    run(&mut obs, "init1", 0, 0.0);
    end(&mut obs, "init1", 0, 1, 1.0);
    let d = step(&pod, &mut obs, t(1.0));
    // What Kubernetes' conformance test of a failing init container expects, word for word.
    assert_eq!(
        explained(&d, "Initialized"),
        (
            "ContainersNotInitialized".into(),
            "containers with incomplete status: [init1 init2]".into()
        )
    );
    let unready = (
        "ContainersNotReady".to_string(),
        "containers with unready status: [app]".to_string(),
    );
    assert_eq!(explained(&d, "ContainersReady"), unready);
    assert_eq!(explained(&d, "Ready"), unready);
    // Once it all runs, no reason is left behind.
    run(&mut obs, "init1", 1, 11.0);
    end(&mut obs, "init1", 1, 0, 12.0);
    step(&pod, &mut obs, t(12.0));
    run(&mut obs, "init2", 0, 12.0);
    end(&mut obs, "init2", 0, 0, 13.0);
    step(&pod, &mut obs, t(13.0));
    run(&mut obs, "app", 0, 13.0);
    let d = step(&pod, &mut obs, t(14.0));
    for kind in ["Initialized", "ContainersReady", "Ready"] {
        assert_eq!(
            explained(&d, kind),
            (String::new(), String::new()),
            "{kind}"
        );
    }
}
