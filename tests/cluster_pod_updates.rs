//! Changes of a running API pod's object reaching its node, end to end: a podhost node
//! against a live kube-apiserver (tests/common_apiserver).
//! - `status.observedGeneration` and the conditions' `observedGeneration`: the API
//!   server bumps `metadata.generation` on every change of a pod's spec (not on one of
//!   its metadata); the node's status says which generation it reflects, as the
//!   kubelet's does since PodObservedGenerationTracking went GA (1.35), and Kubernetes'
//!   *Pods Extended Pod Generation* conformance specs wait for it.
//! - Annotations read at a container's start: a `subPathExpr` made of a downward-API
//!   variable whose annotation is missing fails the start; once the annotation is set,
//!   the next start uses it (Kubernetes' *Variable Expansion … failing subpath expansion
//!   can be modified during the lifecycle of a container*).
//! - An image update of a Ready pod: the container is killed and started again with the
//!   new image, and the pod stays Ready throughout, as the kubelet (which kills and starts
//!   it in one sync) shows it (*Pods should run through the lifecycle of Pods and
//!   PodStatus* reads Ready right after its image patch). And a condition that turns
//!   True keeps no reason or message of its False past.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common_apiserver::{self, ControlPlane, Options, control_plane, eventually};
use crate::common_registry::require_root;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

/// One node per test: the tests run side by side.
const GENERATION_NODE: &str = "pod-generation-node";
const ANNOTATION_NODE: &str = "pod-annotation-node";
const IMAGE_NODE: &str = "pod-image-node";
const NODES: &[&str] = &[GENERATION_NODE, ANNOTATION_NODE, IMAGE_NODE];

fn plane() -> &'static ControlPlane {
    control_plane(&Options::api_server(NODES))
}

/// A start and the status post take seconds; a debug build beside other builds longer.
const WAIT: Duration = Duration::from_secs(90);

/// What the node last posted: the pod's generation, the status's observedGeneration
/// and each condition's (by type).
async fn generations(
    pods: &Api<Pod>,
    name: &str,
) -> Option<(i64, Option<i64>, BTreeMap<String, Option<i64>>)> {
    let pod = pods.get(name).await.ok()?;
    let status = pod.status?;
    let conditions = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.type_, c.observed_generation))
        .collect();
    Some((
        pod.metadata.generation?,
        status.observed_generation,
        conditions,
    ))
}

/// Waits until the node's status and each of its conditions observed `generation`.
async fn until_observed(pods: &Api<Pod>, name: &str, generation: i64) {
    eventually(
        &format!("pod {name}'s status observing generation {generation}"),
        WAIT,
        || async {
            let (_, observed, conditions) = generations(pods, name).await?;
            let node_conditions = [
                "PodScheduled",
                "Initialized",
                "ContainersReady",
                "Ready",
                "PodReadyToStartContainers",
            ];
            let all = node_conditions
                .iter()
                .all(|c| conditions.get(*c) == Some(&Some(generation)));
            (observed == Some(generation) && all).then_some(())
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_follows_the_pods_generation_and_never_a_metadata_change() {
    require_root();
    let cp = plane();
    let admin = cp.admin().await;
    common_apiserver::namespace(&admin, "pod-generation").await;
    let _node = cp.node_daemon(GENERATION_NODE, &[]);
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "pod-generation");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "gen"},
        "spec": {
            "nodeName": GENERATION_NODE,
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 1,
            "activeDeadlineSeconds": 5000,
            "containers": [{"name": "app", "image": "localhost/busybox:latest",
                            "imagePullPolicy": "Never",
                            "command": ["sh", "-c", "sleep 3600"]}]
        }
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    until_observed(&pods, "gen", 1).await;

    // Spec changes: the deadline (which the pod follows) and tolerations (which it does
    // not need to): each bumps the generation, and the node observes each.
    let params = PatchParams::default();
    let patches = [
        json!({"spec": {"activeDeadlineSeconds": 4999}}),
        json!({"spec": {"tolerations": [{"key": "k", "operator": "Equal", "value": "v",
                                          "effect": "NoSchedule"}]}}),
    ];
    for (i, patch) in patches.into_iter().enumerate() {
        let updated = pods
            .patch("gen", &params, &Patch::Strategic(patch))
            .await
            .unwrap();
        let generation = 2 + i as i64;
        assert_eq!(updated.metadata.generation, Some(generation));
        until_observed(&pods, "gen", generation).await;
    }

    // Many changes in a row: the node converges on the last one.
    for seconds in (4900..4950).rev() {
        pods.patch(
            "gen",
            &params,
            &Patch::Strategic(json!({"spec": {"activeDeadlineSeconds": seconds}})),
        )
        .await
        .unwrap();
    }
    until_observed(&pods, "gen", 53).await;

    // A metadata change bumps nothing, and the status stays where it was.
    let updated = pods
        .patch(
            "gen",
            &params,
            &Patch::Strategic(json!({"metadata": {"annotations": {"key": "value"}}})),
        )
        .await
        .unwrap();
    assert_eq!(updated.metadata.generation, Some(53));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (generation, observed, _) = generations(&pods, "gen").await.unwrap();
    assert_eq!((generation, observed), (53, Some(53)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_that_failed_on_a_missing_annotation_succeeds_once_it_is_set() {
    require_root();
    let cp = plane();
    let admin = cp.admin().await;
    common_apiserver::namespace(&admin, "pod-annotation").await;
    let d = cp.node_daemon(ANNOTATION_NODE, &[]);
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "pod-annotation");
    // The shape of the upstream spec: the annotation `mysubpath` is missing, so
    // `$(ANNOTATION)/$(POD_NAME)` cannot be expanded and the container cannot start.
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "subpath", "annotations": {"notmysubpath": "mypath"}},
        "spec": {
            "nodeName": ANNOTATION_NODE,
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 1,
            "volumes": [{"name": "work", "emptyDir": {}}],
            "containers": [{
                "name": "app", "image": "localhost/busybox:latest", "imagePullPolicy": "Never",
                "command": ["sh", "-c", "echo $ANNOTATION > /volume_mount/seen; sleep 3600"],
                "env": [
                    {"name": "POD_NAME", "value": "foo"},
                    {"name": "ANNOTATION", "valueFrom": {"fieldRef":
                        {"fieldPath": "metadata.annotations['mysubpath']"}}}
                ],
                "volumeMounts": [
                    {"name": "work", "mountPath": "/subpath_mount",
                     "subPathExpr": "$(ANNOTATION)/$(POD_NAME)"},
                    {"name": "work", "mountPath": "/volume_mount"}
                ]
            }]
        }
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let waiting = eventually(
        "the start failing on the missing annotation",
        WAIT,
        || async {
            let status = pods.get("subpath").await.ok()?.status?;
            let state = status.container_statuses?.into_iter().next()?.state?;
            let waiting = state.waiting?;
            (waiting.reason.as_deref() == Some("CreateContainerConfigError")).then_some(waiting)
        },
    )
    .await;
    let message = waiting.message.unwrap_or_default();
    assert!(message.contains("ANNOTATION"), "{message}");
    assert_eq!(
        pods.get("subpath")
            .await
            .unwrap()
            .status
            .unwrap()
            .phase
            .as_deref(),
        Some("Pending")
    );

    pods.patch(
        "subpath",
        &PatchParams::default(),
        &Patch::Strategic(json!({"metadata": {"annotations": {"mysubpath": "mypath"}}})),
    )
    .await
    .unwrap();
    let running = tokio::time::timeout(WAIT, async {
        loop {
            let phase = pods.get("subpath").await.ok().and_then(|p| p.status?.phase);
            if phase.as_deref() == Some("Running") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    assert!(
        running.is_ok(),
        "the pod does not run with its annotation within {WAIT:?}; daemon log:\n{}",
        d.daemon_log()
    );
    // The container saw the annotation's value, and its subPath dir was made from it.
    let seen = eventually("the container's record of the annotation", WAIT, || async {
        let out = d.cli(&[
            "exec",
            "subpath",
            "--",
            "sh",
            "-c",
            "cat /volume_mount/seen; ls -d /volume_mount/mypath/foo",
        ]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    })
    .await;
    assert_eq!(seen, "mypath\n/volume_mount/mypath/foo\n");
}

/// The pod's conditions by type: (status, reason, message).
async fn conditions(
    pods: &Api<Pod>,
    name: &str,
) -> BTreeMap<String, (String, Option<String>, Option<String>)> {
    let pod = pods.get(name).await.unwrap();
    pod.status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.type_, (c.status, c.reason, c.message)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ready_pod_stays_ready_through_an_image_update_and_true_conditions_carry_no_reason() {
    require_root();
    let cp = plane();
    let admin = cp.admin().await;
    common_apiserver::namespace(&admin, "pod-image").await;
    let d = cp.node_daemon(IMAGE_NODE, &[]);
    // The same busybox under a second name: another image reference for the spec.
    let out = d.cli(&[
        "load",
        "--name",
        "localhost/busybox:v2",
        crate::common::busybox_layout().to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "pod-image");
    // Not ready until /tmp/ready exists: its conditions are False (ContainersNotReady)
    // first, then True.
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "img"},
        "spec": {
            "nodeName": IMAGE_NODE,
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "app", "image": "localhost/busybox:latest",
                            "imagePullPolicy": "Never",
                            "command": ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"],
                            "readinessProbe": {"exec": {"command": ["cat", "/tmp/ready"]},
                                               "periodSeconds": 1}}]
        }
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    eventually("the pod running, not ready", WAIT, || async {
        let c = conditions(&pods, "img").await;
        let (status, reason, _) = c.get("ContainersReady")?;
        (status == "False" && reason.as_deref() == Some("ContainersNotReady")).then_some(())
    })
    .await;
    // ContainersNotReady holds from before the container runs: exec needs it running.
    eventually("the container running", WAIT, || async {
        let pod = pods.get("img").await.ok()?;
        let state = pod.status?.container_statuses?.first()?.state.clone()?;
        state.running.map(|_| ())
    })
    .await;
    let out = d.cli(&["exec", "img", "--", "touch", "/tmp/ready"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eventually("the pod ready", WAIT, || async {
        let c = conditions(&pods, "img").await;
        (c.get("Ready")?.0 == "True" && c.get("ContainersReady")?.0 == "True").then_some(())
    })
    .await;
    let c = conditions(&pods, "img").await;
    for kind in ["Ready", "ContainersReady"] {
        assert_eq!(
            c[kind],
            ("True".to_string(), None, None),
            "{kind}: a True condition keeps nothing of its False past"
        );
    }

    // The image update: the readiness probe's file goes with the old container, so the
    // pod is Ready until the kill and the new container is not (its probe fails) — but
    // between the two (the exit, the new start) the status must not flicker: every
    // status the node writes until the new container runs shows the old one running.
    let before = pods.get("img").await.unwrap();
    let started = |p: &Pod| {
        p.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|c| c.first())
            .and_then(|c| c.state.as_ref())
            .and_then(|s| s.running.as_ref())
            .and_then(|r| r.started_at.clone())
    };
    let first_start = started(&before).expect("running");
    let mut watch_from = before.metadata.resource_version.clone().unwrap();
    pods.patch(
        "img",
        &PatchParams::default(),
        &Patch::Strategic(
            json!({"spec": {"containers": [{"name": "app", "image": "localhost/busybox:v2"}]}}),
        ),
    )
    .await
    .unwrap();
    // Every version of the pod from the patch until the new container runs.
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    'versions: loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the new container does not run within {WAIT:?}; versions seen: {seen:#?}\ndaemon log:\n{}",
            d.daemon_log()
        );
        use futures::{StreamExt, TryStreamExt};
        let params = kube::api::WatchParams::default().fields("metadata.name=img");
        let mut stream = pods.watch(&params, &watch_from).await.unwrap().boxed();
        while let Ok(Some(event)) = stream.try_next().await {
            let kube::api::WatchEvent::Modified(p) = event else {
                continue;
            };
            watch_from = p.metadata.resource_version.clone().unwrap();
            let status = p.status.clone().unwrap_or_default();
            let container = status.container_statuses.clone().unwrap_or_default();
            let image = container.first().map(|c| c.image.clone());
            let restarts = container.first().map(|c| c.restart_count);
            let ready = status
                .conditions
                .unwrap_or_default()
                .into_iter()
                .find(|c| c.type_ == "ContainersReady")
                .map(|c| c.status);
            seen.push((started(&p), ready, image, restarts));
            if restarts == Some(1) && started(&p).is_some() {
                break 'versions;
            }
        }
    }
    // Until the new one runs, the old one is shown running (since its first start), and
    // no version shows the container not running.
    for (start, _, _, restarts) in &seen {
        assert!(
            start.is_some(),
            "a version shows no running container: {seen:#?}"
        );
        if *restarts == Some(0) {
            assert_eq!(start.as_ref(), Some(&first_start), "{seen:#?}");
        }
    }
    let (last_start, _, last_image, _) = seen.last().unwrap();
    assert_ne!(last_start.as_ref(), Some(&first_start), "{seen:#?}");
    assert_eq!(
        last_image.as_deref(),
        Some("localhost/busybox:v2"),
        "{seen:#?}"
    );
}
