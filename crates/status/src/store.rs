//! The status store: pods by UID with status and events. Reads and writes take only
//! the in-memory lock; the files are written by the writer thread (see `writer`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::mpsc::Sender;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{NodeCondition, Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};

use super::events::{Departed, Event, EventKind, push_capped};
use super::writer::{Job, STATUS_FILE, Shared, WriterStats};
use podhost_disk::Layout;
use podhost_disk::read_json;
use podhost_model::podsync::PodStatusView;

/// What the store keeps of one pod.
#[derive(Debug, Clone)]
pub struct PodRecord {
    /// The pod as admitted: its metadata and spec, shared with the pod's worker and the
    /// source that read it (one copy per pod, not one each). Its `status` is not the
    /// pod's: that is [`status`](Self::status).
    pub admitted: Arc<Pod>,
    /// The pod's status, kept current.
    pub status: PodStatus,
    pub events: Vec<Event>,
    /// False once the pod's directory is being removed: no write may recreate it.
    pub persisted: bool,
    /// Bumped by every change (store-wide counter), so the writer knows what it wrote.
    pub(super) version: u64,
}

/// `status.json`: `{"pod": <the pod with its status>, "events": [...]}`, as before the
/// admitted pod and its status were kept apart, so records of older daemons load.
#[derive(Serialize)]
struct RecordOut<'a> {
    pod: PodOut<'a>,
    events: &'a [Event],
}

/// A `v1.Pod` as k8s-openapi writes it, borrowing its parts from the record.
#[derive(Serialize)]
struct PodOut<'a> {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    metadata: &'a ObjectMeta,
    #[serde(skip_serializing_if = "Option::is_none")]
    spec: Option<&'a PodSpec>,
    status: &'a PodStatus,
}

#[derive(Deserialize)]
struct RecordIn {
    pod: Pod,
    events: Vec<Event>,
}

impl Serialize for PodRecord {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        RecordOut {
            pod: PodOut {
                api_version: "v1",
                kind: "Pod",
                metadata: &self.admitted.metadata,
                spec: self.admitted.spec.as_ref(),
                status: &self.status,
            },
            events: &self.events,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for PodRecord {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let RecordIn { mut pod, events } = RecordIn::deserialize(deserializer)?;
        let status = pod.status.take().unwrap_or_default();
        Ok(Self {
            admitted: Arc::new(pod),
            status,
            events,
            persisted: true,
            version: 0,
        })
    }
}

impl PodRecord {
    pub fn uid(&self) -> &str {
        self.admitted.metadata.uid.as_deref().unwrap_or_default()
    }

    /// The pod with its current status (a copy, for the API).
    pub fn to_pod(&self) -> Pod {
        Pod {
            metadata: self.admitted.metadata.clone(),
            spec: self.admitted.spec.clone(),
            status: Some(self.status.clone()),
        }
    }

    /// The pod with its current status; copies the admitted pod only if it is shared.
    pub fn into_pod(self) -> Pod {
        let mut pod = Arc::unwrap_or_clone(self.admitted);
        pod.status = Some(self.status);
        pod
    }

    /// Changes with every change of the record (a store-wide counter): a reader that
    /// remembers it knows whether the record changed since it last looked.
    pub fn version(&self) -> u64 {
        self.version
    }

    pub fn name(&self) -> &str {
        self.admitted.metadata.name.as_deref().unwrap_or_default()
    }

    /// The pod's events, each with the pod's namespace (a record written before events
    /// carried one has none).
    pub fn events_with_namespace(&self) -> Vec<Event> {
        let namespace = self.namespace();
        self.events
            .iter()
            .map(|e| Event {
                namespace: Some(namespace.to_string()),
                ..e.clone()
            })
            .collect()
    }

    /// The pod's phase, if one was published yet.
    pub fn phase(&self) -> Option<&str> {
        self.status.phase.as_deref()
    }

    /// Succeeded or Failed: the pod's containers have stopped for good.
    pub fn is_terminal(&self) -> bool {
        podhost_model::terminal_status::is_terminal(&self.status)
    }
}

/// Converts a chrono time to the API's time type.
pub fn k8s_time(t: DateTime<Utc>) -> Time {
    podhost_model::k8s_time::to_k8s(t)
}

/// Pods by UID plus node events. Cheap to clone out of; everyone holds the lock briefly
/// and nobody holds it across disk I/O.
#[derive(Debug)]
pub struct StatusStore {
    node_name: String,
    shared: Arc<Shared>,
    /// To the writer thread; `None` only while dropping.
    jobs: Option<Sender<Job>>,
    writer: Option<std::thread::JoinHandle<()>>,
    /// Bumped after every change of a pod's record or the pod set, for readers that
    /// follow the store (cluster mode's status sync) instead of polling it.
    changes: tokio::sync::watch::Sender<u64>,
}

#[derive(Debug, Default)]
pub(super) struct Inner {
    pub(super) pods: BTreeMap<String, PodRecord>,
    node_events: Vec<Event>,
    /// The events of pods removed in the last hour.
    departed: Departed,
    /// The node's conditions (the eviction manager's pressure conditions).
    node_conditions: Vec<NodeCondition>,
    last_version: u64,
}

impl Inner {
    /// The pod's record with a new version, for a change about to be made.
    fn changing(&mut self, uid: &str) -> Option<&mut PodRecord> {
        self.last_version += 1;
        let version = self.last_version;
        let rec = self.pods.get_mut(uid)?;
        rec.version = version;
        Some(rec)
    }
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
                    Err(source) => {
                        let e = super::StatusError::Unreadable { path, source };
                        tracing::warn!(error = %e, "skipping unreadable pod record");
                    }
                }
            }
        }
        let inner = Inner {
            pods,
            ..Inner::default()
        };
        let shared = Arc::new(Shared::new(layout, inner));
        let (jobs, writer) = super::writer::start(shared.clone());
        Self {
            node_name: node_name.to_string(),
            shared,
            jobs: Some(jobs),
            writer: Some(writer),
            changes: tokio::sync::watch::Sender::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.shared.lock()
    }

    /// Queues the pod's record for writing (its latest state at write time) and tells
    /// the followers.
    fn persist(&self, uid: &str) {
        if let Some(jobs) = &self.jobs {
            let _ = jobs.send(Job::Dirty(uid.to_string()));
        }
        self.changed();
    }

    fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Wakes at every change of the pods' records (coalesced: a follower that was busy
    /// sees one wake for many changes, and then reads the store's current state).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// For a periodic loop: tells at each look whether a pod's record changed since
    /// the last one.
    pub fn follow_changes(&self) -> super::PodChanges {
        super::PodChanges::new(self.changes.subscribe())
    }

    /// Blocks until every change made before the call is on disk (or failed, logged).
    /// For the daemon's stop and for tests; not needed for crash safety.
    pub fn flush(&self) {
        let Some(jobs) = &self.jobs else {
            return;
        };
        let (ack_tx, ack_rx) = std::sync::mpsc::channel();
        if jobs.send(Job::Flush(ack_tx)).is_ok() {
            let _ = ack_rx.recv();
        }
    }

    #[cfg(test)]
    pub(super) fn shared_for_tests(&self) -> &Shared {
        &self.shared
    }

    /// What the writer thread has done so far.
    pub fn writer_stats(&self) -> WriterStats {
        self.shared.stats()
    }

    /// Adds a pod (status Pending) or keeps the known status of the same UID.
    pub fn admit(&self, pod: &Arc<Pod>) {
        self.admit_with(pod, |_| {});
    }

    /// [`admit`](Self::admit), then `f` on its status, as one change: the pod's first
    /// record is written once, with both (the worker waits for that write before its
    /// sandbox, so a second write there is a second fsync pair on the start path).
    pub fn admit_with(&self, pod: &Arc<Pod>, f: impl FnOnce(&mut PodStatus)) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let mut inner = self.lock();
        inner.pods.entry(uid.clone()).or_insert_with(|| {
            let mut admitted = pod.clone();
            if admitted.metadata.creation_timestamp.is_none() {
                // Sources stamp their pods; a copy only for one that did not.
                Arc::make_mut(&mut admitted).metadata.creation_timestamp =
                    Some(k8s_time(Utc::now()));
            }
            let mut status = admitted.status.clone().unwrap_or_default();
            status.phase = Some("Pending".into());
            PodRecord {
                admitted,
                status,
                events: Vec::new(),
                persisted: true,
                version: 0,
            }
        });
        if let Some(rec) = inner.changing(&uid) {
            f(&mut rec.status);
        }
        drop(inner);
        self.persist(&uid);
    }

    /// Applies `f` to the pod's status and persists it.
    pub fn update_status(&self, uid: &str, f: impl FnOnce(&mut PodStatus)) {
        let mut inner = self.lock();
        let Some(rec) = inner.changing(uid) else {
            return;
        };
        f(&mut rec.status);
        drop(inner);
        self.persist(uid);
    }

    /// Records the pod's ephemeral containers in its spec (`podhost debug` adds them).
    pub fn set_ephemeral_containers(
        &self,
        uid: &str,
        list: &[k8s_openapi::api::core::v1::EphemeralContainer],
    ) {
        let mut inner = self.lock();
        let Some(rec) = inner.changing(uid) else {
            return;
        };
        // The pod's own copy from here on (only pods that were debugged).
        Arc::make_mut(&mut rec.admitted)
            .spec
            .get_or_insert_with(Default::default)
            .ephemeral_containers = (!list.is_empty()).then(|| list.to_vec());
        drop(inner);
        self.persist(uid);
    }

    /// Replaces what the pod-sync core decides of the pod's status: phase, conditions,
    /// container statuses and startTime. A terminal phase already recorded (a rejected
    /// pod) stays.
    pub fn publish_sync(&self, uid: &str, view: &PodStatusView) {
        self.update_status(uid, |status| {
            if !podhost_model::terminal_status::is_terminal(status) {
                status.phase = Some(view.phase.as_str().to_string());
            }
            status.conditions = Some(view.conditions.clone());
            status.container_statuses = Some(view.container_statuses.clone());
            status.init_container_statuses = (!view.init_container_statuses.is_empty())
                .then(|| view.init_container_statuses.clone());
            status.ephemeral_container_statuses = (!view.ephemeral_container_statuses.is_empty())
                .then(|| view.ephemeral_container_statuses.clone());
            status.start_time = view.start_time.map(k8s_time);
            if view.reason.is_some() {
                status.reason = view.reason.clone();
                status.message = view.message.clone();
            }
            // Never lower (the kubelet's rule): a pod's generation only grows.
            if view.observed_generation > status.observed_generation {
                status.observed_generation = view.observed_generation;
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
            namespace: None,
        };
        match kind {
            EventKind::Normal => tracing::info!(object, reason, message = %e.message, "event"),
            EventKind::Warning => tracing::warn!(object, reason, message = %e.message, "event"),
        }
        let mut inner = self.lock();
        let Some(rec) = inner.changing(uid) else {
            return;
        };
        let e = Event {
            namespace: Some(rec.namespace().to_string()),
            ..e
        };
        push_capped(&mut rec.events, e);
        drop(inner);
        self.persist(uid);
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
            namespace: None,
        };
        push_capped(&mut self.lock().node_events, e);
    }

    /// Marks the pod as being deleted (shown as Terminating).
    pub fn set_deletion_timestamp(&self, uid: &str, at: Time) {
        let mut inner = self.lock();
        let Some(rec) = inner.changing(uid) else {
            return;
        };
        if rec.admitted.metadata.deletion_timestamp.is_none() {
            // The pod's own copy from here on: it is being deleted.
            Arc::make_mut(&mut rec.admitted).metadata.deletion_timestamp = Some(at);
        }
        drop(inner);
        self.persist(uid);
    }

    /// Stops writing the pod's record to disk (its directory is about to go); the pod
    /// stays listed until [`remove`](Self::remove). On return no write of the record is
    /// in flight or will start (waits for at most one file write in progress).
    pub fn stop_persisting(&self, uid: &str) {
        self.shared.stop_persisting(uid);
    }

    /// Forgets a pod once it is fully terminated; returns its last record. Its events
    /// stay listed for an hour ([`departed_events`](Self::departed_events)).
    pub fn remove(&self, uid: &str) -> Option<PodRecord> {
        let mut inner = self.lock();
        let removed = inner.pods.remove(uid);
        if let Some(rec) = &removed {
            let events = rec.events_with_namespace();
            inner.departed.keep(Utc::now(), events);
        }
        drop(inner);
        self.changed();
        removed
    }

    /// The events of the pods removed in the last hour, oldest pod first.
    pub fn departed_events(&self) -> Vec<Event> {
        self.lock().departed.current(Utc::now())
    }

    pub fn get(&self, uid: &str) -> Option<PodRecord> {
        self.lock().pods.get(uid).cloned()
    }

    pub fn pods(&self) -> Vec<PodRecord> {
        self.lock().pods.values().cloned().collect()
    }

    /// Every pod with its status, by namespace and name: the `v1.PodList` of the APIs'
    /// `/pods`.
    pub fn pod_list(&self) -> k8s_openapi::List<Pod> {
        let mut items: Vec<Pod> = self.pods().into_iter().map(PodRecord::into_pod).collect();
        // By namespace, then name: the API server's order.
        items.sort_by(|a, b| {
            (&a.metadata.namespace, &a.metadata.name)
                .cmp(&(&b.metadata.namespace, &b.metadata.name))
        });
        k8s_openapi::List {
            items,
            metadata: Default::default(),
        }
    }

    /// Calls `f` with every pod's record under the lock, without copying them: for the
    /// periodic loops that need a few fields of each pod (copying every pod, its status
    /// and events each time cost more than their work). `f` must be quick and must not
    /// call into the store.
    pub fn visit(&self, mut f: impl FnMut(&PodRecord)) {
        for rec in self.lock().pods.values() {
            f(rec);
        }
    }

    pub fn node_events(&self) -> Vec<Event> {
        self.lock().node_events.clone()
    }

    /// Replaces the node's conditions (in memory only: they are re-observed after a
    /// restart).
    pub fn set_node_conditions(&self, conditions: Vec<NodeCondition>) {
        self.lock().node_conditions = conditions;
    }

    pub fn node_conditions(&self) -> Vec<NodeCondition> {
        self.lock().node_conditions.clone()
    }
}

impl Drop for StatusStore {
    /// Writes what is queued and stops the writer thread.
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}
