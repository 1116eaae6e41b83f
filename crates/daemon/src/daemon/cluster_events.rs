//! The node's and the API pods' events, posted to the API server as the kubelet's
//! event recorder does (`kubectl get events`, `kubectl describe pod`): each event the
//! status store records from the daemon's start on becomes a core/v1 Event about the
//! Pod (its container by `fieldPath`, as `spec.containers{name}`) or the Node, source
//! `kubelet` on this host. A static pod's events name the static pod itself — its
//! name, namespace and config hash as UID — as the kubelet's do (the mirror pod has
//! another UID; `kubectl get events` finds them by name).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tokio::sync::mpsc;

use podhost_model::k8s_time::to_k8s;
use podhost_status::{EventKind, StatusStore};

/// The kubelet's event source component (and reporting controller).
pub const COMPONENT: &str = "kubelet";

/// Follows `store` and sends every event newer than the start to `out` (the poster,
/// `cluster::events::run`) until the poster is gone.
pub async fn follow(store: Arc<StatusStore>, node: String, out: mpsc::UnboundedSender<Event>) {
    let started = Utc::now();
    let mut changes = store.subscribe();
    let mut node_cursor = started;
    let mut pod_cursors: HashMap<String, DateTime<Utc>> = HashMap::new();
    loop {
        let mut fresh = Vec::new();
        for e in store.node_events() {
            if e.time > node_cursor {
                node_cursor = e.time;
                fresh.push(node_event(&node, &e));
            }
        }
        let mut alive = HashSet::new();
        store.visit(|record| {
            let uid = record.uid().to_string();
            let cursor = pod_cursors.entry(uid.clone()).or_insert(started);
            alive.insert(uid);
            let Some(last) = record.events.last() else {
                return;
            };
            if last.time <= *cursor {
                return;
            }
            let Some(involved) = pod_ref(&record.admitted) else {
                *cursor = last.time;
                return;
            };
            for e in record.events.iter().filter(|e| e.time > *cursor) {
                fresh.push(pod_event(&node, &record.admitted, involved.clone(), e));
            }
            *cursor = last.time;
        });
        pod_cursors.retain(|uid, _| alive.contains(uid));
        for e in fresh {
            if out.send(e).is_err() {
                return;
            }
        }
        if changes.changed().await.is_err() {
            return;
        }
    }
}

/// The object a pod's events are about: the pod as the node runs it (a static pod's
/// UID is its config hash; it has no resourceVersion).
fn pod_ref(pod: &Pod) -> Option<ObjectReference> {
    Some(ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        resource_version: pod.metadata.resource_version.clone(),
        ..Default::default()
    })
}

/// The `fieldPath` of a container of `pod` named by an event's object
/// (`pod/<name>/<container>`), as the kubelet's container references.
fn field_path(pod: &Pod, object: &str) -> Option<String> {
    let container = object.strip_prefix("pod/")?.split_once('/')?.1;
    let spec = pod.spec.as_ref()?;
    let named = |list: Option<&Vec<k8s_openapi::api::core::v1::Container>>| {
        list.is_some_and(|l| l.iter().any(|c| c.name == container))
    };
    let field = if named(spec.init_containers.as_ref()) {
        "spec.initContainers"
    } else if spec
        .ephemeral_containers
        .iter()
        .flatten()
        .any(|c| c.name == container)
    {
        "spec.ephemeralContainers"
    } else {
        "spec.containers"
    };
    Some(format!("{field}{{{container}}}"))
}

fn pod_event(
    node: &str,
    pod: &Pod,
    mut involved: ObjectReference,
    e: &podhost_status::Event,
) -> Event {
    involved.field_path = field_path(pod, &e.object);
    let namespace = involved
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    core_event(node, namespace, involved, e)
}

/// The kubelet's node reference: kind Node, its name as name and UID.
fn node_event(node: &str, e: &podhost_status::Event) -> Event {
    let involved = ObjectReference {
        kind: Some("Node".into()),
        name: Some(node.to_string()),
        uid: Some(node.to_string()),
        ..Default::default()
    };
    core_event(node, "default".into(), involved, e)
}

fn core_event(
    node: &str,
    namespace: String,
    involved: ObjectReference,
    e: &podhost_status::Event,
) -> Event {
    let object_name = involved.name.clone().unwrap_or_default();
    let nanos = e.time.timestamp_nanos_opt().unwrap_or_default();
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{object_name}.{nanos:x}")),
            namespace: Some(namespace),
            ..Default::default()
        },
        involved_object: involved,
        reason: Some(e.reason.clone()),
        message: Some(e.message.clone()),
        type_: Some(
            match e.kind {
                EventKind::Normal => "Normal",
                EventKind::Warning => "Warning",
            }
            .into(),
        ),
        source: Some(EventSource {
            component: Some(COMPONENT.into()),
            host: Some(node.to_string()),
        }),
        first_timestamp: Some(to_k8s(e.time)),
        last_timestamp: Some(to_k8s(e.time)),
        count: Some(1),
        reporting_component: Some(COMPONENT.into()),
        reporting_instance: Some(node.to_string()),
        ..Default::default()
    }
}

/// The events of a record, for tests of the conversion.
#[cfg(test)]
fn events_of(node: &str, record: &podhost_status::PodRecord) -> Vec<Event> {
    let Some(involved) = pod_ref(&record.admitted) else {
        return Vec::new();
    };
    record
        .events
        .iter()
        .map(|e| pod_event(node, &record.admitted, involved.clone(), e))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(api: bool) -> podhost_status::PodRecord {
        let mut annotations = serde_json::Map::new();
        if api {
            annotations.insert(
                podhost_source::ANNOTATION_CONFIG_SOURCE.into(),
                podhost_source::SOURCE_API.into(),
            );
        }
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "team", "uid": "u1",
                         "resourceVersion": "7", "annotations": annotations},
            "spec": {"initContainers": [{"name": "setup"}], "containers": [{"name": "app"}]}
        }))
        .unwrap();
        let at = DateTime::from_timestamp(1_700_000_000, 5).unwrap();
        let ev = |object: &str, reason: &str| podhost_status::Event {
            time: at,
            kind: EventKind::Normal,
            reason: reason.into(),
            object: object.into(),
            message: format!("{reason} it"),
            namespace: None,
        };
        serde_json::from_value(serde_json::json!({
            "pod": pod,
            "events": [ev("pod/web/app", "Started"), ev("pod/web/setup", "Created"), ev("pod/web", "Scheduled")],
        }))
        .unwrap()
    }

    #[test]
    fn an_api_pods_events_name_the_pod_its_container_and_the_kubelet_on_this_node() {
        let events = events_of("node-1", &record(true));
        assert_eq!(events.len(), 3);
        let started = &events[0];
        let o = &started.involved_object;
        assert_eq!(o.kind.as_deref(), Some("Pod"));
        assert_eq!(
            (o.namespace.as_deref(), o.name.as_deref(), o.uid.as_deref()),
            (Some("team"), Some("web"), Some("u1"))
        );
        assert_eq!(o.resource_version.as_deref(), Some("7"));
        assert_eq!(o.field_path.as_deref(), Some("spec.containers{app}"));
        assert_eq!(
            events[1].involved_object.field_path.as_deref(),
            Some("spec.initContainers{setup}")
        );
        assert_eq!(events[2].involved_object.field_path, None);
        assert_eq!(started.metadata.namespace.as_deref(), Some("team"));
        assert_eq!(
            started.metadata.name.as_deref(),
            Some(format!("web.{:x}", 1_700_000_000_000_000_005_i64).as_str())
        );
        let source = started.source.as_ref().unwrap();
        assert_eq!(source.component.as_deref(), Some("kubelet"));
        assert_eq!(source.host.as_deref(), Some("node-1"));
        assert_eq!(started.reporting_instance.as_deref(), Some("node-1"));
        assert_eq!(started.type_.as_deref(), Some("Normal"));
        assert_eq!(started.count, Some(1));
    }

    #[test]
    fn a_static_pods_events_name_the_static_pod_as_the_kubelet_does() {
        // The record's pod stands for a static pod here: its UID is the config hash.
        let events = events_of("node-1", &record(false));
        assert_eq!(events.len(), 3);
        let o = &events[0].involved_object;
        assert_eq!(
            (o.name.as_deref(), o.uid.as_deref(), o.field_path.as_deref()),
            (Some("web"), Some("u1"), Some("spec.containers{app}"))
        );
    }

    #[test]
    fn node_events_name_the_node_as_the_kubelet_does() {
        let e = podhost_status::Event {
            time: Utc::now(),
            kind: EventKind::Warning,
            reason: "NetworkNotReady".into(),
            object: "node/node-1".into(),
            message: "m".into(),
            namespace: None,
        };
        let posted = node_event("node-1", &e);
        let o = &posted.involved_object;
        assert_eq!(o.kind.as_deref(), Some("Node"));
        assert_eq!(
            (o.name.as_deref(), o.uid.as_deref()),
            (Some("node-1"), Some("node-1"))
        );
        assert_eq!(posted.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(posted.type_.as_deref(), Some("Warning"));
    }
}
