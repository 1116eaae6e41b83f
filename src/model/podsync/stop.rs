//! One container's decision while the pod terminates: preStop, then the stop signal with
//! what is left of the grace period (at least 2 s), then SIGKILL (kubelet-semantics §1).

use chrono::{DateTime, Utc};

use super::super::grace::stop_grace_after_hook;
use super::action::{Action, Decision, SignalKind};
use super::observed::{ContainerObserved, HookProgress, Instance, TerminationOrder};
use super::status::{running, terminated_state, waiting};
use super::{ContainerFacts, PreStop};

/// Decides for `obs` while the pod terminates; pushes its state to `out`. Nothing starts.
pub(super) fn decide(
    spec: &ContainerFacts,
    obs: &ContainerObserved,
    order: &TerminationOrder,
    now: DateTime<Utc>,
    out: &mut Decision,
) {
    let state = match &obs.instance {
        Instance::None | Instance::Starting { .. } => waiting("ContainerCreating", None),
        Instance::Blocked(block) => {
            waiting(blocked_reason(block.kind), Some(block.message.clone()))
        }
        Instance::Exited { termination, .. } => terminated_state(termination),
        Instance::Running { started_at } => {
            stop_running(spec, obs, order, now, out);
            running(*started_at)
        }
    };
    out.container_states.push(state);
}

fn blocked_reason(kind: super::BlockKind) -> &'static str {
    match kind {
        super::BlockKind::Image => "ErrImagePull",
        super::BlockKind::ImageNeverPull => "ErrImageNeverPull",
        super::BlockKind::Config => "CreateContainerConfigError",
    }
}

fn stop_running(
    spec: &ContainerFacts,
    obs: &ContainerObserved,
    order: &TerminationOrder,
    now: DateTime<Utc>,
    out: &mut Decision,
) {
    let name = &spec.name;
    let grace = order.grace;
    if let Some((sent_at, stop_grace)) = obs.stop.stop_signal {
        if obs.stop.kill_sent_at.is_some() {
            return;
        }
        // A shorter grace ordered later also shortens the wait for SIGKILL.
        let kill_at = sent_at + stop_grace.min(grace.max(super::super::grace::MINIMUM_STOP_GRACE));
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
    if obs.stop.began_at.is_none() {
        out.event(false, "Killing", name, format!("Stopping container {name}"));
    }
    let began = obs.stop.began_at.unwrap_or(now);
    match (&obs.stop.hook, spec.pre_stop) {
        (HookProgress::NotRun, PreStop::Exec | PreStop::Sleep(_)) => {
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
            if pre_stop == PreStop::Exec {
                out.event(
                    true,
                    "FailedPreStopHook",
                    name,
                    format!(
                        "PreStop hook not completed in grace period ({}s)",
                        grace.as_secs()
                    ),
                );
            }
        }
        (
            HookProgress::Ended {
                failure: Some(msg), ..
            },
            _,
        ) => {
            out.event(
                true,
                "FailedPreStopHook",
                name,
                format!("PreStopHook failed: {msg}"),
            );
        }
        (HookProgress::Ended { failure: None, .. }, _) | (HookProgress::NotRun, PreStop::None) => {}
    }
    // The hook's own time is deducted (truncated to seconds by the arithmetic).
    let hook_end = match obs.stop.hook {
        HookProgress::Ended { at, .. } => at,
        _ => now,
    };
    let hook_took = (hook_end - began).to_std().unwrap_or_default();
    out.actions.push(Action::Signal {
        container: name.clone(),
        signal: SignalKind::Stop {
            grace: stop_grace_after_hook(grace, hook_took),
        },
    });
}
