//! What a sync decides: actions, events, a wake-up time and the resulting status.

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::ContainerState;

use super::super::backoff::Backoff;
use super::status::PodStatusView;

/// Which signal to send to a container's init process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalKind {
    /// The container's stop signal; SIGKILL follows after `grace` if it still runs.
    Stop {
        grace: Duration,
    },
    Kill,
}

/// One thing for the worker to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Start a new instance of `container` with this attempt number, made from `image`
    /// (the spec's image now: it changes when an API pod's spec is updated); fold
    /// `backoff_after` in when the start begins.
    Start {
        container: String,
        attempt: u32,
        image: String,
        backoff_after: Backoff,
    },
    /// Run the container's postStart hook; it is not Running until the hook returns.
    RunPostStart { container: String },
    /// Run the container's preStop hook; the core stops waiting for it after `timeout`.
    RunPreStop {
        container: String,
        timeout: Duration,
    },
    /// Send a signal to the container's init process.
    Signal {
        container: String,
        signal: SignalKind,
    },
}

impl Action {
    pub fn container(&self) -> &str {
        match self {
            Self::Start { container, .. }
            | Self::RunPostStart { container }
            | Self::RunPreStop { container, .. }
            | Self::Signal { container, .. } => container,
        }
    }
}

/// An event the sync records (Kubernetes event shape; `container` names the object).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncEvent {
    pub warning: bool,
    pub reason: &'static str,
    pub container: String,
    pub message: String,
}

/// The outcome of one sync.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Decision {
    pub actions: Vec<Action>,
    pub events: Vec<SyncEvent>,
    /// Sync again at this time if nothing is observed before.
    pub wake_at: Option<DateTime<Utc>>,
    /// The pod is terminating and nothing of it runs any more: release the sandbox.
    pub pod_done: bool,
    /// Each spec container's state, in spec order.
    pub container_states: Vec<ContainerState>,
    /// Each spec init container's state, in spec order.
    pub init_container_states: Vec<ContainerState>,
    /// Each ephemeral container's state, in the order they were added.
    pub ephemeral_container_states: Vec<ContainerState>,
    pub status: PodStatusView,
}

impl Decision {
    pub(super) fn wake(&mut self, at: DateTime<Utc>) {
        self.wake_at = Some(self.wake_at.map_or(at, |w| w.min(at)));
    }

    pub(super) fn event(
        &mut self,
        warning: bool,
        reason: &'static str,
        container: &str,
        message: String,
    ) {
        self.events.push(SyncEvent {
            warning,
            reason,
            container: container.to_string(),
            message,
        });
    }
}
