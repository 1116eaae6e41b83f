//! The node side of cluster mode against a live kube-apiserver (tests/common_apiserver:
//! the pinned release with etcd, `Node,RBAC` and NodeRestriction; each test a node of
//! its own): registration, the Lease, the node status, the node's watch of its own
//! Node, events, and the Services watch. podhost's library functions talk to the server
//! as the node (its kubeconfig, `system:node:NODE`); what the server then holds is read
//! back as the administrator; what podhost sent is read from its own `--kube-record`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common_apiserver;

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use common_apiserver::{
    ControlPlane, Options, control_plane, eventually, record_file, sent, until,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, NodeCondition, Service};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use podhost::cluster::{lease, node_status, register};
use podhost::model::eviction::parse_thresholds;
use podhost::model::node::{
    HostFacts, NodePressure, NodeSettings, Reserved, node_object, parse_node_labels, parse_taints,
};
use tokio::sync::watch;

const NODES: &[&str] = &[
    "reg-node",
    "own-node",
    "other-node",
    "event-node",
    "svc-node",
];

fn plane() -> &'static ControlPlane {
    control_plane(&Options::api_server(NODES))
}

const WAIT: Duration = Duration::from_secs(20);

fn host() -> HostFacts {
    HostFacts {
        cpus: 2,
        memory_bytes: 24_684_084 * 1024,
        ephemeral_storage_bytes: 264_212_084 * 1024,
        machine_id: "3d1219c7c4c5404aaa1f6d2a48adfda4".into(),
        system_uuid: String::new(),
        boot_id: "d1932dce-b041-4e7b-afd0-88b1efd2acdb".into(),
        kernel_version: "6.18.44".into(),
        os_image: "Debian GNU/Linux 12 (bookworm)".into(),
        architecture: "amd64".into(),
        hostname: "vm".into(),
        internal_ips: vec!["192.0.2.2".into()],
    }
}

fn settings(name: &str, labels: &str, taints: &str, eviction_hard: &str) -> NodeSettings {
    NodeSettings {
        name: name.into(),
        labels: parse_node_labels(labels).unwrap(),
        taints: parse_taints(taints).unwrap(),
        kube_reserved: Reserved::parse("--kube-reserved", "cpu=100m,memory=128Mi").unwrap(),
        system_reserved: Reserved::default(),
        eviction_hard: parse_thresholds(eviction_hard, "", "", "").unwrap(),
        max_pods: 110,
        kubelet_port: 10250,
        kubelet_version: podhost::cluster::KUBELET_VERSION.into(),
    }
}

fn condition<'a>(node: &'a Node, type_: &str) -> &'a NodeCondition {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} condition on the Node"))
}

/// The effect of the Node's `dedicated` taint (the API server adds taints of its own,
/// e.g. `node.kubernetes.io/not-ready` on a new Node).
fn dedicated(node: &Node) -> Option<String> {
    node.spec
        .as_ref()?
        .taints
        .as_ref()?
        .iter()
        .find(|t| t.key == "dedicated")
        .map(|t| t.effect.clone())
}

fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

#[tokio::test]
async fn registration_creates_the_node_and_lease_and_a_restart_patches_only_what_differs() {
    let cp = plane();
    let admin = cp.admin().await;
    let admin_nodes: Api<Node> = Api::all(admin.clone());
    let admin_leases: Api<Lease> = Api::namespaced(admin.clone(), lease::LEASE_NAMESPACE);
    let (_dir, first_record) = record_file("first");
    let client = cp.node_recorded("reg-node", &first_record).await;
    let first = settings("reg-node", "tier=edge", "dedicated=edge:NoSchedule", "");

    // First start: the Node is created with the node's labels, taints and figures.
    let registered = register::register_once(&client, &node_object(&host(), &first))
        .await
        .unwrap();
    let uid = registered.metadata.uid.clone().unwrap();
    let stored = admin_nodes.get("reg-node").await.unwrap();
    assert_eq!(stored.metadata.uid.as_deref(), Some(uid.as_str()));
    assert_eq!(label(&stored, "tier"), Some("edge"));
    assert_eq!(label(&stored, "kubernetes.io/hostname"), Some("reg-node"));
    assert_eq!(dedicated(&stored), Some("NoSchedule".to_string()));
    let status = stored.status.as_ref().unwrap();
    assert_eq!(status.allocatable.as_ref().unwrap()["cpu"].0, "1900m");
    let endpoint = status.daemon_endpoints.as_ref().unwrap();
    assert_eq!(endpoint.kubelet_endpoint.as_ref().unwrap().port, 10250);

    // The Lease: created, held by the node, owned by its Node.
    let leases: Api<Lease> = Api::namespaced(client.clone(), lease::LEASE_NAMESPACE);
    let duration = Duration::from_secs(40);
    let created = lease::renew_once(&leases, None, "reg-node", &uid, duration)
        .await
        .unwrap();
    let held = admin_leases.get("reg-node").await.unwrap();
    let spec = held.spec.clone().unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("reg-node"));
    assert_eq!(spec.lease_duration_seconds, Some(40));
    let owner = &held.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Node", uid.as_str())
    );

    // The status: the four conditions the node owns, Ready.
    let nodes: Api<Node> = Api::all(client.clone());
    let posted = node_status::post_once(&nodes, &host(), &first, &NodePressure::default(), &[])
        .await
        .unwrap();
    assert_eq!(posted.len(), 4);
    let stored = admin_nodes.get("reg-node").await.unwrap();
    for (type_, status, reason) in [
        ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID"),
        ("Ready", "True", "KubeletReady"),
    ] {
        let c = condition(&stored, type_);
        assert_eq!(
            (c.status.as_str(), c.reason.as_deref()),
            (status, Some(reason)),
            "{type_}"
        );
    }
    let memory_since = condition(&stored, "MemoryPressure")
        .last_transition_time
        .clone();

    // A renewal writes the Lease as the server returned it: its resourceVersion is
    // the precondition, so renewing a stale copy is refused.
    let renewed = lease::renew_once(&leases, Some(created.clone()), "reg-node", &uid, duration)
        .await
        .unwrap();
    assert_ne!(
        renewed.metadata.resource_version,
        created.metadata.resource_version
    );
    assert!(renewed.spec.as_ref().unwrap().renew_time > created.spec.as_ref().unwrap().renew_time);
    let stale = lease::renew_once(&leases, Some(created), "reg-node", &uid, duration).await;
    assert!(
        matches!(&stale, Err(podhost::cluster::ClusterError::Api { source: kube::Error::Api(s), .. }) if s.code == 409),
        "{stale:?}"
    );

    // Someone else labels the Node; then the node restarts with other labels, no
    // taints, and a hard eviction threshold the disk is under.
    admin_nodes
        .patch(
            "reg-node",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": {"owner": "admin"}}})),
        )
        .await
        .unwrap();
    let (_dir2, second_record) = record_file("second");
    let client = cp.node_recorded("reg-node", &second_record).await;
    let second = settings("reg-node", "tier=core,zone=z1", "", "nodefs.available<50%");
    let again = register::register_once(&client, &node_object(&host(), &second))
        .await
        .unwrap();
    assert_eq!(
        again.metadata.uid.as_deref(),
        Some(uid.as_str()),
        "the same Node"
    );
    assert_eq!(
        sent(&second_record, "PATCH", "/api/v1/nodes/reg-node"),
        [serde_json::json!({"metadata": {"labels": {"tier": "core", "zone": "z1"}}})],
        "only what differs from the Node the server has"
    );
    let stored = admin_nodes.get("reg-node").await.unwrap();
    assert_eq!(label(&stored, "tier"), Some("core"));
    assert_eq!(label(&stored, "zone"), Some("z1"));
    assert_eq!(
        label(&stored, "owner"),
        Some("admin"),
        "another's label kept"
    );
    assert_eq!(label(&stored, "kubernetes.io/hostname"), Some("reg-node"));
    // The kubelet leaves the taints of an existing Node alone.
    assert_eq!(dedicated(&stored), Some("NoSchedule".to_string()));

    // Disk pressure posted; an unchanged condition keeps its transition time.
    let pressure = NodePressure {
        disk: true,
        ..NodePressure::default()
    };
    let nodes: Api<Node> = Api::all(client.clone());
    node_status::post_once(&nodes, &host(), &second, &pressure, &[])
        .await
        .unwrap();
    let stored = admin_nodes.get("reg-node").await.unwrap();
    let disk = condition(&stored, "DiskPressure");
    assert_eq!(
        (disk.status.as_str(), disk.reason.as_deref()),
        ("True", Some("KubeletHasDiskPressure"))
    );
    assert_eq!(
        condition(&stored, "MemoryPressure").last_transition_time,
        memory_since
    );
    // Half the disk held back by the hard threshold.
    assert_eq!(
        stored
            .status
            .as_ref()
            .unwrap()
            .allocatable
            .as_ref()
            .unwrap()["ephemeral-storage"]
            .0,
        "132106042Ki"
    );

    // The existing Lease is renewed, not created again.
    let leases: Api<Lease> = Api::namespaced(client, lease::LEASE_NAMESPACE);
    let existing = lease::renew_once(&leases, None, "reg-node", &uid, duration)
        .await
        .unwrap();
    assert_eq!(
        existing.spec.unwrap().holder_identity.as_deref(),
        Some("reg-node")
    );
    assert!(sent(&second_record, "POST", "/leases").is_empty());
    assert_eq!(sent(&second_record, "PUT", "/leases/reg-node").len(), 1);
}

/// The node's watch of its own Node while an administrator runs the equivalent of
/// `kubectl label node own-node tier=core` and `kubectl taint node own-node
/// maintenance=yes:NoExecute`: the follower ends on the labelled, tainted Node, and
/// admission against it lets a `tier: core` pod in only if it tolerates the taint.
#[tokio::test]
async fn own_node_watch_sees_an_administrators_labels_and_taints() {
    use k8s_openapi::api::core::v1::{Pod, PodSpec, Toleration};
    use podhost::model::admission::{NodeView, Resources, Usage, general_predicates};

    let cp = plane();
    let admin_nodes: Api<Node> = Api::all(cp.admin().await);
    for name in ["own-node", "other-node"] {
        let client = cp.node(name).await;
        register::register_once(&client, &node_object(&host(), &settings(name, "", "", "")))
            .await
            .unwrap();
    }
    let (_dir, record) = record_file("own-node");
    let mut node = podhost::cluster::own_node::watch_own_node(
        cp.node_recorded("own-node", &record).await,
        "own-node",
    );
    tokio::time::timeout(WAIT, node.wait_for(Option::is_some))
        .await
        .expect("the Node listed")
        .unwrap();
    let merge = |body: serde_json::Value| Patch::Merge(body);
    // Another Node changed first: not this watch's business.
    admin_nodes
        .patch(
            "other-node",
            &PatchParams::default(),
            &merge(serde_json::json!({"metadata": {"labels": {"tier": "other"}}})),
        )
        .await
        .unwrap();
    admin_nodes
        .patch(
            "own-node",
            &PatchParams::default(),
            &merge(serde_json::json!({"metadata": {"labels": {"tier": "core"}}})),
        )
        .await
        .unwrap();
    admin_nodes
        .patch(
            "own-node",
            &PatchParams::default(),
            &merge(serde_json::json!({"spec": {"taints": [
                {"key": "maintenance", "value": "yes", "effect": "NoExecute"}
            ]}})),
        )
        .await
        .unwrap();
    let tainted = |n: &Node| {
        n.spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|t| t.iter().any(|t| t.key == "maintenance"))
    };
    let latest = tokio::time::timeout(WAIT, node.wait_for(|n| n.as_deref().is_some_and(tainted)))
        .await
        .expect("the watch delivers the tainted Node")
        .unwrap()
        .clone()
        .unwrap();
    assert_eq!(latest.metadata.name.as_deref(), Some("own-node"));
    // No one follows the Node any more: its watch ends, and the record has it.
    drop(node);
    let asked = eventually("the watch ended and recorded", WAIT, || async {
        let asked = common_apiserver::recorded(&record);
        asked
            .iter()
            .any(|e| e.query.contains("watch=true"))
            .then_some(asked)
    })
    .await;
    // Only its own Node, listed then watched; the other Node's change never came.
    assert!(!asked[0].query.contains("watch=true"), "{}", asked[0].query);
    for e in &asked {
        assert_eq!(
            (e.method.as_str(), e.path.as_str()),
            ("GET", "/api/v1/nodes")
        );
        assert!(
            e.query.contains("fieldSelector=metadata.name%3Down-node"),
            "{}",
            e.query
        );
    }

    let own = NodeView {
        name: "own-node".into(),
        allocatable: Resources::default(),
        max_pods: 110,
        ..NodeView::default()
    };
    let view = own
        .with_placement_of(&latest)
        .expect("labels and taints changed");
    assert_eq!(view.labels.get("tier").map(String::as_str), Some("core"));
    assert_eq!(view.max_pods, 110, "the pod count stays the node's own");
    let pod = |tolerate: bool| Pod {
        spec: Some(PodSpec {
            node_selector: Some([("tier".to_string(), "core".to_string())].into()),
            tolerations: tolerate.then(|| {
                vec![Toleration {
                    key: Some("maintenance".into()),
                    operator: Some("Exists".into()),
                    ..Toleration::default()
                }]
            }),
            ..PodSpec::default()
        }),
        ..Pod::default()
    };
    let none = Resources::default();
    let used = Usage::default();
    let untolerated = general_predicates(&pod(false), &none, &view, &used);
    assert_eq!(untolerated.len(), 1, "{untolerated:?}");
    assert!(general_predicates(&pod(true), &none, &view, &used).is_empty());
    // Before the relabel, the node selector did not match.
    assert!(!general_predicates(&pod(true), &none, &own, &used).is_empty());
}

/// An event as the node posts it (cluster_events.rs): core/v1, source kubelet, about
/// a pod's container.
fn pulled(namespace: &str, at: chrono::DateTime<Utc>) -> Event {
    let time = podhost::model::k8s_time::to_k8s(at);
    serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": format!("needy.{:x}", at.timestamp_nanos_opt().unwrap()),
            "namespace": namespace
        },
        "involvedObject": {
            "apiVersion": "v1", "kind": "Pod", "name": "needy", "namespace": namespace,
            "uid": "eb8b2985-a671-4abd-9f93-72ca2917b2b1", "fieldPath": "spec.containers{app}"
        },
        "reason": "Pulled",
        "message": "Container image \"localhost/busybox:latest\" already present on machine",
        "type": "Normal",
        "source": {"component": "kubelet", "host": "event-node"},
        "firstTimestamp": time, "lastTimestamp": time, "count": 1,
        "reportingComponent": "kubelet", "reportingInstance": "event-node"
    }))
    .unwrap()
}

#[tokio::test]
async fn a_repeated_event_is_created_once_then_counted_and_created_again_when_it_expired() {
    use podhost::cluster::events::send;
    use podhost::model::event_correlator::{Correlated, EventCorrelator};

    let cp = plane();
    let admin = cp.admin().await;
    common_apiserver::namespace(&admin, "events").await;
    let admin_events: Api<Event> = Api::namespaced(admin, "events");
    let (_dir, record) = record_file("events");
    let client = cp.node_recorded("event-node", &record).await;
    let mut correlator = EventCorrelator::default();
    let t0 = Utc::now();
    let first = pulled("events", t0);
    let name = first.metadata.name.clone().unwrap();

    let created = correlator.correlate(first.clone(), t0);
    assert!(matches!(created, Correlated::Create(_)), "{created:?}");
    send(&client, &created).await.unwrap();
    let stored = admin_events.get(&name).await.unwrap();
    assert_eq!(stored.count, Some(1));
    assert_eq!(
        stored.source.as_ref().unwrap().component.as_deref(),
        Some("kubelet")
    );
    assert_eq!(
        stored.involved_object.field_path.as_deref(),
        Some("spec.containers{app}")
    );

    // The same event 10 s later: the object is counted with a patch, not made twice.
    let t1 = t0 + chrono::Duration::seconds(10);
    let again = correlator.correlate(first.clone(), t1);
    let Correlated::Patch(patched) = &again else {
        panic!("the same event again is a patch: {again:?}")
    };
    assert_eq!(patched.count, Some(2));
    send(&client, &again).await.unwrap();
    let stored = admin_events.get(&name).await.unwrap();
    assert_eq!(stored.count, Some(2));
    assert_eq!(
        stored.last_timestamp.as_ref().map(|t| t.0.as_second()),
        Some(t1.timestamp())
    );
    assert_eq!(
        admin_events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    let patches = sent(
        &record,
        "PATCH",
        &format!("/namespaces/events/events/{name}"),
    );
    assert_eq!(patches.len(), 1);
    assert_eq!(patches[0]["count"], 2);

    // Events expire (an hour); a count of one that is gone creates it again.
    admin_events
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    let third = correlator.correlate(first, t1 + chrono::Duration::seconds(10));
    assert!(matches!(third, Correlated::Patch(_)), "{third:?}");
    send(&client, &third).await.unwrap();
    let stored = admin_events.get(&name).await.unwrap();
    assert_eq!(stored.count, Some(3));
    let statuses: Vec<(String, u16)> = common_apiserver::recorded(&record)
        .into_iter()
        .map(|e| (e.method, e.status))
        .collect();
    assert_eq!(
        statuses,
        [
            ("POST".to_string(), 201),
            ("PATCH".to_string(), 200),
            ("PATCH".to_string(), 404),
            ("POST".to_string(), 201)
        ]
    );
}

fn service(name: &str, cluster_ip: Option<&str>) -> Service {
    let mut spec = serde_json::json!({
        "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]
    });
    if let Some(ip) = cluster_ip {
        spec["clusterIP"] = ip.into();
    }
    serde_json::from_value(serde_json::json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

fn key(namespace: &str, name: &str) -> (String, String) {
    (namespace.to_string(), name.to_string())
}

#[tokio::test]
async fn services_are_followed_cluster_wide_without_headless_ones() {
    use podhost::cluster::services::follow_services;
    use podhost::model::service_env::{ServiceSet, service_env};

    let cp = plane();
    let admin = cp.admin().await;
    common_apiserver::namespace(&admin, "svc-team").await;
    let services: Api<Service> = Api::namespaced(admin.clone(), "svc-team");
    let post = PostParams::default();
    let api = services.create(&post, &service("api", None)).await.unwrap();
    let api_ip = api.spec.unwrap().cluster_ip.unwrap();
    services
        .create(&post, &service("headless", Some("None")))
        .await
        .unwrap();

    let (_dir, record) = record_file("services");
    let (tx, mut rx) = watch::channel(Arc::new(ServiceSet::default()));
    let task = tokio::spawn(follow_services(
        cp.node_recorded("svc-node", &record).await,
        tx,
    ));
    let set = until(&mut rx, "the first list", |s| s.synced).await;
    assert!(set.services.contains_key(&key("default", "kubernetes")));
    assert!(set.services.contains_key(&key("svc-team", "api")));
    assert!(
        !set.services.contains_key(&key("svc-team", "headless")),
        "a headless Service is left out by the server"
    );
    let vars = service_env(&set, "svc-team", true);
    assert!(vars.contains(&("KUBERNETES_SERVICE_HOST".into(), "10.96.0.1".into())));
    assert!(vars.contains(&("API_SERVICE_HOST".into(), api_ip.clone())));
    assert!(vars.contains(&("API_SERVICE_PORT_HTTPS".into(), "443".into())));

    // Changes arrive through the watch.
    let web = services
        .create(&post, &service("web-svc", None))
        .await
        .unwrap();
    let web_ip = web.spec.unwrap().cluster_ip.unwrap();
    services
        .delete("api", &DeleteParams::default())
        .await
        .unwrap();
    let set = until(&mut rx, "web-svc added and api deleted", |s| {
        s.services.contains_key(&key("svc-team", "web-svc"))
            && !s.services.contains_key(&key("svc-team", "api"))
    })
    .await;
    let vars = service_env(&set, "svc-team", true);
    assert!(vars.contains(&("WEB_SVC_SERVICE_HOST".into(), web_ip.clone())));
    assert!(vars.contains(&("WEB_SVC_PORT".into(), format!("tcp://{web_ip}:443"))));
    assert!(!vars.iter().any(|(k, _)| k.starts_with("API_")), "{vars:?}");

    // No one reads the Services any more: the watch ends.
    drop(rx);
    tokio::time::timeout(WAIT, task)
        .await
        .expect("the task ends")
        .unwrap();
    // One cluster-wide list, then its watch, both without headless Services.
    let asked = common_apiserver::recorded(&record);
    assert!(asked.len() >= 2, "{asked:?}");
    for e in &asked {
        assert_eq!(
            (e.method.as_str(), e.path.as_str()),
            ("GET", "/api/v1/services")
        );
        assert!(
            e.query.contains("fieldSelector=spec.clusterIP%21%3DNone"),
            "{}",
            e.query
        );
    }
    assert!(!asked[0].query.contains("watch=true"), "{}", asked[0].query);
    assert!(asked[1].query.contains("watch=true"), "{}", asked[1].query);
}

#[tokio::test]
async fn services_a_client_may_not_list_stay_not_synced() {
    use podhost::cluster::services::follow_services;
    use podhost::model::service_env::ServiceSet;

    let cp = plane();
    let admin = cp.admin().await;
    common_apiserver::namespace(&admin, "svc-nobody").await;
    // A service account that RBAC gives nothing: its list is refused (403).
    let token = common_apiserver::service_account_token(&admin, "svc-nobody", "default").await;
    let kubeconfig = cp.token_kubeconfig("svc-nobody", &token);
    let (_dir, record) = record_file("nobody");
    let client = common_apiserver::client(&kubeconfig, Some(&record)).await;
    let (tx, mut rx) = watch::channel(Arc::new(ServiceSet::default()));
    let task = tokio::spawn(follow_services(client, tx));
    eventually("the refused list", WAIT, || async {
        common_apiserver::recorded(&record)
            .iter()
            .any(|e| e.path == "/api/v1/services" && e.status == 403)
            .then_some(())
    })
    .await;
    // Retried with backoff, nothing known: containers would get no service variables
    // from an unknown set rather than from an empty one.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!rx.borrow_and_update().synced);
    assert!(!rx.has_changed().unwrap());
    assert!(!task.is_finished());
    task.abort();
}
