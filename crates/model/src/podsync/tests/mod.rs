//! The core's tests: kubelet corner cases as tables (restart, back-off, image and config
//! back-off, termination, status) and property tests over random observation sequences.

mod definition;
mod health;
mod init;
mod props;
mod resize;
mod restart;
mod sandbox;
mod status;
mod termination;

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::*;
use crate::backoff::BackoffPolicy;
use crate::restart::RestartPolicy;

/// A fixed instant plus `secs` (fractions allowed), so tables read in seconds.
pub(super) fn t(secs: f64) -> DateTime<Utc> {
    let base = DateTime::from_timestamp(1_700_000_000, 0).unwrap_or_default();
    let millis = crate::convert::f64_to_u64_saturating((secs * 1000.0).round());
    base + chrono::Duration::milliseconds(i64::try_from(millis).unwrap_or(i64::MAX))
}

pub(super) fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

pub(super) fn pod(policy: RestartPolicy, containers: &[(&str, Hook)]) -> PodFacts {
    PodFacts {
        uid: "u1".into(),
        name: "web".into(),
        namespace: "default".into(),
        init_containers: Vec::new(),
        ephemeral_containers: Vec::new(),
        containers: containers
            .iter()
            .map(|(n, p)| ContainerFacts {
                pre_stop: *p,
                ..ContainerFacts::new(n, &format!("img-{n}"))
            })
            .collect(),
        restart_policy: policy,
        backoff: BackoffPolicy::default(),
        grace: secs(30),
        active_deadline: None,
        generation: None,
    }
}

/// The worker began a start of `c` from the image the tables' specs give it (`img-NAME`).
pub(super) fn begin_start(
    c: &mut ContainerObserved,
    at: DateTime<Utc>,
    backoff_after: crate::backoff::Backoff,
) {
    let image = format!("img-{}", c.name);
    c.on_start_begun(at, backoff_after, &image);
}

pub(super) fn one(policy: RestartPolicy) -> PodFacts {
    pod(policy, &[("app", Hook::None)])
}

pub(super) fn observed(pod: &PodFacts) -> PodObserved {
    PodObserved::with_init(
        pod.init_containers.iter().map(|c| c.name.clone()),
        pod.containers.iter().map(|c| c.name.clone()),
    )
}

pub(super) fn exit(code: i32, started: f64, finished: f64) -> Termination {
    Termination {
        exit_code: code,
        signal: None,
        started_at: t(started),
        finished_at: t(finished),
        reason: None,
        message: None,
        container_id: Some("podhost://x".into()),
    }
}

/// Performs `decision`'s actions on `obs` as the worker does when it begins them.
pub(super) fn fold_actions(obs: &mut PodObserved, decision: &Decision, now: DateTime<Utc>) {
    for action in &decision.actions {
        let Some(c) = obs.container_mut(action.container()) else {
            continue;
        };
        match action {
            Action::Start {
                backoff_after,
                image,
                ..
            } => c.on_start_begun(now, backoff_after.clone(), image),
            Action::RunPostStart { .. } => c.on_post_start_begun(now),
            Action::RunPreStop { .. } => c.on_hook_started(now),
            Action::Signal { signal, .. } => c.on_signal_sent(*signal, now),
        }
    }
}

/// Syncs, publishes and performs the actions: what one worker iteration does.
pub(super) fn step(pod: &PodFacts, obs: &mut PodObserved, now: DateTime<Utc>) -> Decision {
    let d = sync_pod(pod, obs, now);
    obs.on_published(&d);
    fold_actions(obs, &d, now);
    d
}

pub(super) fn reason(d: &Decision, i: usize) -> String {
    let s = &d.container_states[i];
    if let Some(w) = &s.waiting {
        return w.reason.clone().unwrap_or_default();
    }
    if let Some(t) = &s.terminated {
        return format!("Terminated:{}", t.reason.clone().unwrap_or_default());
    }
    "Running".into()
}

/// The signals `d` sends, in order.
pub(super) fn signals(d: &Decision) -> Vec<SignalKind> {
    d.actions
        .iter()
        .filter_map(|a| match a {
            Action::Signal { signal, .. } => Some(*signal),
            _ => None,
        })
        .collect()
}

pub(super) fn starts(d: &Decision) -> Vec<(String, u32)> {
    d.actions
        .iter()
        .filter_map(|a| match a {
            Action::Start {
                container, attempt, ..
            } => Some((container.clone(), *attempt)),
            _ => None,
        })
        .collect()
}
