//! Cluster mode's pods against a live kube-apiserver (tests/common_apiserver: the
//! pinned release with etcd, `Node,RBAC` and NodeRestriction; each test a node and a
//! namespace of its own): the watch of the pods bound to the node, their status
//! writes and final deletion, mirror pods, the ConfigMaps and Secrets the pods name,
//! and their service account tokens. podhost's library functions talk to the server as
//! the node; an administrator creates and deletes what a user would, and reads back
//! what the server holds; what podhost sent is read from its own `--kube-record`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common_apiserver;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use common_apiserver::{ControlPlane, Options, control_plane, record_file, sent, until};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, PodStatus, Secret};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use podhost::cluster::pod_status::{PodWrite, delete_terminated, patch_status};
use podhost::cluster::pods::MirrorPods;
use podhost::model::env::ConfigLookup;
use podhost::model::node::{NodeSettings, Reserved, node_object};
use serde_json::json;
use tokio::sync::watch;

const NODES: &[&str] = &[
    "bound-node",
    "status-node",
    "mirror-node",
    "objects-node",
    "token-node",
];

fn plane() -> &'static ControlPlane {
    control_plane(&Options::api_server(NODES))
}

const WAIT: Duration = Duration::from_secs(20);

/// Waits for the mirror pods' channel to show a listed set for which `done` holds.
async fn until_synced(
    rx: &mut watch::Receiver<Arc<MirrorPods>>,
    what: &str,
    done: impl Fn(&MirrorPods) -> bool,
) -> Arc<MirrorPods> {
    until(rx, what, |m| m.synced && done(m)).await
}

/// A pod bound to `node` (as the scheduler binds one), `spec` merged into a one
/// container spec.
fn pod(name: &str, node: &str, spec: serde_json::Value) -> Pod {
    let mut value = json!({
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "app", "image": "localhost/busybox:latest",
                            "command": ["sleep", "3600"]}]
        }
    });
    if let serde_json::Value::Object(extra) = spec {
        for (k, v) in extra {
            value["spec"][k] = v;
        }
    }
    serde_json::from_value(value).unwrap()
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap()
}

fn name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap()
}

#[tokio::test]
async fn the_node_follows_the_pods_bound_to_it_and_leaves_mirror_pods_alone() {
    let cp = plane();
    let admin = cp.admin().await;
    common_apiserver::namespace(&admin, "bound").await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "bound");
    let post = PostParams::default();
    // A look-alike mirror pod (the annotation alone), and a pod of another node.
    let mut look_alike = pod("look-alike", "bound-node", json!({}));
    look_alike.metadata.annotations =
        Some([("kubernetes.io/config.mirror".to_string(), "h".to_string())].into());
    pods.create(&post, &look_alike).await.unwrap();
    pods.create(&post, &pod("elsewhere", "other-node", json!({})))
        .await
        .unwrap();

    let (_dir, record) = record_file("bound");
    let client = cp.node_recorded("bound-node", &record).await;
    let mut bound = podhost::cluster::pods::watch_bound_pods(client.clone(), "bound-node");
    let listed = until(&mut bound, "the first list", |b| b.synced).await;
    assert!(listed.pods.is_empty(), "{:?}", listed.pods.keys());

    // The API server binds two pods to the node: `web` without a token, `tokened`
    // with the default service account's (the ServiceAccount admission's volume).
    let web = pods
        .create(
            &post,
            &pod(
                "web",
                "bound-node",
                json!({"automountServiceAccountToken": false}),
            ),
        )
        .await
        .unwrap();
    let stubborn = pods
        .create(&post, &pod("stubborn", "bound-node", json!({})))
        .await
        .unwrap();
    let seen = until(&mut bound, "web and stubborn", |b| {
        b.pods.contains_key(&uid(&web)) && b.pods.contains_key(&uid(&stubborn))
    })
    .await;
    assert_eq!(seen.pods.len(), 2, "{:?}", seen.pods.keys());

    // The pods as the live server defaults them run without a FieldNotHonoured
    // warning; as a manifest, the same spec would (a static pod gets no token).
    let entries = podhost::daemon::ApiPodCache::default().entries(&seen);
    assert_eq!(entries.len(), 2);
    for entry in &entries {
        assert_eq!(entry.warnings, Vec::<String>::new(), "{}", entry.name);
    }
    let web_spec = json!({"spec": seen.pods[&uid(&web)].spec});
    let as_manifest = podhost::source::unhonoured_fields(&web_spec);
    assert!(
        as_manifest
            .iter()
            .any(|w| w.starts_with("spec.automountServiceAccountToken")),
        "{as_manifest:?}"
    );

    // `web` deleted with grace 5: marked, then gone once the node deletes it (grace 0,
    // its UID as precondition).
    pods.delete("web", &DeleteParams::default().grace_period(5))
        .await
        .unwrap();
    let marked = until(&mut bound, "web marked for deletion", |b| {
        b.pods
            .get(&uid(&web))
            .is_some_and(|p| p.metadata.deletion_timestamp.is_some())
    })
    .await;
    assert_eq!(
        marked.pods[&uid(&web)]
            .metadata
            .deletion_grace_period_seconds,
        Some(5)
    );
    let deleted = delete_terminated(&client, "bound", "web", &uid(&web))
        .await
        .unwrap();
    assert_eq!(deleted, PodWrite::Done);
    // `stubborn` force deleted: gone at once.
    pods.delete("stubborn", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let last = until(&mut bound, "both deletions", |b| b.gone.len() == 2).await;
    assert!(last.pods.is_empty(), "{:?}", last.pods.keys());
    let gone: Vec<(&str, Option<i64>)> = last
        .gone
        .values()
        .map(|(_, p)| (name(p), p.metadata.deletion_grace_period_seconds))
        .collect();
    assert!(gone.contains(&("web", Some(0))), "{gone:?}");
    assert!(gone.contains(&("stubborn", Some(0))), "{gone:?}");
    assert!(pods.get_opt("web").await.unwrap().is_none());
    // The look-alike is still there, never taken for a pod to run.
    assert!(pods.get_opt("look-alike").await.unwrap().is_some());

    // The node's delete: grace 0 and the UID precondition, nothing else.
    let delete = &sent(&record, "DELETE", "/namespaces/bound/pods/web")[0];
    assert_eq!(delete["gracePeriodSeconds"], 0);
    assert_eq!(delete["preconditions"]["uid"], uid(&web).as_str());
    // Only the node's own pods, listed then watched.
    for e in common_apiserver::recorded(&record)
        .iter()
        .filter(|e| e.path == "/api/v1/pods")
    {
        assert!(
            e.query.contains("fieldSelector=spec.nodeName%3Dbound-node"),
            "{}",
            e.query
        );
    }
}

fn running_status() -> PodStatus {
    let now = podhost::model::k8s_time::to_k8s(chrono::Utc::now());
    serde_json::from_value(json!({
        "phase": "Running",
        "hostIP": "192.0.2.2", "hostIPs": [{"ip": "192.0.2.2"}],
        "podIP": "10.1.0.5", "podIPs": [{"ip": "10.1.0.5"}],
        "startTime": now,
        "qosClass": "BestEffort",
        "conditions": [
            {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": now},
            {"type": "Initialized", "status": "True", "lastTransitionTime": now},
            {"type": "Ready", "status": "True", "lastTransitionTime": now},
            {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now}
        ],
        "containerStatuses": [{
            "name": "app", "ready": true, "started": true, "restartCount": 0,
            "image": "localhost/busybox:latest",
            "imageID": "sha256:0f7b8e1f1e9a9c1b7c0f2b3a4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f70",
            "containerID": "podhost://status-app",
            "state": {"running": {"startedAt": now}}
        }]
    }))
    .unwrap()
}

fn succeeded_status(running: &PodStatus) -> PodStatus {
    let mut status = running.clone();
    status.phase = Some("Succeeded".into());
    let now = podhost::model::k8s_time::to_k8s(chrono::Utc::now());
    for c in status.conditions.iter_mut().flatten() {
        if c.type_ == "Ready" || c.type_ == "ContainersReady" {
            c.status = "False".into();
            c.reason = Some("PodCompleted".into());
        }
    }
    status.container_statuses = Some(vec![
        serde_json::from_value(json!({
            "name": "app", "ready": false, "started": false, "restartCount": 0,
            "image": "localhost/busybox:latest",
            "imageID": "sha256:0f7b8e1f1e9a9c1b7c0f2b3a4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f70",
            "containerID": "podhost://status-app",
            "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                                     "startedAt": now, "finishedAt": now}}
        }))
        .unwrap(),
    ]);
    status
}

#[tokio::test]
async fn pod_statuses_and_the_final_delete_carry_the_pods_uid() {
    use podhost::model::status_reconcile::agrees;

    let cp = plane();
    let admin = cp.admin().await;
    common_apiserver::namespace(&admin, "status").await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "status");
    let post = PostParams::default();
    let spec = json!({"automountServiceAccountToken": false});
    let first = pods
        .create(&post, &pod("app", "status-node", spec.clone()))
        .await
        .unwrap();
    let (_dir, record) = record_file("status");
    let client = cp.node_recorded("status-node", &record).await;

    // Running, with a reason the node had, then without: the server's copy agrees
    // with what was written each time (what the reconcile compares every 10 s), and
    // a reason the node no longer has is removed, not left behind.
    let mut running = running_status();
    running.reason = Some("Starting".into());
    running.message = Some("still starting".into());
    let written = patch_status(&client, "status", "app", &uid(&first), &running)
        .await
        .unwrap();
    assert_eq!(written, PodWrite::Done);
    let api = pods.get("app").await.unwrap().status.unwrap();
    assert!(agrees(&running, &api), "{running:?}\nvs {api:?}");
    assert_eq!(api.reason.as_deref(), Some("Starting"));
    running.reason = None;
    running.message = None;
    patch_status(&client, "status", "app", &uid(&first), &running)
        .await
        .unwrap();
    let api = pods.get("app").await.unwrap().status.unwrap();
    assert!(agrees(&running, &api), "{running:?}\nvs {api:?}");
    assert_eq!((api.reason, api.message), (None, None));
    // Each patch carried the pod's UID as precondition and the status alone.
    let patches = sent(&record, "PATCH", "/namespaces/status/pods/app/status");
    assert_eq!(patches.len(), 2);
    for p in &patches {
        let keys: Vec<&String> = p.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["metadata", "status"]);
        assert_eq!(p["metadata"]["uid"], uid(&first).as_str());
    }

    // The pod deleted and created again under its name: the node's writes for the old
    // one find another pod and leave it alone — the patch refused as a change of the
    // immutable UID (422), the delete by its UID precondition (409).
    pods.delete("app", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let second = pods
        .create(&post, &pod("app", "status-node", spec))
        .await
        .unwrap();
    assert_ne!(uid(&second), uid(&first));
    let stale = patch_status(&client, "status", "app", &uid(&first), &running)
        .await
        .unwrap();
    assert_eq!(stale, PodWrite::Gone);
    assert_eq!(
        delete_terminated(&client, "status", "app", &uid(&first))
            .await
            .unwrap(),
        PodWrite::Gone
    );
    let now = pods.get("app").await.unwrap();
    assert_eq!(uid(&now), uid(&second), "the new pod is still there");
    assert_ne!(
        now.status.unwrap().phase.as_deref(),
        Some("Running"),
        "the old pod's status never reaches the new one"
    );
    let statuses: Vec<u16> = common_apiserver::recorded(&record)
        .iter()
        .map(|e| e.status)
        .collect();
    assert_eq!(statuses, [200, 200, 422, 409]);

    // The new pod runs, ends and is deleted by the node once terminated.
    let running = running_status();
    assert_eq!(
        patch_status(&client, "status", "app", &uid(&second), &running)
            .await
            .unwrap(),
        PodWrite::Done
    );
    let done = succeeded_status(&running);
    assert_eq!(
        patch_status(&client, "status", "app", &uid(&second), &done)
            .await
            .unwrap(),
        PodWrite::Done
    );
    let api = pods.get("app").await.unwrap().status.unwrap();
    assert!(agrees(&done, &api), "{done:?}\nvs {api:?}");
    assert_eq!(api.phase.as_deref(), Some("Succeeded"));
    assert_eq!(
        delete_terminated(&client, "status", "app", &uid(&second))
            .await
            .unwrap(),
        PodWrite::Done
    );
    assert!(pods.get_opt("app").await.unwrap().is_none());
    // Gone: a late status write is no error, and nothing more to write.
    assert_eq!(
        patch_status(&client, "status", "app", &uid(&second), &done)
            .await
            .unwrap(),
        PodWrite::Gone
    );
}

/// Mirror pods, each step planned from what the live watch shows and carried out as
/// the node: an orphan from before a restart deleted, a static pod's mirror created,
/// deleted with kubectl and created again, replaced when the manifest is edited, and
/// deleted when it is removed. The server checks each write (NodeRestriction: the
/// annotation, bound to the node, the Node as sole controller owner).
#[tokio::test]
async fn mirror_pods_are_created_recreated_replaced_and_orphans_deleted() {
    use podhost::cluster::mirror_client::{
        MirrorCreate, NodeOwner, create_mirror, delete_mirror, mirror_pod,
    };
    use podhost::cluster::mirror_plan::{DeleteReason, MirrorAction, StaticPodState, plan};

    const SWEB: &str = "sweb-mirror-node";
    let cp = plane();
    let admin = cp.admin().await;
    common_apiserver::namespace(&admin, "mirror").await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "mirror");
    let (_dir, record) = record_file("mirror");
    let client = cp.node_recorded("mirror-node", &record).await;
    let settings = NodeSettings {
        name: "mirror-node".into(),
        labels: Default::default(),
        taints: Vec::new(),
        kube_reserved: Reserved::default(),
        system_reserved: Reserved::default(),
        eviction_hard: Vec::new(),
        max_pods: 110,
        kubelet_port: 10250,
        kubelet_version: podhost::cluster::KUBELET_VERSION.into(),
    };
    let node = podhost::cluster::register::register_once(
        &client,
        &node_object(
            &common_apiserver::host_facts("mirror-node", "192.0.2.3"),
            &settings,
        ),
    )
    .await
    .unwrap();
    let owner = NodeOwner {
        name: "mirror-node".into(),
        uid: node.metadata.uid.clone().unwrap(),
    };
    let static_pod = |name: &str, image: &str| {
        let mut p = pod(name, "", json!({}));
        p.metadata.namespace = Some("mirror".into());
        let spec = p.spec.as_mut().unwrap();
        spec.node_name = None;
        spec.containers[0].image = Some(image.into());
        p
    };
    let running = |hash: &str| StaticPodState {
        namespace: "mirror".into(),
        name: SWEB.into(),
        hash: hash.into(),
        terminating: false,
    };

    // A mirror pod the node made before it restarted, whose static pod is gone.
    let old = static_pod("sold-mirror-node", "localhost/busybox:latest");
    let (how, orphan) = create_mirror(&client, &mirror_pod(&old, "h0", &owner))
        .await
        .unwrap();
    assert_eq!(how, MirrorCreate::Created);
    let orphan = orphan.unwrap();

    let node_pods = podhost::cluster::pods::watch_node_pods(client.clone(), "mirror-node");
    let mut mirrors = node_pods.mirrors;
    let bound = node_pods.bound;

    // 1. Start: the orphan is deleted, sweb's mirror created.
    let shown = until_synced(&mut mirrors, "the orphan listed", |m| {
        m.pods.contains_key(&orphan)
    })
    .await;
    let states = shown.states();
    assert_eq!(states.len(), 1, "{states:?}");
    assert_eq!(
        plan(&[running("h1")], &states),
        [
            MirrorAction::Delete {
                namespace: "mirror".into(),
                name: "sold-mirror-node".into(),
                uid: orphan.clone(),
                reason: DeleteReason::Orphan,
            },
            MirrorAction::Create {
                namespace: "mirror".into(),
                name: SWEB.into(),
                hash: "h1".into(),
            }
        ]
    );
    assert_eq!(
        delete_mirror(&client, "mirror", "sold-mirror-node", &orphan)
            .await
            .unwrap(),
        PodWrite::Done
    );
    let v1 = static_pod(SWEB, "localhost/busybox:latest");
    let (how, u1) = create_mirror(&client, &mirror_pod(&v1, "h1", &owner))
        .await
        .unwrap();
    assert_eq!(how, MirrorCreate::Created);
    let u1 = u1.unwrap();
    // A second create of the same mirror (the watch not caught up) is no error.
    let (again, none) = create_mirror(&client, &mirror_pod(&v1, "h1", &owner))
        .await
        .unwrap();
    assert_eq!((again, none), (MirrorCreate::Exists, None));
    until_synced(&mut mirrors, "sweb's mirror alone", |m| {
        m.pods.len() == 1 && m.pods.contains_key(&u1)
    })
    .await;
    let stored = pods.get(SWEB).await.unwrap();
    let annotations = stored.metadata.annotations.as_ref().unwrap();
    assert_eq!(annotations["kubernetes.io/config.mirror"], "h1");
    let owners = stored.metadata.owner_references.as_ref().unwrap();
    assert_eq!(owners.len(), 1);
    assert_eq!(
        (
            owners[0].kind.as_str(),
            owners[0].uid.as_str(),
            owners[0].controller
        ),
        ("Node", owner.uid.as_str(), Some(true))
    );
    // Its status goes to the mirror pod, with the mirror pod's UID as precondition.
    let status = PodStatus {
        phase: Some("Running".into()),
        ..PodStatus::default()
    };
    assert_eq!(
        patch_status(&client, "mirror", SWEB, &u1, &status)
            .await
            .unwrap(),
        PodWrite::Done
    );
    assert_eq!(
        pods.get(SWEB)
            .await
            .unwrap()
            .status
            .unwrap()
            .phase
            .as_deref(),
        Some("Running")
    );

    // 2. kubectl delete: the mirror pod marked for deletion is deleted and made again.
    pods.delete(SWEB, &DeleteParams::default()).await.unwrap();
    let shown = until_synced(&mut mirrors, "the mirror pod being deleted", |m| {
        m.states().iter().any(|s| s.uid == u1 && s.deleting)
    })
    .await;
    assert_eq!(
        plan(&[running("h1")], &shown.states()),
        [
            MirrorAction::Delete {
                namespace: "mirror".into(),
                name: SWEB.into(),
                uid: u1.clone(),
                reason: DeleteReason::Deleting,
            },
            MirrorAction::Create {
                namespace: "mirror".into(),
                name: SWEB.into(),
                hash: "h1".into(),
            }
        ]
    );
    assert_eq!(
        delete_mirror(&client, "mirror", SWEB, &u1).await.unwrap(),
        PodWrite::Done
    );
    let (how, u2) = create_mirror(&client, &mirror_pod(&v1, "h1", &owner))
        .await
        .unwrap();
    assert_eq!(how, MirrorCreate::Created);
    let u2 = u2.unwrap();
    assert_ne!(u2, u1, "created again under a new UID");

    // 3. The manifest edited: the mirror pod with the old hash is replaced.
    let shown = until_synced(&mut mirrors, "the recreated mirror", |m| {
        m.pods.len() == 1 && m.pods.contains_key(&u2)
    })
    .await;
    let actions = plan(&[running("h2")], &shown.states());
    assert!(
        matches!(&actions[..], [MirrorAction::Delete { uid, reason: DeleteReason::Outdated, .. }, MirrorAction::Create { hash, .. }] if *uid == u2 && hash == "h2"),
        "{actions:?}"
    );
    assert_eq!(
        delete_mirror(&client, "mirror", SWEB, &u2).await.unwrap(),
        PodWrite::Done
    );
    let v2 = static_pod(SWEB, "localhost/busybox:1.36");
    let (_, u3) = create_mirror(&client, &mirror_pod(&v2, "h2", &owner))
        .await
        .unwrap();
    let u3 = u3.unwrap();
    // A delete of the mirror already replaced finds another pod: left alone.
    assert_eq!(
        delete_mirror(&client, "mirror", SWEB, &u2).await.unwrap(),
        PodWrite::Gone
    );

    // 4. The manifest removed and the static pod terminated: an orphan.
    let shown = until_synced(&mut mirrors, "the replaced mirror", |m| {
        m.pods.len() == 1 && m.pods.contains_key(&u3)
    })
    .await;
    assert_eq!(
        shown.pods[&u3].spec.as_ref().unwrap().containers[0]
            .image
            .as_deref(),
        Some("localhost/busybox:1.36")
    );
    assert!(
        matches!(&plan(&[], &shown.states())[..], [MirrorAction::Delete { uid, reason: DeleteReason::Orphan, .. }] if *uid == u3)
    );
    assert_eq!(
        delete_mirror(&client, "mirror", SWEB, &u3).await.unwrap(),
        PodWrite::Done
    );
    until_synced(&mut mirrors, "no mirror pod left", |m| m.pods.is_empty()).await;

    // None of them ever was a pod to run.
    let bound = bound.borrow().clone();
    assert!(bound.synced);
    assert!(
        bound.pods.is_empty() && bound.gone.is_empty(),
        "{:?} {:?}",
        bound.pods.keys(),
        bound.gone.keys()
    );
    // The node's deletes: grace 0 and the mirror pod's UID.
    let deletes = sent(&record, "DELETE", "");
    assert_eq!(deletes.len(), 5);
    for d in deletes {
        assert_eq!(d["gracePeriodSeconds"], 0);
        assert!(d["preconditions"]["uid"].is_string());
    }
}

#[tokio::test]
async fn each_named_object_is_watched_alone_and_its_changes_arrive() {
    use podhost::cluster::objects::ObjectWatches;
    use podhost::model::config_refs::{ObjectKind, ObjectRef, ObjectSet, ObjectState};

    let cp = plane();
    let admin = cp.admin().await;
    common_apiserver::namespace(&admin, "objects").await;
    let post = PostParams::default();
    let config_maps: Api<ConfigMap> = Api::namespaced(admin.clone(), "objects");
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), "objects");
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "app-config"}, "data": {"greeting": "hello"}
    }))
    .unwrap();
    config_maps.create(&post, &cm).await.unwrap();
    let unrelated: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "unrelated"}, "data": {"k": "v"}}))
            .unwrap();
    config_maps.create(&post, &unrelated).await.unwrap();
    // The pod that names them: the Node authorizer lets the node read these two only.
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "objects");
    pods.create(
        &post,
        &pod(
            "conf",
            "objects-node",
            json!({
                "automountServiceAccountToken": false,
                "volumes": [{"name": "conf", "configMap": {"name": "app-config"}}],
                "containers": [{"name": "app", "image": "localhost/busybox:latest",
                    "env": [{"name": "TOKEN", "valueFrom":
                        {"secretKeyRef": {"name": "late-secret", "key": "token"}}}],
                    "volumeMounts": [{"name": "conf", "mountPath": "/conf"}]}]
            }),
        ),
    )
    .await
    .unwrap();

    let object = |kind, name: &str| ObjectRef {
        kind,
        namespace: "objects".into(),
        name: name.into(),
    };
    let (_dir, record) = record_file("objects");
    let (tx, mut rx) = watch::channel(Arc::new(ObjectSet::default()));
    let mut watches = ObjectWatches::new(cp.node_recorded("objects-node", &record).await, tx);
    let refs: BTreeSet<ObjectRef> = [
        object(ObjectKind::ConfigMap, "app-config"),
        object(ObjectKind::Secret, "late-secret"),
        object(ObjectKind::ConfigMap, "unrelated"),
    ]
    .into();
    watches.set_refs(&refs);
    assert_eq!(rx.borrow().pending(&refs).len(), 3, "all pending at first");
    let set = until(
        &mut rx,
        "the ConfigMap present and the Secret missing",
        |s| {
            s.config_map("objects", "app-config").is_some()
                && matches!(
                    s.secrets.get(&("objects".into(), "late-secret".into())),
                    Some(ObjectState::Missing)
                )
        },
    )
    .await;
    let greeting = |s: &ObjectSet| {
        s.config_map("objects", "app-config")
            .and_then(|c| c.data.as_ref()?.get("greeting").cloned())
    };
    assert_eq!(greeting(&set).as_deref(), Some("hello"));
    // Server bookkeeping is not kept.
    assert!(
        set.config_map("objects", "app-config")
            .unwrap()
            .metadata
            .managed_fields
            .is_none()
    );

    // Changed with `kubectl patch`, and the Secret created: both arrive.
    config_maps
        .patch(
            "app-config",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"greeting": "bye"}})),
        )
        .await
        .unwrap();
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "late-secret"}, "stringData": {"token": "t"}
    }))
    .unwrap();
    secrets.create(&post, &secret).await.unwrap();
    let set = until(
        &mut rx,
        "the patched ConfigMap and the created Secret",
        |s| greeting(s).as_deref() == Some("bye") && s.secret("objects", "late-secret").is_some(),
    )
    .await;
    let token = &set
        .secret("objects", "late-secret")
        .unwrap()
        .data
        .as_ref()
        .unwrap()["token"];
    assert_eq!(token.0, b"t");
    // An object no pod of the node names stays unread: the server refuses it.
    let unrelated_ref: BTreeSet<ObjectRef> = [object(ObjectKind::ConfigMap, "unrelated")].into();
    assert_eq!(set.pending(&unrelated_ref).len(), 1);
    let asked = common_apiserver::recorded(&record);
    assert!(
        asked
            .iter()
            .any(|e| e.path.ends_with("/configmaps") && e.status == 403),
        "{asked:?}"
    );
    // One object per request, never a namespace's collection.
    for e in &asked {
        assert_eq!(e.method, "GET");
        assert!(
            e.query.contains("fieldSelector=metadata.name%3D"),
            "{} {}",
            e.path,
            e.query
        );
    }

    // No pod names the Secret any more: forgotten; the ConfigMap stays as it was.
    watches.set_refs(&[object(ObjectKind::ConfigMap, "app-config")].into());
    let set = rx.borrow().clone();
    assert!(set.secrets.is_empty());
    assert!(matches!(
        set.config_maps
            .get(&("objects".into(), "app-config".into())),
        Some(ObjectState::Present(_))
    ));
}

#[tokio::test]
async fn a_projected_token_is_requested_bound_to_the_pod() {
    use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
    use podhost::cluster::objects::ObjectWatches;
    use podhost::model::config_refs::{ObjectSet, TokenRef};

    let cp = plane();
    let admin = cp.admin().await;
    common_apiserver::namespace(&admin, "tokens").await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "tokens");
    let tokened = pods
        .create(
            &PostParams::default(),
            &pod(
                "tokened",
                "token-node",
                json!({"serviceAccountName": "default"}),
            ),
        )
        .await
        .unwrap();
    let (_dir, record) = record_file("tokens");
    let (tx, mut rx) = watch::channel(Arc::new(ObjectSet::default()));
    let mut watches = ObjectWatches::new(cp.node_recorded("token-node", &record).await, tx);
    let token = TokenRef {
        namespace: "tokens".into(),
        service_account: "default".into(),
        pod_name: "tokened".into(),
        pod_uid: uid(&tokened),
        audience: String::new(),
        expiration_seconds: 600,
    };
    let refs: BTreeSet<TokenRef> = [token.clone()].into();
    watches.set_tokens(&refs);
    let set = tokio::time::timeout(WAIT, rx.wait_for(|s| s.pending_tokens(&refs).is_empty()))
        .await
        .expect("the token issued")
        .unwrap()
        .clone();
    let jwt = set.service_account_token(&token).unwrap().to_string();

    // What was asked: a token of the pod's service account, bound to the pod.
    let requests = sent(
        &record,
        "POST",
        "/namespaces/tokens/serviceaccounts/default/token",
    );
    assert_eq!(requests.len(), 1, "{requests:?}");
    let spec = &requests[0]["spec"];
    assert_eq!(spec["expirationSeconds"], 600);
    assert_eq!(spec["boundObjectRef"]["kind"], "Pod");
    assert_eq!(spec["boundObjectRef"]["name"], "tokened");
    assert_eq!(spec["boundObjectRef"]["uid"], token.pod_uid.as_str());
    // The API server's own audience: none asked for.
    assert!(spec.get("audiences").is_none(), "{spec}");

    // The server vouches for it as the service account, on behalf of the pod...
    let reviews: Api<TokenReview> = Api::all(admin.clone());
    let review = |jwt: String| TokenReview {
        spec: TokenReviewSpec {
            token: jwt,
            ..TokenReviewSpec::default()
        },
        ..TokenReview::default()
    };
    let reviewed = reviews
        .create(&PostParams::default(), &review(jwt.clone()))
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(reviewed.authenticated, Some(true), "{reviewed:?}");
    let user = reviewed.user.unwrap();
    assert_eq!(
        user.username.as_deref(),
        Some("system:serviceaccount:tokens:default")
    );
    let extra = user.extra.unwrap();
    assert_eq!(extra["authentication.kubernetes.io/pod-name"], ["tokened"]);
    assert_eq!(
        extra["authentication.kubernetes.io/pod-uid"],
        [token.pod_uid.as_str()]
    );
    // ... and no longer once the pod is gone (the server keeps a review's answer for
    // 10 s).
    pods.delete("tokened", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    common_apiserver::eventually(
        "the token refused once its pod is gone",
        Duration::from_secs(30),
        || async {
            let after = reviews
                .create(&PostParams::default(), &review(jwt.clone()))
                .await
                .unwrap()
                .status
                .unwrap();
            (after.authenticated != Some(true)).then_some(())
        },
    )
    .await;

    // No pod asks for it any more: forgotten.
    watches.set_tokens(&BTreeSet::new());
    assert!(rx.borrow().tokens.is_empty());
}
