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
}

/// Most events kept per pod (and for the node); older ones are dropped first.
pub const MAX_EVENTS: usize = 200;

pub(crate) fn push_capped(list: &mut Vec<Event>, e: Event) {
    if list.len() >= MAX_EVENTS {
        list.remove(0);
    }
    list.push(e);
}
