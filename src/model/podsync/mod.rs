//! The pod-sync core: one pure decision per sync, in the spirit of the kubelet's
//! `computePodActions`.
//!
//! [`sync_pod`] takes the pod's spec facts ([`PodFacts`]), what the worker has observed
//! of its containers ([`PodObserved`]) and `now`, and returns a [`Decision`]: the actions to
//! perform (start a container, run a preStop hook, send a signal), the events to record,
//! when to wake up if nothing else happens, and the pod's resulting status (phase,
//! conditions, container states with reasons). Restart policy, CrashLoopBackOff, image and
//! configuration back-off, termination ordering and the grace arithmetic are decided here
//! and nowhere else.
//!
//! No I/O, no clock reads, no tokio: the worker observes (shim exits, hook results,
//! timers), folds each observation into [`PodObserved`] with its `on_*` methods (pure
//! transitions too), performs the actions, and asks again.

mod action;
mod container;
mod observed;
mod status;
mod stop;

#[cfg(test)]
mod tests;

pub use action::{Action, Decision, SignalKind, SyncEvent};
pub use observed::{
    BlockKind, ContainerObserved, HookProgress, Instance, PodObserved, StartBlock, StopProgress,
    Termination, TerminationOrder,
};
pub use status::{PodStatusView, conditions, terminated_state};

use chrono::{DateTime, Utc};

use super::backoff::BackoffPolicy;
use super::restart::RestartPolicy;

/// What a container's preStop hook is (`lifecycle.preStop`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreStop {
    None,
    /// An exec handler, run in the container by the worker.
    Exec,
    /// A sleep handler of this long, bounded by the grace period.
    Sleep(std::time::Duration),
}

/// The facts of one container's spec the core decides on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerFacts {
    pub name: String,
    pub image: String,
    pub pre_stop: PreStop,
}

/// The facts of the pod's spec the core decides on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodFacts {
    pub uid: String,
    pub name: String,
    pub namespace: String,
    /// Regular containers, in spec order.
    pub containers: Vec<ContainerFacts>,
    pub restart_policy: RestartPolicy,
    pub backoff: BackoffPolicy,
}

/// The one decision of a sync: see the module documentation.
pub fn sync_pod(pod: &PodFacts, observed: &PodObserved, now: DateTime<Utc>) -> Decision {
    let mut decision = Decision::default();
    for (spec, obs) in pod.containers.iter().zip(&observed.containers) {
        match &observed.terminating {
            Some(order) => stop::decide(spec, obs, order, now, &mut decision),
            None => container::decide(
                pod,
                spec,
                obs,
                observed.image_generation,
                now,
                &mut decision,
            ),
        }
    }
    decision.pod_done = observed.terminating.is_some()
        && observed
            .containers
            .iter()
            .all(ContainerObserved::is_settled);
    decision.status = status::pod_status(pod, observed, &decision.container_states, now);
    decision
}
