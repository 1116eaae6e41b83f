//! Events: what happened to a pod (or the node), kept with the pod's status.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Normal or Warning, as Kubernetes events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventKind {
    Normal,
    Warning,
}

/// One event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub time: DateTime<Utc>,
    #[serde(rename = "type")]
    pub kind: EventKind,
    pub reason: String,
    /// `pod/<name>`, `pod/<name>/<container>` or `node/<name>`.
    pub object: String,
    pub message: String,
    /// The pod's namespace; `None` for the node's events (which the API server keeps in
    /// `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl Event {
    /// The namespace the event is listed in: its pod's, or `default` for the node's.
    pub fn listed_namespace(&self) -> &str {
        self.namespace.as_deref().unwrap_or("default")
    }

    /// Whether the event is about `object` (`pod/NAME`, `node/NAME`): the object
    /// itself or one of its containers.
    pub fn is_about(&self, object: &str) -> bool {
        self.object == object
            || self
                .object
                .strip_prefix(object)
                .is_some_and(|rest| rest.starts_with('/'))
    }
}

/// Most events kept per pod (and for the node); older ones are dropped first.
pub const MAX_EVENTS: usize = 200;

/// How long a pod's events stay listed after the pod went (its manifest deleted or
/// replaced): the API server's default `--event-ttl`.
pub const DEPARTED_EVENTS_TTL: chrono::TimeDelta = chrono::TimeDelta::hours(1);

/// Most events of departed pods kept (oldest dropped first), so that a churn of pods
/// cannot grow the daemon.
pub const MAX_DEPARTED_EVENTS: usize = 2000;

/// The events of pods that went, each with when its pod went.
#[derive(Debug, Default)]
pub(crate) struct Departed(std::collections::VecDeque<(DateTime<Utc>, Event)>);

impl Departed {
    pub(crate) fn keep(&mut self, gone_at: DateTime<Utc>, events: Vec<Event>) {
        for e in events {
            if self.0.len() >= MAX_DEPARTED_EVENTS {
                self.0.pop_front();
            }
            self.0.push_back((gone_at, e));
        }
    }

    /// The events still kept at `now`; drops the expired ones.
    pub(crate) fn current(&mut self, now: DateTime<Utc>) -> Vec<Event> {
        while self
            .0
            .front()
            .is_some_and(|(gone_at, _)| now - *gone_at > DEPARTED_EVENTS_TTL)
        {
            self.0.pop_front();
        }
        self.0.iter().map(|(_, e)| e.clone()).collect()
    }
}

pub(crate) fn push_capped(list: &mut Vec<Event>, e: Event) {
    if list.len() >= MAX_EVENTS {
        list.remove(0);
    }
    list.push(e);
}
