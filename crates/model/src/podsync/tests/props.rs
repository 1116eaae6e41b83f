//! Property tests: random observation sequences (exits, blocked starts, hook ends, shim
//! releases, image loads, termination orders, time passing) against the core's invariants.

use super::*;
use crate::phase::PodPhase;

/// What the simulated world does between syncs.
struct World {
    rng: fastrand::Rng,
    now_ms: i64,
    /// Containers whose Start action began and which have no outcome yet.
    terminate_at_step: Option<usize>,
}

impl World {
    fn now(&self) -> DateTime<Utc> {
        t(0.0) + chrono::Duration::milliseconds(self.now_ms)
    }
}

#[derive(Default)]
struct Seen {
    /// Per container: attempts that were started and ran.
    ran: Vec<Vec<u32>>,
    terminal_phase: Option<PodPhase>,
    terminated: bool,
    restart_counts: Vec<i32>,
}

fn random_pod(rng: &mut fastrand::Rng) -> PodFacts {
    let policy = [
        RestartPolicy::Always,
        RestartPolicy::OnFailure,
        RestartPolicy::Never,
    ][rng.usize(..3)];
    let n = rng.usize(1..4);
    let names: Vec<String> = (0..n).map(|i| format!("c{i}")).collect();
    let hooks: Vec<Hook> = (0..n)
        .map(|_| match rng.u8(..3) {
            0 => Hook::None,
            1 => Hook::Exec,
            _ => Hook::Sleep(secs(rng.u64(0..40))),
        })
        .collect();
    let refs: Vec<(&str, Hook)> = names.iter().map(String::as_str).zip(hooks).collect();
    let mut p = pod(policy, &refs);
    for c in &mut p.containers {
        decorate(rng, c);
    }
    p.init_containers = (0..rng.usize(0..3))
        .map(|i| {
            let kind = if rng.bool() {
                ContainerKind::Sidecar
            } else {
                ContainerKind::Init
            };
            let mut c = ContainerFacts {
                kind,
                ..ContainerFacts::new(&format!("i{i}"), "img")
            };
            decorate(rng, &mut c);
            c
        })
        .collect();
    if rng.u8(..5) == 0 {
        p.active_deadline = Some(secs(rng.u64(1..60)));
    }
    if rng.bool() {
        p.backoff = BackoffPolicy {
            initial: Duration::from_millis(200),
            max: Duration::from_millis(500),
        };
    }
    p
}

/// Random probes and a postStart hook.
fn decorate(rng: &mut fastrand::Rng, c: &mut ContainerFacts) {
    let probe = |rng: &mut fastrand::Rng| {
        rng.bool().then(|| ProbeFacts {
            termination_grace: rng.bool().then(|| secs(rng.u64(1..10))),
        })
    };
    c.startup_probe = probe(rng);
    c.liveness_probe = probe(rng);
    c.readiness_probe = rng.bool();
    if rng.u8(..3) == 0 {
        c.post_start = Hook::Exec;
    }
}

fn all_mut(obs: &mut PodObserved) -> Vec<&mut ContainerObserved> {
    obs.init_containers
        .iter_mut()
        .chain(obs.containers.iter_mut())
        .collect()
}

/// Applies one random observation that the real world could produce now.
fn observe(world: &mut World, obs: &mut PodObserved, seen: &mut Seen) {
    let now = world.now();
    let generation = obs.image_generation;
    let mut all = all_mut(obs);
    let i = world.rng.usize(..all.len());
    let rng = &mut world.rng;
    let c = &mut *all[i];
    match c.instance.clone() {
        Instance::Starting { .. } => match rng.u8(..4) {
            0 | 1 => {
                let attempt = c.next_attempt;
                seen.ran[i].push(attempt);
                c.on_started(attempt, now, format!("podhost://{i}-{attempt}"));
            }
            2 => {
                let kind = [
                    BlockKind::Image,
                    BlockKind::ImageNeverPull,
                    BlockKind::Config,
                ][rng.usize(..3)];
                c.on_start_blocked(kind, "blocked".into(), now, (generation, 0));
            }
            _ => {
                let attempt = c.next_attempt;
                seen.ran[i].push(attempt);
                let mut failed = exit(128, 0.0, 0.0);
                (failed.started_at, failed.finished_at) = (now, now);
                failed.reason = Some("StartError".into());
                c.on_exited(attempt, failed, true);
            }
        },
        Instance::Running { started_at } => {
            let hook_running = matches!(c.stop.hook, HookProgress::Running { .. });
            let post_start_running = matches!(c.post_start, HookProgress::Running { .. });
            if post_start_running && rng.bool() {
                let failure = (rng.u8(..4) == 0).then(|| "postStart failed".to_string());
                c.on_post_start_ended(now, failure);
            } else if rng.u8(..3) == 0 {
                let kind = [
                    ProbeKind::Startup,
                    ProbeKind::Liveness,
                    ProbeKind::Readiness,
                ][rng.usize(..3)];
                let result = [ProbeResult::Success, ProbeResult::Failure][rng.usize(..2)];
                c.on_probe_result(kind, result, "probe".into());
            } else if hook_running && rng.bool() {
                let failure = rng.bool().then(|| "hook failed".to_string());
                c.on_hook_ended(now, failure);
            } else if rng.u8(..3) == 0 || c.stop.kill_sent_at.is_some() {
                let code = [0, 1, 2, 137][rng.usize(..4)];
                let mut e = exit(code, 0.0, 0.0);
                (e.started_at, e.finished_at) = (started_at, now);
                c.on_exited(c.restart_count, e, rng.bool());
            }
        }
        Instance::Exited {
            released: false, ..
        } => c.on_released(),
        _ => {}
    }
    drop(all);
    if world.rng.u8(..20) == 0 {
        obs.on_image_loaded();
    }
}

/// The index and observed state of `name` (the core only names spec containers).
fn find<'a>(obs: &'a PodObserved, name: &str) -> (usize, &'a ContainerObserved) {
    let i = obs.all().position(|c| c.name == name);
    let i = i.unwrap_or_else(|| panic!("action for unknown container {name}"));
    (i, obs.all().nth(i).unwrap_or_else(|| unreachable!()))
}

fn spec_at(pod: &PodFacts, i: usize) -> &ContainerFacts {
    pod.init_containers
        .iter()
        .chain(&pod.containers)
        .nth(i)
        .unwrap_or_else(|| unreachable!())
}

/// Nothing starts out of order: a regular container only once every init container
/// completed and every sidecar started; an init container only after those before it.
fn check_order(pod: &PodFacts, obs: &PodObserved, action: &Action, case: &str) {
    let Action::Start { container, .. } = action else {
        return;
    };
    let (i, c) = find(obs, container);
    if c.started_once || c.next_attempt > 0 {
        return; // a restart, not a first start
    }
    let before = i.min(pod.init_containers.len());
    for (spec, o) in pod
        .init_containers
        .iter()
        .zip(&obs.init_containers)
        .take(before)
    {
        let through = match spec.kind {
            ContainerKind::Sidecar => o.started_once || crate::podsync::health::started(spec, o),
            _ => matches!(&o.instance, Instance::Exited { termination, .. }
                if termination.exit_code == 0 && termination.reason.is_none()),
        };
        assert!(
            through,
            "{case}: {container} started before {} was through",
            spec.name
        );
    }
}

fn check_start(obs: &PodObserved, action: &Action, seen: &Seen, case: &str) {
    let Action::Start {
        container, attempt, ..
    } = action
    else {
        return;
    };
    assert!(
        !seen.terminated,
        "{case}: {container} started after the pod terminated"
    );
    let (i, c) = find(obs, container);
    let free = match &c.instance {
        Instance::None | Instance::Blocked(_) => true,
        Instance::Exited { released, .. } => *released,
        Instance::Starting { .. } | Instance::Running { .. } => false,
    };
    assert!(
        free,
        "{case}: second instance of {container} while {:?}",
        c.instance
    );
    assert!(
        !seen.ran[i].contains(attempt),
        "{case}: attempt {attempt} of {container} reused"
    );
}

fn check_signals(
    obs: &PodObserved,
    action: &Action,
    pod: &PodFacts,
    now: DateTime<Utc>,
    case: &str,
) {
    let Action::Signal { container, signal } = action else {
        return;
    };
    let (i, c) = find(obs, container);
    assert!(
        matches!(c.instance, Instance::Running { .. }),
        "{case}: signal to a container not running"
    );
    match signal {
        SignalKind::Stop { grace } => {
            assert!(*grace >= secs(2), "{case}: stop grace {grace:?} under 2 s");
            assert!(c.stop.stop_signal.is_none(), "{case}: stop signal twice");
            if spec_at(pod, i).pre_stop != Hook::None {
                assert!(
                    !matches!(c.stop.hook, HookProgress::NotRun),
                    "{case}: stop signal before preStop"
                );
            }
        }
        SignalKind::Kill => {
            let sent = c.stop.stop_signal.map(|(at, _)| at);
            assert!(
                sent.is_some_and(|at| now - at >= chrono::Duration::seconds(2)),
                "{case}: SIGKILL too early"
            );
            assert!(c.stop.kill_sent_at.is_none(), "{case}: SIGKILL twice");
        }
    }
}

fn run_case(seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let pod = random_pod(&mut rng);
    let steps = rng.usize(5..80);
    let terminate_at_step = rng.bool().then(|| rng.usize(0..steps));
    let mut world = World {
        rng,
        now_ms: 0,
        terminate_at_step,
    };
    let mut obs = observed(&pod);
    let mut seen = Seen {
        ran: vec![Vec::new(); pod.containers.len() + pod.init_containers.len()],
        ..Default::default()
    };
    let case = format!("seed {seed}");
    let mut done_at = None;
    for n in 0..steps + 400 {
        if Some(n) == world.terminate_at_step {
            let grace = secs(world.rng.u64(1..40));
            obs.on_terminate(world.now(), grace);
            seen.terminated = true;
        }
        let now = world.now();
        let d = sync_pod(&pod, &obs, now);
        // Invariants of one decision.
        for a in &d.actions {
            check_start(&obs, a, &seen, &case);
            check_order(&pod, &obs, a, &case);
            check_signals(&obs, a, &pod, now, &case);
        }
        if let Some(w) = d.wake_at {
            assert!(
                w > now || !d.actions.is_empty(),
                "{case}: wake-up in the past without an action"
            );
        }
        if let Some(terminal) = seen.terminal_phase {
            assert_eq!(d.status.phase, terminal, "{case}: left terminal phase");
        }
        if matches!(d.status.phase, PodPhase::Succeeded | PodPhase::Failed) {
            seen.terminal_phase = Some(d.status.phase);
        }
        let counts: Vec<i32> = d
            .status
            .container_statuses
            .iter()
            .map(|c| c.restart_count)
            .collect();
        for (old, new) in seen.restart_counts.iter().zip(&counts) {
            assert!(new >= old, "{case}: restart count went back");
        }
        seen.restart_counts = counts;
        obs.on_published(&d);
        fold_actions(&mut obs, &d, now);
        // Folding performed actions leaves nothing to do at the same instant.
        let again = sync_pod(&pod, &obs, now);
        assert!(
            again.actions.is_empty(),
            "{case}: repeated {:?}",
            again.actions
        );
        if d.pod_done {
            done_at.get_or_insert(now);
            break;
        }
        if n >= steps && !seen.terminated {
            break;
        }
        // Time passes: to the wake-up, or a random amount.
        let jump = match (d.wake_at, world.rng.bool()) {
            (Some(w), true) => (w - now).num_milliseconds().max(0),
            _ => world.rng.i64(0..3000),
        };
        world.now_ms += jump;
        // After termination the world kills promptly once SIGKILL went out.
        observe(&mut world, &mut obs, &mut seen);
    }
    if seen.terminated {
        assert!(
            done_at.is_some(),
            "{case}: the pod never finished terminating"
        );
    }
}

#[test]
fn invariants_hold_over_random_histories() {
    for seed in 0..3000 {
        run_case(seed);
    }
}
