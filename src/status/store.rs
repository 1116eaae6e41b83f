//! The status store: pods by UID with status and events, written through to disk.

use std::collections::BTreeMap;
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};

use super::conditions::recompute;
use super::events::{Event, EventKind, push_capped};
use crate::model::restart::RestartPolicy;
use crate::runtime::fsutil::{read_json, write_json_atomic};
use crate::runtime::paths::Layout;

/// What the store keeps of one pod.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PodRecord {
    /// The pod as admitted, with `status` kept current.
    pub pod: Pod,
    pub events: Vec<Event>,
    /// False once the pod's directory is being removed: no write may recreate it.
    #[serde(skip, default = "persisted")]
    pub persisted: bool,
}

fn persisted() -> bool {
    true
}

impl PodRecord {
    pub fn uid(&self) -> &str {
        self.pod.metadata.uid.as_deref().unwrap_or_default()
    }

    pub fn name(&self) -> &str {
        self.pod.metadata.name.as_deref().unwrap_or_default()
    }
}

/// Converts a chrono time to the API's time type.
pub fn k8s_time(t: DateTime<Utc>) -> Time {
    let nanos = t.timestamp_nanos_opt().unwrap_or_default() as i128;
    Time(k8s_openapi::jiff::Timestamp::from_nanosecond(nanos).unwrap_or_default())
}

const STATUS_FILE: &str = "status.json";

/// Pods by UID plus node events. Cheap to clone out of; writers hold the lock briefly.
#[derive(Debug)]
pub struct StatusStore {
    layout: Layout,
    node_name: String,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    pods: BTreeMap<String, PodRecord>,
    node_events: Vec<Event>,
}

impl StatusStore {
    /// Loads every `pods/<uid>/status.json` left by a previous daemon.
    pub fn load(layout: Layout, node_name: &str) -> Self {
        let mut pods = BTreeMap::new();
        if let Ok(dirs) = std::fs::read_dir(layout.pods_dir()) {
            for d in dirs.flatten() {
                let path = d.path().join(STATUS_FILE);
                match read_json::<PodRecord>(&path) {
                    Ok(Some(rec)) => {
                        pods.insert(rec.uid().to_string(), rec);
                    }
                    Ok(None) => {}
                    Err(e) => tracing::warn!(error = %e, "skipping unreadable pod record"),
                }
            }
        }
        Self {
            layout,
            node_name: node_name.to_string(),
            inner: Mutex::new(Inner {
                pods,
                node_events: Vec::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn persist(&self, rec: &PodRecord) {
        if !rec.persisted {
            return;
        }
        let path = self.layout.pod_dir(rec.uid()).join(STATUS_FILE);
        if let Err(e) = write_json_atomic(&path, rec) {
            tracing::error!(error = %e, pod = rec.name(), "cannot persist pod status");
        }
    }

    /// Adds a pod (status Pending) or keeps the known status of the same UID.
    pub fn admit(&self, pod: &Pod) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let mut inner = self.lock();
        let rec = inner.pods.entry(uid).or_insert_with(|| {
            let mut pod = pod.clone();
            pod.metadata
                .creation_timestamp
                .get_or_insert_with(|| k8s_time(Utc::now()));
            let mut status = pod.status.take().unwrap_or_default();
            status.phase = Some("Pending".into());
            pod.status = Some(status);
            PodRecord {
                pod,
                events: Vec::new(),
                persisted: true,
            }
        });
        // Persisted under the lock, so that writes reach the disk in the order they happened.
        self.persist(rec);
    }

    /// Applies `f` to the pod's status, recomputes phase and conditions, persists.
    pub fn update_status(&self, uid: &str, f: impl FnOnce(&mut PodStatus)) {
        let mut inner = self.lock();
        let Some(rec) = inner.pods.get_mut(uid) else {
            return;
        };
        let policy = RestartPolicy::from_spec(
            rec.pod
                .spec
                .as_ref()
                .and_then(|s| s.restart_policy.as_deref()),
        )
        .unwrap_or(RestartPolicy::Always);
        let count = rec
            .pod
            .spec
            .as_ref()
            .map(|s| s.containers.len())
            .unwrap_or(0);
        let status = rec.pod.status.get_or_insert_with(Default::default);
        f(status);
        recompute(status, policy, count);
        // Persisted under the lock, so that writes reach the disk in the order they happened.
        self.persist(rec);
    }

    /// Replaces one container's status (by name), keeping spec order.
    pub fn set_container_status(&self, uid: &str, cs: ContainerStatus) {
        let order: Vec<String> = self
            .get(uid)
            .and_then(|r| {
                r.pod
                    .spec
                    .map(|s| s.containers.into_iter().map(|c| c.name).collect())
            })
            .unwrap_or_default();
        self.update_status(uid, |status| {
            let list = status.container_statuses.get_or_insert_with(Vec::new);
            match list.iter_mut().find(|c| c.name == cs.name) {
                Some(slot) => *slot = cs,
                None => list.push(cs),
            }
            list.sort_by_key(|c| {
                order
                    .iter()
                    .position(|n| *n == c.name)
                    .unwrap_or(usize::MAX)
            });
            if status.start_time.is_none() {
                status.start_time = Some(k8s_time(Utc::now()));
            }
        });
    }

    /// Records an event for a pod (and logs it).
    pub fn pod_event(
        &self,
        uid: &str,
        kind: EventKind,
        reason: &str,
        object: &str,
        message: String,
    ) {
        let e = Event {
            time: Utc::now(),
            kind,
            reason: reason.to_string(),
            object: object.to_string(),
            message,
        };
        match kind {
            EventKind::Normal => tracing::info!(object, reason, message = %e.message, "event"),
            EventKind::Warning => tracing::warn!(object, reason, message = %e.message, "event"),
        }
        let mut inner = self.lock();
        let Some(rec) = inner.pods.get_mut(uid) else {
            return;
        };
        push_capped(&mut rec.events, e);
        // Persisted under the lock, so that writes reach the disk in the order they happened.
        self.persist(rec);
    }

    /// Records an event about the node (e.g. a manifest that cannot be used).
    pub fn node_event(&self, kind: EventKind, reason: &str, message: String) {
        let object = format!("node/{}", self.node_name);
        match kind {
            EventKind::Normal => tracing::info!(object, reason, %message, "event"),
            EventKind::Warning => tracing::warn!(object, reason, %message, "event"),
        }
        let e = Event {
            time: Utc::now(),
            kind,
            reason: reason.to_string(),
            object,
            message,
        };
        push_capped(&mut self.lock().node_events, e);
    }

    /// Marks the pod as being deleted (shown as Terminating).
    pub fn set_deletion_timestamp(&self, uid: &str, at: Time) {
        let mut inner = self.lock();
        let Some(rec) = inner.pods.get_mut(uid) else {
            return;
        };
        rec.pod.metadata.deletion_timestamp.get_or_insert(at);
        // Persisted under the lock, so that writes reach the disk in the order they happened.
        self.persist(rec);
    }

    /// Stops writing the pod's record to disk (its directory is about to go); the pod
    /// stays listed until [`remove`](Self::remove).
    pub fn stop_persisting(&self, uid: &str) {
        if let Some(rec) = self.lock().pods.get_mut(uid) {
            rec.persisted = false;
        }
    }

    /// Forgets a pod once it is fully terminated.
    pub fn remove(&self, uid: &str) {
        self.lock().pods.remove(uid);
    }

    pub fn get(&self, uid: &str) -> Option<PodRecord> {
        self.lock().pods.get(uid).cloned()
    }

    /// Finds a pod by name (`name` or `namespace/name`).
    pub fn find_by_name(&self, name: &str) -> Option<PodRecord> {
        let (ns, name) = name.split_once('/').unwrap_or(("", name));
        self.lock()
            .pods
            .values()
            .filter(|r| r.name() == name)
            .filter(|r| ns.is_empty() || r.pod.metadata.namespace.as_deref() == Some(ns))
            .max_by_key(|r| {
                r.pod
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("kubernetes.io/config.seen").cloned())
            })
            .cloned()
    }

    pub fn pods(&self) -> Vec<PodRecord> {
        self.lock().pods.values().cloned().collect()
    }

    pub fn node_events(&self) -> Vec<Event> {
        self.lock().node_events.clone()
    }
}
