//! The node side of cluster mode against recorded exchanges of a real kube-apiserver
//! (v1.20.2 with etcd, `Node,RBAC` authorization and the NodeRestriction admission,
//! recorded with `podhost daemon --kube-record` as the node `podhost-a`): what podhost
//! sends, and what it makes of the answers. `scripts/cluster-test.sh` runs the same
//! against a live server when one is available.
//!
//! - `register-new.jsonl`: first registration (Node created, Lease missing → created,
//!   status posted, Lease renewed).
//! - `register-existing.jsonl`: the daemon restarted with other `--node-labels` and a
//!   hard eviction threshold the disk was under (Node exists → labels patched, status
//!   with DiskPressure, Lease renewed).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use podhost::cluster::replay::Replay;
use podhost::cluster::{lease, node_status, register};
use podhost::model::eviction::parse_thresholds;
use podhost::model::node::{
    HostFacts, NodePressure, NodeSettings, Reserved, node_object, parse_node_labels, parse_taints,
};

fn fixture(name: &str) -> Replay {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/cluster")
        .join(name);
    Replay::load(&path).unwrap()
}

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

fn settings(labels: &str, taints: &str, eviction_hard: &str) -> NodeSettings {
    NodeSettings {
        name: "podhost-a".into(),
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

fn condition<'a>(status: &'a serde_json::Value, type_: &str) -> &'a serde_json::Value {
    status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == type_)
        .unwrap_or_else(|| panic!("no {type_} condition in {status}"))
}

fn asked(replay: &Replay, method: &str, path_end: &str) -> Vec<serde_json::Value> {
    replay
        .asked()
        .into_iter()
        .filter(|e| e.method == method && e.path.ends_with(path_end))
        .map(|e| e.request.unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn first_registration_creates_node_and_lease_and_posts_ready() {
    let replay = fixture("register-new.jsonl");
    let client = replay.client();
    let node_settings = settings("tier=edge", "dedicated=edge:NoSchedule", "");
    let node = node_object(&host(), &node_settings);

    let registered = register::register_once(&client, &node).await.unwrap();
    let uid = registered.metadata.uid.clone().unwrap();
    assert_eq!(
        uid, "c4cf576b-90f5-4cd6-bab1-83ea8d0615a4",
        "the server's UID"
    );
    let posted = &asked(&replay, "POST", "/api/v1/nodes")[0];
    assert_eq!(posted["metadata"]["labels"]["tier"], "edge");
    assert_eq!(
        posted["metadata"]["labels"]["kubernetes.io/hostname"],
        "podhost-a"
    );
    assert_eq!(posted["spec"]["taints"][0]["key"], "dedicated");
    assert_eq!(posted["status"]["allocatable"]["cpu"], "1900m");
    assert_eq!(
        posted["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"],
        10250
    );

    let leases: Api<Lease> = Api::namespaced(client.clone(), lease::LEASE_NAMESPACE);
    let duration = Duration::from_secs(40);
    let created = lease::renew_once(&leases, None, "podhost-a", &uid, duration)
        .await
        .unwrap();
    let lease_posted = &asked(&replay, "POST", "/leases")[0];
    assert_eq!(lease_posted["spec"]["holderIdentity"], "podhost-a");
    assert_eq!(lease_posted["spec"]["leaseDurationSeconds"], 40);
    assert_eq!(
        lease_posted["metadata"]["ownerReferences"][0]["uid"],
        uid.as_str()
    );
    assert_eq!(
        lease_posted["metadata"]["ownerReferences"][0]["kind"],
        "Node"
    );

    let nodes: Api<Node> = Api::all(client.clone());
    let conditions = node_status::post_once(
        &nodes,
        &host(),
        &node_settings,
        &NodePressure::default(),
        &[],
    )
    .await
    .unwrap();
    assert_eq!(conditions.len(), 4);
    let patch = &asked(&replay, "PATCH", "/nodes/podhost-a/status")[0];
    let posted: Vec<(String, String, String)> = patch["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["type"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
                c["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        posted,
        [
            ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
            ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
            ("PIDPressure", "False", "KubeletHasSufficientPID"),
            ("Ready", "True", "KubeletReady"),
        ]
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
    );

    // The renewal updates the Lease as the server returned it (its resourceVersion).
    let renewed = lease::renew_once(&leases, Some(created.clone()), "podhost-a", &uid, duration)
        .await
        .unwrap();
    let put = &asked(&replay, "PUT", "/leases/podhost-a")[0];
    assert_eq!(
        put["metadata"]["resourceVersion"],
        created.metadata.resource_version.clone().unwrap().as_str()
    );
    assert!(renewed.spec.unwrap().renew_time.is_some());
    assert!(replay.unexpected().is_empty(), "{:?}", replay.unexpected());
}

#[tokio::test]
async fn re_registration_patches_only_the_labels_that_differ_and_posts_pressure() {
    let replay = fixture("register-existing.jsonl");
    let client = replay.client();
    let node_settings = settings("tier=core,zone=z1", "", "nodefs.available<50%");
    let node = node_object(&host(), &node_settings);

    let registered = register::register_once(&client, &node).await.unwrap();
    let patch = &asked(&replay, "PATCH", "/api/v1/nodes/podhost-a")[0];
    assert_eq!(
        *patch,
        serde_json::json!({"metadata": {"labels": {"tier": "core", "zone": "z1"}}}),
        "only what differs from the Node the server has (tier=edge, no zone)"
    );
    let labels = registered.metadata.labels.unwrap();
    assert_eq!(
        (labels["tier"].as_str(), labels["zone"].as_str()),
        ("core", "z1")
    );
    // The kubelet leaves the taints of an existing Node alone.
    assert!(registered.spec.unwrap().taints.is_some());

    let nodes: Api<Node> = Api::all(client.clone());
    let pressure = NodePressure {
        disk: true,
        ..NodePressure::default()
    };
    node_status::post_once(&nodes, &host(), &node_settings, &pressure, &[])
        .await
        .unwrap();
    let status = &asked(&replay, "PATCH", "/nodes/podhost-a/status")[0]["status"];
    let disk = condition(status, "DiskPressure");
    assert_eq!(disk["status"], "True");
    assert_eq!(disk["reason"], "KubeletHasDiskPressure");
    let memory = condition(status, "MemoryPressure");
    assert_eq!(
        memory["lastTransitionTime"], "2026-11-24T16:08:19Z",
        "an unchanged condition keeps the transition time the server has"
    );
    // Half the disk held back by the hard threshold.
    assert_eq!(status["allocatable"]["ephemeral-storage"], "132106042Ki");

    let leases: Api<Lease> = Api::namespaced(client, lease::LEASE_NAMESPACE);
    let uid = "c4cf576b-90f5-4cd6-bab1-83ea8d0615a4";
    let existing = lease::renew_once(&leases, None, "podhost-a", uid, Duration::from_secs(40))
        .await
        .unwrap();
    assert_eq!(
        existing.spec.unwrap().holder_identity.as_deref(),
        Some("podhost-a")
    );
    assert!(
        asked(&replay, "POST", "/leases").is_empty(),
        "an existing Lease is updated, not created again"
    );
    assert!(replay.unexpected().is_empty(), "{:?}", replay.unexpected());
}

#[tokio::test]
async fn a_request_with_no_recorded_answer_is_an_error_not_a_guess() {
    let replay = fixture("register-new.jsonl");
    let nodes: Api<Node> = Api::all(replay.client());
    let error = nodes.get("someone-else").await.unwrap_err();
    assert!(error.to_string().contains("no recorded answer"), "{error}");
    assert_eq!(replay.unexpected(), ["GET /api/v1/nodes/someone-else"]);
}

/// `pods.jsonl` (scripts/cluster/record-pod-fixture.sh): the node `podhost-a` ran two
/// pods bound to it by the API server — `web`, deleted with grace 5 (its final status,
/// then the node's delete with grace 0), and `stubborn`, force deleted (the node's
/// final status write found it gone) — beside a pod carrying the mirror annotation.
fn recorded_requests(method: &str, path_end: &str) -> Vec<serde_json::Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cluster/pods.jsonl");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<podhost::cluster::record::Exchange>(l).unwrap())
        .filter(|e| e.method == method && e.path.ends_with(path_end))
        .map(|e| e.request.unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn the_node_follows_the_pods_bound_to_it_and_leaves_mirror_pods_alone() {
    let replay = fixture("pods.jsonl");
    let mut bound = podhost::cluster::pods::watch_bound_pods(replay.client(), "podhost-a");
    let last = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            bound.changed().await.unwrap();
            let view = bound.borrow_and_update().clone();
            if view.gone.len() == 2 {
                return view;
            }
        }
    })
    .await
    .expect("both deletions seen");
    assert!(last.synced);
    // The mirror pod was listed and never deleted: only the filter keeps it out.
    assert!(last.pods.is_empty(), "{:?}", last.pods.keys());
    let gone: Vec<(&str, Option<i64>)> = last
        .gone
        .values()
        .map(|(_, p)| {
            (
                p.metadata.name.as_deref().unwrap(),
                p.metadata.deletion_grace_period_seconds,
            )
        })
        .collect();
    assert!(gone.contains(&("web", Some(0))), "{gone:?}");
    assert!(gone.contains(&("stubborn", Some(0))), "{gone:?}");
    let lists: Vec<String> = replay
        .asked()
        .into_iter()
        .filter(|e| e.path == "/api/v1/pods")
        .map(|e| e.query)
        .collect();
    assert!(
        lists
            .iter()
            .all(|q| q.contains("fieldSelector=spec.nodeName%3Dpodhost-a")),
        "{lists:?}"
    );
    assert!(replay.unexpected().is_empty(), "{:?}", replay.unexpected());
}

#[tokio::test]
async fn pod_statuses_and_the_final_delete_are_written_as_the_server_took_them() {
    use podhost::cluster::pod_status::{PodWrite, delete_terminated, patch_status};
    let replay = fixture("pods.jsonl");
    let client = replay.client();
    for (name, last_answer) in [("web", PodWrite::Done), ("stubborn", PodWrite::Gone)] {
        let patches = recorded_requests("PATCH", &format!("/pods/{name}/status"));
        assert!(patches.len() >= 3, "{name}: {patches:?}");
        for (i, p) in patches.iter().enumerate() {
            let uid = p["metadata"]["uid"].as_str().unwrap();
            let status = serde_json::from_value(p["status"].clone()).unwrap();
            let written = patch_status(&client, "default", name, uid, &status)
                .await
                .unwrap();
            let expected = if i + 1 == patches.len() {
                last_answer
            } else {
                PodWrite::Done
            };
            assert_eq!(written, expected, "{name} patch {i}");
        }
        // Each patch carried the pod's UID as precondition and the status alone.
        for sent in asked(&replay, "PATCH", &format!("/pods/{name}/status")) {
            let keys: Vec<&String> = sent.as_object().unwrap().keys().collect();
            assert_eq!(keys, ["metadata", "status"]);
        }
    }
    // web's final status: terminal (its container exited 0 on TERM), then the delete.
    let web = recorded_requests("PATCH", "/pods/web/status");
    let last = &web.last().unwrap()["status"];
    assert_eq!(last["phase"], "Succeeded");
    assert_eq!(
        last["containerStatuses"][0]["state"]["terminated"]["exitCode"],
        0
    );
    let uid = web[0]["metadata"]["uid"].as_str().unwrap();
    let deleted = delete_terminated(&client, "default", "web", uid)
        .await
        .unwrap();
    assert_eq!(deleted, PodWrite::Done);
    let sent = &asked(&replay, "DELETE", "/pods/web")[0];
    assert_eq!(sent["gracePeriodSeconds"], 0);
    assert_eq!(sent["preconditions"]["uid"], uid);
    assert!(replay.unexpected().is_empty(), "{:?}", replay.unexpected());
}

/// The node's watch of its own Node, against a real server's answers while an
/// administrator ran `kubectl label node podhost-n tier=core` and `kubectl taint node
/// podhost-n maintenance=yes:NoExecute` (record-node-fixture.sh): the follower ends on
/// the labelled, tainted Node, and admission against it lets a `tier: core` pod in
/// only if it tolerates the taint.
#[tokio::test]
async fn own_node_watch_sees_an_administrators_labels_and_taints() {
    use k8s_openapi::api::core::v1::{Pod, PodSpec, Toleration};
    use podhost::model::admission::{NodeView, Resources, Usage, general_predicates};

    let replay = fixture("own-node.jsonl");
    let mut node = podhost::cluster::own_node::watch_own_node(replay.client(), "podhost-n");
    let tainted = |n: &Node| {
        n.spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|t| t.iter().any(|t| t.key == "maintenance"))
    };
    let latest = tokio::time::timeout(
        Duration::from_secs(10),
        node.wait_for(|n| n.as_deref().is_some_and(tainted)),
    )
    .await
    .expect("the watch delivers the tainted Node")
    .unwrap()
    .clone()
    .unwrap();
    assert!(replay.unexpected().is_empty(), "{:?}", replay.unexpected());
    let asked = replay.asked();
    assert!(
        asked.iter().all(|e| e.path == "/api/v1/nodes"
            && e.query.contains("fieldSelector=metadata.name%3Dpodhost-n")),
        "only its own Node: {asked:?}"
    );

    let own = NodeView {
        name: "podhost-n".into(),
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

/// `podcidr.jsonl` (scripts/cluster/record-podcidr-fixture.sh): the node `podhost-a`,
/// with the bridge pod network and no `--pod-cidr`, registered without a podCIDR and
/// watched its own Node; the podCIDR 10.244.7.0/24 was then set (as
/// kube-controller-manager does) and reached the node through that watch.
#[tokio::test]
async fn a_pod_cidr_set_after_registration_reaches_the_node_through_its_own_node_watch() {
    use podhost::cluster::pod_cidr::{follow, node_pod_cidrs};
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cluster/podcidr.jsonl");
    let registered: Node = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<podhost::cluster::record::Exchange>(l).unwrap())
        .find(|e| e.method == "POST" && e.path == "/api/v1/nodes")
        .map(|e| serde_json::from_str(&e.response).unwrap())
        .expect("the registration");
    assert!(
        node_pod_cidrs(&registered).is_empty(),
        "registered with a podCIDR"
    );

    let replay = fixture("podcidr.jsonl");
    let own = podhost::cluster::own_node::watch_own_node(replay.client(), "podhost-a");
    let (tx, rx) = tokio::sync::watch::channel(None);
    // (The replayed watch's events come at once, so only the outcome is checked: the
    // follower ends once the Node has its podCIDR.)
    let follower = tokio::spawn(follow(own, tx));
    tokio::time::timeout(Duration::from_secs(10), follower)
        .await
        .expect("the podCIDR seen in the recorded watch")
        .unwrap();
    assert_eq!(*rx.borrow(), Some(vec!["10.244.7.0/24".to_string()]));
    // Only its own Node, listed then watched.
    let asked: Vec<String> = replay
        .asked()
        .into_iter()
        .filter(|e| e.path == "/api/v1/nodes")
        .map(|e| e.query)
        .collect();
    assert!(asked.len() >= 2, "{asked:?}");
    assert!(
        asked
            .iter()
            .all(|q| q.contains("fieldSelector=metadata.name%3Dpodhost-a")),
        "{asked:?}"
    );
    assert!(asked[1].contains("watch=true"), "{asked:?}");
}
