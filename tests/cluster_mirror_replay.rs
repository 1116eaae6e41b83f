//! Mirror pods against recorded exchanges of a real kube-apiserver (v1.20.2, `Node,RBAC`
//! authorization, NodeRestriction admission): `mirror.jsonl`, recorded by
//! scripts/cluster/record-mirror-fixture.sh with the node `podhost-m` — a mirror pod
//! `sold-podhost-m` no static pod has (deleted as an orphan), a static pod `sweb`
//! whose mirror pod is created, deleted with kubectl (deleted by the node with grace 0
//! and created again), replaced when the manifest is edited, and deleted when it is
//! removed. Each step's plan is made from what the server showed (its list and watch
//! events), carried out against its recorded answers, and the requests are checked
//! against what the server took from the node.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use podhost::cluster::mirror_client::{
    MirrorCreate, NodeOwner, create_mirror, delete_mirror, mirror_pod,
};
use podhost::cluster::mirror_plan::{DeleteReason, MirrorAction, StaticPodState, plan};
use podhost::cluster::pod_status::{PodWrite, patch_status};
use podhost::cluster::pods::{ANNOTATION_CONFIG_MIRROR, BoundPods, MirrorPods, is_mirror_pod};
use podhost::cluster::record::Exchange;
use podhost::cluster::replay::Replay;

const NODE: &str = "podhost-m";
const SWEB: &str = "sweb-podhost-m";

fn fixture_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cluster/mirror.jsonl")
}

fn recorded() -> Vec<Exchange> {
    std::fs::read_to_string(fixture_path())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn recorded_bodies(method: &str, path_end: &str) -> Vec<serde_json::Value> {
    recorded()
        .into_iter()
        .filter(|e| e.method == method && e.path.ends_with(path_end))
        .map(|e| e.request.unwrap_or_default())
        .collect()
}

/// The mirror pods as the server showed them: its first list, then after each line of
/// the watch (an event of another pod leaves the view as it was).
fn server_views() -> Vec<MirrorPods> {
    let exchanges = recorded();
    let list = exchanges
        .iter()
        .find(|e| e.path == "/api/v1/pods" && !e.query.contains("watch=true"))
        .unwrap();
    let items: serde_json::Value = serde_json::from_str(&list.response).unwrap();
    let mut view = MirrorPods {
        synced: true,
        ..MirrorPods::default()
    };
    let add = |view: &mut MirrorPods, pod: Pod| {
        if is_mirror_pod(&pod) {
            view.pods
                .insert(pod.metadata.uid.clone().unwrap(), Arc::new(pod));
        }
    };
    for item in items["items"].as_array().unwrap() {
        add(&mut view, serde_json::from_value(item.clone()).unwrap());
    }
    let mut views = vec![view.clone()];
    let watch = exchanges
        .iter()
        .find(|e| e.path == "/api/v1/pods" && e.query.contains("watch=true"))
        .unwrap();
    for line in watch.response.lines().filter(|l| !l.trim().is_empty()) {
        let event: serde_json::Value = serde_json::from_str(line).unwrap();
        let pod: Pod = serde_json::from_value(event["object"].clone()).unwrap();
        if is_mirror_pod(&pod) && event["type"] == "DELETED" {
            view.pods.remove(pod.metadata.uid.as_deref().unwrap());
        } else {
            add(&mut view, pod);
        }
        views.push(view.clone());
    }
    views
}

/// The static pod `sweb` as the node ran it, from the mirror pod the node sent (its
/// name, labels, annotations and spec are the static pod's).
fn static_pod_of(sent: &serde_json::Value) -> Pod {
    let mut pod: Pod = serde_json::from_value(sent.clone()).unwrap();
    pod.metadata
        .annotations
        .as_mut()
        .unwrap()
        .remove(ANNOTATION_CONFIG_MIRROR);
    pod.metadata.owner_references = None;
    pod.status = Some(PodStatus {
        phase: Some("Running".into()),
        ..PodStatus::default()
    });
    pod
}

fn running(hash: &str) -> StaticPodState {
    StaticPodState {
        namespace: "default".into(),
        name: SWEB.into(),
        hash: hash.into(),
        terminating: false,
    }
}

#[tokio::test]
async fn mirror_pods_are_planned_and_written_as_the_server_took_them() {
    let replay = Replay::load(&fixture_path()).unwrap();
    let client = replay.client();
    let node: serde_json::Value = serde_json::from_str(
        &recorded()
            .iter()
            .find(|e| e.method == "POST" && e.path == "/api/v1/nodes")
            .unwrap()
            .response,
    )
    .unwrap();
    let owner = NodeOwner {
        name: NODE.into(),
        uid: node["metadata"]["uid"].as_str().unwrap().into(),
    };
    let creates = recorded_bodies("POST", "/namespaces/default/pods");
    assert_eq!(creates.len(), 3, "created, created again, replaced");
    let hash = |i: usize| {
        creates[i]["metadata"]["annotations"][ANNOTATION_CONFIG_MIRROR]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (h1, h2) = (hash(0), hash(2));
    assert_eq!(hash(1), h1, "the mirror created again has the same hash");
    assert_ne!(h1, h2, "the edited manifest has another hash");
    let views = server_views();

    // 1. Start: the first list holds a mirror pod of no static pod; sweb has none.
    let first = views[0].states();
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0].name, format!("sold-{NODE}"));
    let actions = plan(&[running(&h1)], &first);
    assert_eq!(
        actions,
        [
            MirrorAction::Delete {
                namespace: "default".into(),
                name: format!("sold-{NODE}"),
                uid: first[0].uid.clone(),
                reason: DeleteReason::Orphan,
            },
            MirrorAction::Create {
                namespace: "default".into(),
                name: SWEB.into(),
                hash: h1.clone(),
            }
        ]
    );
    let written = delete_mirror(&client, "default", &first[0].name, &first[0].uid)
        .await
        .unwrap();
    assert_eq!(written, PodWrite::Done);
    let static_v1 = static_pod_of(&creates[0]);
    let (how, u1) = create_mirror(&client, &mirror_pod(&static_v1, &h1, &owner))
        .await
        .unwrap();
    assert_eq!(how, MirrorCreate::Created);
    let u1 = u1.unwrap();

    // Its status goes to the mirror pod, with the mirror pod's UID as precondition.
    let patches = recorded_bodies("PATCH", &format!("/pods/{SWEB}/status"));
    let to_u1: Vec<&serde_json::Value> = patches
        .iter()
        .filter(|p| p["metadata"]["uid"] == u1.as_str())
        .collect();
    assert!(
        !to_u1.is_empty(),
        "no status written to the first mirror pod"
    );
    for p in &to_u1 {
        let status: PodStatus = serde_json::from_value(p["status"].clone()).unwrap();
        let w = patch_status(&client, "default", SWEB, &u1, &status)
            .await
            .unwrap();
        assert_eq!(w, PodWrite::Done);
    }
    assert_eq!(to_u1.last().unwrap()["status"]["phase"], "Running");

    // 2. kubectl delete: the watch shows the mirror pod marked for deletion.
    let marked = views
        .iter()
        .map(MirrorPods::states)
        .find(|s| s.iter().any(|m| m.uid == u1 && m.deleting))
        .expect("the watch showed the mirror pod being deleted");
    let actions = plan(&[running(&h1)], &marked);
    assert_eq!(
        actions,
        [
            MirrorAction::Delete {
                namespace: "default".into(),
                name: SWEB.into(),
                uid: u1.clone(),
                reason: DeleteReason::Deleting,
            },
            MirrorAction::Create {
                namespace: "default".into(),
                name: SWEB.into(),
                hash: h1.clone(),
            }
        ]
    );
    let written = delete_mirror(&client, "default", SWEB, &u1).await.unwrap();
    assert_eq!(written, PodWrite::Done);
    let (how, u2) = create_mirror(&client, &mirror_pod(&static_v1, &h1, &owner))
        .await
        .unwrap();
    assert_eq!(how, MirrorCreate::Created);
    let u2 = u2.unwrap();
    assert_ne!(u2, u1, "created again under a new UID");

    // 3. The manifest edited: the mirror pod with the old hash is replaced.
    let shown = views
        .iter()
        .map(MirrorPods::states)
        .find(|s| s.iter().any(|m| m.uid == u2))
        .unwrap();
    let actions = plan(&[running(&h2)], &shown);
    assert!(
        matches!(&actions[..], [MirrorAction::Delete { uid, reason: DeleteReason::Outdated, .. }, MirrorAction::Create { hash, .. }] if *uid == u2 && *hash == h2),
        "{actions:?}"
    );
    assert_eq!(
        delete_mirror(&client, "default", SWEB, &u2).await.unwrap(),
        PodWrite::Done
    );
    let (how, u3) = create_mirror(
        &client,
        &mirror_pod(&static_pod_of(&creates[2]), &h2, &owner),
    )
    .await
    .unwrap();
    assert_eq!(how, MirrorCreate::Created);
    let u3 = u3.unwrap();

    // 4. The manifest removed and the static pod terminated: an orphan.
    let shown = views
        .iter()
        .map(MirrorPods::states)
        .find(|s| s.iter().any(|m| m.uid == u3))
        .unwrap();
    assert!(
        matches!(&plan(&[], &shown)[..], [MirrorAction::Delete { uid, reason: DeleteReason::Orphan, .. }] if *uid == u3)
    );
    assert_eq!(
        delete_mirror(&client, "default", SWEB, &u3).await.unwrap(),
        PodWrite::Done
    );
    assert!(
        views.last().unwrap().pods.is_empty(),
        "a mirror pod is left"
    );

    // What was sent is what the server took from the node: the same mirror pods
    // (annotation, the Node as controller owner), deletes with grace 0 and the UID.
    let sent: Vec<Exchange> = replay.asked();
    let sent_creates: Vec<&serde_json::Value> = sent
        .iter()
        .filter(|e| e.method == "POST")
        .filter_map(|e| e.request.as_ref())
        .collect();
    assert_eq!(sent_creates, creates.iter().collect::<Vec<_>>());
    let owner_ref = &creates[0]["metadata"]["ownerReferences"][0];
    assert_eq!(owner_ref["kind"], "Node");
    assert_eq!(owner_ref["uid"], owner.uid.as_str());
    assert_eq!(owner_ref["controller"], true);
    let deletes: Vec<&serde_json::Value> = sent
        .iter()
        .filter(|e| e.method == "DELETE")
        .filter_map(|e| e.request.as_ref())
        .collect();
    assert_eq!(deletes.len(), 4);
    assert_eq!(
        deletes,
        recorded_bodies("DELETE", "").iter().collect::<Vec<_>>()
    );
    for d in deletes {
        assert_eq!(d["gracePeriodSeconds"], 0);
        assert!(d["preconditions"]["uid"].is_string());
    }
    assert!(replay.unexpected().is_empty(), "{:?}", replay.unexpected());
}

/// The recording with its watch cut after `lines` events.
fn replay_cut(lines: usize) -> Replay {
    let exchanges = recorded()
        .into_iter()
        .map(|mut e| {
            if e.query.contains("watch=true") {
                e.response = e
                    .response
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                    .take(lines)
                    .map(|l| format!("{l}\n"))
                    .collect();
            }
            e
        })
        .collect();
    Replay::from_exchanges(exchanges)
}

/// Follows the node's pods against `replay` until the recorded watch is used up (the
/// watcher watches again; nothing more is recorded, so that watch stays quiet).
async fn follow_to_the_end(replay: &Replay) -> (Arc<BoundPods>, Arc<MirrorPods>) {
    let pods = podhost::cluster::pods::watch_node_pods(replay.client(), NODE);
    let rewatched = || {
        replay
            .asked()
            .iter()
            .filter(|e| e.query.contains("watch=true"))
            .count()
            >= 2
    };
    tokio::time::timeout(Duration::from_secs(10), async {
        while !rewatched() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the recorded watch used up");
    // Let the watcher publish what it took.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let bound = pods.bound.borrow().clone();
    let mirrors = pods.mirrors.borrow().clone();
    (bound, mirrors)
}

#[tokio::test]
async fn the_pod_watch_carries_mirror_pods_apart_from_the_pods_to_run() {
    let views = server_views();
    assert!(views.len() > 5, "a short watch: {} events", views.len() - 1);
    // After every prefix of the watch, the mirror channel holds the mirror pods the
    // server showed at that point, and none of them is a pod to run.
    for (events, expected) in views.iter().enumerate() {
        let replay = replay_cut(events);
        let (bound, mirrors) = follow_to_the_end(&replay).await;
        assert!(mirrors.synced);
        let got: Vec<&String> = mirrors.pods.keys().collect();
        let want: Vec<&String> = expected.pods.keys().collect();
        assert_eq!(got, want, "after {events} watch events");
        assert_eq!(
            mirrors.states(),
            expected.states(),
            "after {events} watch events"
        );
        assert!(bound.synced);
        assert!(
            bound.pods.is_empty() && bound.gone.is_empty(),
            "mirror pods leaked into the pods to run after {events} events: {:?} {:?}",
            bound.pods.keys(),
            bound.gone.keys()
        );
    }
    // The recording holds every case: an orphan, and sweb created, marked for deletion,
    // created again and replaced.
    let uids: std::collections::BTreeSet<String> =
        views.iter().flat_map(|v| v.pods.keys().cloned()).collect();
    assert_eq!(uids.len(), 4, "{uids:?}");
    assert!(views.iter().any(|v| v.states().iter().any(|m| m.deleting)));
}
