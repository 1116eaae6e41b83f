//! The sandbox decision: tables over observed sandbox facts × whether a container may
//! run × termination, and a property test over random sequences of daemon restarts,
//! checks, failed and repaired steps and time.

use super::*;
use SandboxStep::*;

fn all(state: StepState) -> SandboxObserved {
    SandboxObserved {
        steps: SandboxStep::ALL
            .into_iter()
            .map(|s| (s, state.clone()))
            .collect(),
        ..SandboxObserved::default()
    }
}

fn with(mut o: SandboxObserved, step: SandboxStep, state: StepState) -> SandboxObserved {
    o.steps.insert(step, state);
    o
}

fn missing(what: &str) -> StepState {
    StepState::Missing(what.into())
}

fn failed(failures: u32, at: f64) -> StepState {
    StepState::Failed {
        failures,
        at: t(at),
        message: "boom".into(),
    }
}

#[test]
fn a_fresh_pod_sets_every_step_up_in_order() {
    let plan = decide_sandbox(&SandboxObserved::unknown(false), t(0.0));
    assert_eq!(plan.run, SandboxStep::ALL.to_vec());
    assert!(!plan.recreate && !plan.ready);
    assert_eq!(plan.problem, None);
}

#[test]
fn an_adopted_pod_is_checked_step_by_step_without_a_recreation() {
    let plan = decide_sandbox(&SandboxObserved::unknown(true), t(0.0));
    assert_eq!(plan.run, SandboxStep::ALL.to_vec());
    assert!(!plan.recreate);
}

#[test]
fn a_ready_sandbox_needs_nothing() {
    for may_run in [false, true] {
        let mut o = all(StepState::Ready);
        o.containers_may_run = may_run;
        let plan = decide_sandbox(&o, t(0.0));
        assert!(plan.ready && plan.run.is_empty() && !plan.recreate);
        assert_eq!(plan.problem, None);
    }
}

/// (the part found missing, containers may run) -> (recreate, steps run)
#[test]
fn a_missing_part_is_repaired_alone_and_lost_namespaces_recreate_only_an_idle_pod() {
    let table: [(SandboxStep, bool, bool, Vec<SandboxStep>); 10] = [
        (Network, true, false, vec![Network]),
        (Network, false, false, vec![Network]),
        (DnsFiles, true, false, vec![DnsFiles]),
        (Volumes, true, false, vec![Volumes]),
        (Cgroup, true, false, vec![Cgroup]),
        (Cgroup, false, false, vec![Cgroup]),
        // Namespaces cannot be repaired under running containers: nothing that needs
        // them runs either; the problem is reported.
        (Namespaces, true, false, vec![]),
        (Namespaces, false, true, SandboxStep::ALL.to_vec()),
        (Volumes, false, false, vec![Volumes]),
        (DnsFiles, false, false, vec![DnsFiles]),
    ];
    for (step, may_run, recreate, run) in table {
        let mut o = with(all(StepState::Ready), step, missing("gone"));
        o.containers_may_run = may_run;
        let plan = decide_sandbox(&o, t(0.0));
        assert_eq!(
            plan.recreate, recreate,
            "{step:?} missing, may run {may_run}"
        );
        assert_eq!(plan.run, run, "{step:?} missing, may run {may_run}");
        assert!(!plan.ready);
        let problem = plan.problem.unwrap_or_default();
        assert!(
            problem.starts_with(step.describe()) && problem.contains("missing: gone"),
            "{problem}"
        );
    }
}

#[test]
fn a_terminating_pod_gets_no_repair_and_no_recreation() {
    for step in SandboxStep::ALL {
        for may_run in [false, true] {
            let mut o = with(all(StepState::Ready), step, missing("gone"));
            o.containers_may_run = may_run;
            o.terminating = true;
            let plan = decide_sandbox(&o, t(0.0));
            assert!(plan.run.is_empty() && !plan.recreate, "{step:?} {may_run}");
        }
    }
}

#[test]
fn a_failed_step_waits_out_its_backoff_then_runs_alone() {
    let o = with(all(StepState::Ready), Volumes, failed(3, 10.0));
    // 3 failures: 4 s.
    let early = decide_sandbox(&o, t(13.0));
    assert!(early.run.is_empty());
    assert_eq!(early.wake_at, Some(t(14.0)));
    assert!(!early.recreate);
    let due = decide_sandbox(&o, t(14.0));
    assert_eq!(due.run, vec![Volumes]);
    assert_eq!(due.wake_at, None);
    assert!(
        due.problem
            .unwrap_or_default()
            .contains("volumes failed: boom")
    );
}

#[test]
fn steps_wait_for_what_they_need() {
    // The network failed: the DNS files (they hold the addresses) wait for it.
    let o = with(
        with(all(StepState::Unknown), Network, failed(1, 0.0)),
        Namespaces,
        StepState::Ready,
    );
    let plan = decide_sandbox(&o, t(0.5));
    assert_eq!(plan.run, vec![Cgroup, Volumes]);
    assert_eq!(plan.wake_at, Some(t(1.0)));
    // Namespaces not made yet: only the cgroup and the namespaces run now (the rest
    // follows in the same pass, in order).
    let fresh = decide_sandbox(&SandboxObserved::unknown(false), t(0.0));
    assert_eq!(&fresh.run[..2], &[Cgroup, Namespaces]);
}

#[test]
fn a_pod_waiting_for_the_pod_cidr_waits_without_a_teardown_until_the_node_is_ready() {
    let mut o = with(
        all(StepState::Ready),
        Network,
        StepState::Waiting("no CIDR".into()),
    );
    o.steps.insert(DnsFiles, StepState::Unknown);
    for may_run in [false, true] {
        o.containers_may_run = may_run;
        let plan = decide_sandbox(&o, t(100.0));
        assert!(plan.run.is_empty() && !plan.recreate && plan.wake_at.is_none());
        assert_eq!(plan.problem.as_deref(), Some("network: no CIDR"));
    }
    o.on_node_ready();
    let plan = decide_sandbox(&o, t(100.0));
    assert_eq!(plan.run, vec![Network, DnsFiles]);
}

#[test]
fn failures_never_tear_down_and_back_off_up_to_two_minutes() {
    assert_eq!(
        on_step_failure(FailureKind::NodeNotReady, 5),
        FailureResponse::WaitForNode
    );
    let waits: Vec<u64> = (1..=10)
        .map(|n| match on_step_failure(FailureKind::Error, n) {
            FailureResponse::RetryStep { after } => after.as_secs(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 120, 120, 120]);
}

#[test]
fn the_failure_count_grows_per_step_and_resets_on_success() {
    let mut o = SandboxObserved::unknown(true);
    o.on_failed(Network, t(0.0), "a".into());
    o.on_failed(Network, t(1.0), "b".into());
    assert!(matches!(
        o.state(Network),
        StepState::Failed { failures: 2, .. }
    ));
    o.on_ready(Network);
    o.on_failed(Network, t(2.0), "c".into());
    assert!(matches!(
        o.state(Network),
        StepState::Failed { failures: 1, .. }
    ));
}

#[test]
fn a_sandbox_problem_makes_the_pod_unready_with_the_reason() {
    let p = one(RestartPolicy::Always);
    let mut o = observed(&p);
    begin_start(&mut o.containers[0], t(0.0), Default::default());
    o.containers[0].on_started(0, t(0.0), "id".into());
    let ready = sync_pod(&p, &o, t(1.0)).status;
    let cond = |s: &PodStatusView, kind: &str| {
        s.conditions
            .iter()
            .find(|c| c.type_ == kind)
            .cloned()
            .unwrap_or_else(|| panic!("no {kind}"))
    };
    assert_eq!(cond(&ready, "Ready").status, "True");
    o.conditions = ready.conditions.clone();
    o.sandbox_problem = Some("network missing: veth gone".into());
    let broken = sync_pod(&p, &o, t(2.0)).status;
    for kind in ["Ready", "PodReadyToStartContainers"] {
        let c = cond(&broken, kind);
        assert_eq!(c.status, "False", "{kind}");
        assert_eq!(c.reason.as_deref(), Some("PodSandboxNotReady"));
        assert_eq!(c.message.as_deref(), Some("network missing: veth gone"));
    }
    assert_eq!(cond(&broken, "ContainersReady").status, "True");
    o.conditions = broken.conditions.clone();
    o.sandbox_problem = None;
    let repaired = sync_pod(&p, &o, t(3.0)).status;
    let c = cond(&repaired, "Ready");
    assert_eq!((c.status.as_str(), c.reason), ("True", None));
}

/// Random sequences of what a sandbox lives through: daemon restarts (every step
/// unknown again, containers maybe still running), checks that find parts missing, set-up
/// steps that fail or succeed, the node's podCIDR arriving, containers exiting,
/// termination, time passing.
#[test]
fn no_decision_recreates_the_sandbox_of_a_pod_whose_container_may_run() {
    for seed in 0..400u64 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut o = SandboxObserved::unknown(rng.bool());
        let mut now = 0.0;
        for _ in 0..60 {
            let plan = decide_sandbox(&o, t(now));
            assert!(
                !plan.recreate || !o.containers_may_run || o.terminating,
                "seed {seed}: recreation of a sandbox with running containers: {o:?}"
            );
            assert!(
                !(o.terminating && (plan.recreate || !plan.run.is_empty())),
                "seed {seed}: repairs while terminating"
            );
            if plan.ready {
                assert!(plan.problem.is_none() && plan.run.is_empty());
            }
            if let Some(wake) = plan.wake_at {
                assert!(wake > t(now), "seed {seed}: a wake-up in the past");
            }
            if plan.recreate {
                o.on_recreated();
            }
            // The worker runs the steps in order and stops at the first failure.
            for step in &plan.run {
                match rng.u8(..6) {
                    0 => {
                        o.on_failed(*step, t(now), "injected".into());
                        break;
                    }
                    1 if *step == Network => {
                        o.on_waiting(*step, "no CIDR".into());
                        break;
                    }
                    _ => o.on_ready(*step),
                }
            }
            match rng.u8(..10) {
                0 => o = SandboxObserved::unknown(o.containers_may_run),
                1 => {
                    let step = SandboxStep::ALL[rng.usize(..5)];
                    o.on_missing(step, "found gone".into());
                }
                2 => o.on_node_ready(),
                3 => o.containers_may_run = !o.containers_may_run,
                4 if rng.u8(..4) == 0 => o.terminating = true,
                _ => {}
            }
            now += rng.f64() * 30.0;
        }
    }
}
