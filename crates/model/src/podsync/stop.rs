//! Stopping containers: preStop, then the stop signal with what is left of the grace
//! period (at least 2 s), then SIGKILL (kubelet-semantics §1). The same sequence serves a
//! terminating pod and one container killed for a failed probe or postStart hook.
//!
//! When the pod stops, regular (and running init) containers stop at once; each sidecar
//! runs its preStop at once too, but gets its stop signal only after every regular
//! container and every sidecar declared after it has exited, or when the grace period is
//! over (the kubelet's termination ordering).

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::ContainerState;

use super::super::grace::{MINIMUM_STOP_GRACE, stop_grace_after_hook};
use super::action::{Action, Decision, SignalKind};
use super::observed::{ContainerObserved, HookProgress, Instance, TerminationOrder};
use super::status::{running, starting, terminated_state, waiting};
use super::{ContainerFacts, ContainerKind, Hook, PodFacts, PodObserved};

/// When the stop signal may go out.
#[derive(Debug, Clone, Copy)]
pub(super) enum SignalGate {
    /// As soon as the preStop hook is done.
    Now,
    /// A sidecar: once `clear` (the containers it waits for have exited), or at `deadline`.
    Turn {
        clear: bool,
        deadline: DateTime<Utc>,
    },
}

/// Decides for every container of a stopping pod; returns the init and regular states.
pub(super) fn decide_pod(
    pod: &PodFacts,
    observed: &PodObserved,
    order: &TerminationOrder,
    initialized: bool,
    now: DateTime<Utc>,
    out: &mut Decision,
) -> (Vec<ContainerState>, Vec<ContainerState>) {
    // A regular container that never started: still waiting for the init containers.
    let unstarted = if initialized {
        "ContainerCreating"
    } else {
        "PodInitializing"
    };
    let regular_settled = observed.containers.iter().all(is_stopped)
        && observed.ephemeral_containers.iter().all(is_stopped)
        && pod
            .init_containers
            .iter()
            .zip(&observed.init_containers)
            .filter(|(s, _)| s.kind == ContainerKind::Init)
            .all(|(_, o)| is_stopped(o));
    let deadline = order.since + order.grace;
    let mut init_states = Vec::new();
    for (i, (spec, obs)) in pod
        .init_containers
        .iter()
        .zip(&observed.init_containers)
        .enumerate()
    {
        let gate = match spec.kind {
            ContainerKind::Sidecar => SignalGate::Turn {
                clear: regular_settled
                    && pod.init_containers[i + 1..]
                        .iter()
                        .zip(&observed.init_containers[i + 1..])
                        .filter(|(s, _)| s.kind == ContainerKind::Sidecar)
                        .all(|(_, o)| is_stopped(o)),
                deadline,
            },
            _ => SignalGate::Now,
        };
        init_states.push(decide(
            spec,
            obs,
            order.grace,
            gate,
            "PodInitializing",
            now,
            out,
        ));
    }
    let states = pod
        .containers
        .iter()
        .zip(&observed.containers)
        .chain(
            pod.ephemeral_containers
                .iter()
                .zip(&observed.ephemeral_containers),
        )
        .map(|(spec, obs)| decide(spec, obs, order.grace, SignalGate::Now, unstarted, now, out))
        .collect();
    (init_states, states)
}

/// Nothing of the container runs any more (its shim may still be releasing).
fn is_stopped(obs: &ContainerObserved) -> bool {
    !matches!(
        obs.instance,
        Instance::Running { .. } | Instance::Starting { .. }
    )
}

/// One container's state while the pod stops; a running instance is stopped. Nothing
/// starts.
fn decide(
    spec: &ContainerFacts,
    obs: &ContainerObserved,
    grace: Duration,
    gate: SignalGate,
    unstarted: &str,
    now: DateTime<Utc>,
    out: &mut Decision,
) -> ContainerState {
    match &obs.instance {
        Instance::None => waiting(unstarted, None),
        Instance::Starting { .. } => starting(obs, unstarted),
        Instance::Blocked(block) => {
            waiting(blocked_reason(block.kind), Some(block.message.clone()))
        }
        Instance::Exited { termination, .. } => terminated_state(termination),
        Instance::Running { started_at } => {
            let killing = format!("Stopping container {}", spec.name);
            stop_instance(spec, obs, grace, &killing, gate, now, out);
            running(*started_at)
        }
    }
}

fn blocked_reason(kind: super::BlockKind) -> &'static str {
    match kind {
        super::BlockKind::Image => "ErrImagePull",
        super::BlockKind::ImageNeverPull => "ErrImageNeverPull",
        super::BlockKind::Config => "CreateContainerConfigError",
    }
}

/// Stops the running instance `obs` with `grace`: the `Killing` event (with `killing` as
/// its message), the preStop hook, the stop signal when `gate` allows, SIGKILL when the
/// stop signal's grace is over.
pub(super) fn stop_instance(
    spec: &ContainerFacts,
    obs: &ContainerObserved,
    grace: Duration,
    killing: &str,
    gate: SignalGate,
    now: DateTime<Utc>,
    out: &mut Decision,
) {
    let name = &spec.name;
    if let Some((sent_at, stop_grace)) = obs.stop.stop_signal {
        if obs.stop.kill_sent_at.is_some() {
            return;
        }
        // A shorter grace ordered later also shortens the wait for SIGKILL.
        let kill_at = sent_at + stop_grace.min(grace.max(MINIMUM_STOP_GRACE));
        if now >= kill_at {
            out.actions.push(Action::Signal {
                container: name.clone(),
                signal: SignalKind::Kill,
            });
        } else {
            out.wake(kill_at);
        }
        return;
    }
    // Recorded once: when the first step (hook or signal) goes out.
    let killing_event = |out: &mut Decision| {
        if obs.stop.began_at.is_none() {
            out.event(false, "Killing", name, killing.to_string());
        }
    };
    let mut began = obs.stop.began_at.unwrap_or(now);
    let hook_warning = match (&obs.stop.hook, spec.pre_stop) {
        (HookProgress::NotRun, Hook::Exec | Hook::HttpGet | Hook::Sleep(_)) => {
            killing_event(out);
            out.actions.push(Action::RunPreStop {
                container: name.clone(),
                timeout: grace,
            });
            out.wake(now + grace);
            return;
        }
        (HookProgress::Running { since }, pre_stop) => {
            let deadline = *since + grace;
            if now < deadline {
                out.wake(deadline);
                return;
            }
            matches!(pre_stop, Hook::Exec | Hook::HttpGet).then(|| {
                format!(
                    "PreStop hook not completed in grace period ({}s)",
                    grace.as_secs()
                )
            })
        }
        (
            HookProgress::Ended {
                failure: Some(msg), ..
            },
            _,
        ) => Some(format!("PreStopHook failed: {msg}")),
        (HookProgress::Ended { failure: None, .. }, _) | (HookProgress::NotRun, Hook::None) => None,
    };
    // A sidecar waits for its turn, at most until the grace period is over.
    let hook_end = match (gate, &obs.stop.hook) {
        (SignalGate::Turn { clear, deadline }, _) => {
            if !clear && now < deadline {
                out.wake(deadline);
                return;
            }
            // The wait for its turn is deducted too.
            began = began.min(deadline - grace);
            now
        }
        (SignalGate::Now, HookProgress::Ended { at, .. }) => *at,
        (SignalGate::Now, _) => now,
    };
    killing_event(out);
    if let Some(message) = hook_warning {
        out.event(true, "FailedPreStopHook", name, message);
    }
    // The hook's own time is deducted (truncated to seconds by the arithmetic).
    let took = (hook_end - began).to_std().unwrap_or_default();
    out.actions.push(Action::Signal {
        container: name.clone(),
        signal: SignalKind::Stop {
            grace: stop_grace_after_hook(grace, took),
        },
    });
}
