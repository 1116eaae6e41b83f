//! A pod's `imagePullSecrets` in cluster mode, end to end: a podhost node (the daemon,
//! `--kubeconfig` of `system:node:NODE`) against a live kube-apiserver
//! (tests/common_apiserver), pulling from a real registry with basic auth on 127.0.0.1
//! (tests/common_registry), whose node credentials file (`--image-credentials`) holds
//! a wrong password. Pods are created through the API as a user would; what the node
//! made of them is read back from the API server: the pods' statuses and the events
//! the node posted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::TestDaemon;
use crate::common_apiserver::{self, ControlPlane, Options, control_plane, eventually};
use crate::common_registry::{Registry, require_root};

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Event, Pod, Secret};
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::{Value, json};

const NODE: &str = "pull-secrets-node";
const NODES: &[&str] = &[NODE];
const NAMESPACE: &str = "pullsec";

fn plane() -> &'static ControlPlane {
    control_plane(&Options::api_server(NODES))
}

/// A pull, a start and the status post take a few seconds; a debug build beside other
/// builds takes longer.
const WAIT: Duration = Duration::from_secs(90);

/// A Secret of `type_` holding `doc` under `key`.
fn secret(name: &str, type_: &str, key: &str, doc: &Value) -> Secret {
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        type_: Some(type_.into()),
        data: Some(BTreeMap::from([(
            key.to_string(),
            ByteString(serde_json::to_vec(doc).unwrap()),
        )])),
        ..Default::default()
    }
}

fn auth(user_pass: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(user_pass)
}

/// A pod bound to the node that runs `image` under `imagePullPolicy: Always` (every
/// start pulls, with the pod's own credentials), naming `secrets`.
fn pod(name: &str, image: &str, secrets: &[&str]) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "nodeName": NODE,
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 1,
            "imagePullSecrets": secrets.iter().map(|s| json!({"name": s})).collect::<Vec<_>>(),
            "containers": [{"name": "app", "image": image, "imagePullPolicy": "Always",
                            "command": ["sh", "-c", "sleep 3600"]}]
        }
    }))
    .unwrap()
}

/// The state of the pod's container as the node last posted it.
async fn container_state(pods: &Api<Pod>, name: &str) -> Option<Value> {
    let pod = pods.get(name).await.ok()?;
    let status = pod.status?.container_statuses?.into_iter().next()?;
    serde_json::to_value(status.state?).ok()
}

/// Waits until the pod's container runs.
async fn until_running(pods: &Api<Pod>, name: &str, d: &TestDaemon) {
    let limit = WAIT;
    let found = tokio::time::timeout(limit, async {
        loop {
            if container_state(pods, name)
                .await
                .is_some_and(|s| s.get("running").is_some())
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    if found.is_err() {
        let state = container_state(pods, name).await;
        panic!(
            "pod {name} does not run within {limit:?}; its container: {state:?}\ndaemon log:\n{}",
            d.daemon_log()
        );
    }
}

/// Waits until the pod's container waits on its image (ErrImagePull or
/// ImagePullBackOff) and returns the message.
async fn until_pull_failed(pods: &Api<Pod>, name: &str) -> String {
    eventually(&format!("pod {name} failing its pull"), WAIT, || async {
        let state = container_state(pods, name).await?;
        let waiting = state.get("waiting")?;
        let reason = waiting["reason"].as_str()?;
        matches!(reason, "ErrImagePull" | "ImagePullBackOff")
            .then(|| waiting["message"].as_str().unwrap_or_default().to_string())
    })
    .await
}

/// The messages of the events of `reason` the node posted about pod `name`.
async fn events(events: &Api<Event>, name: &str, reason: &str) -> Vec<String> {
    let selector = format!("involvedObject.name={name},reason={reason}");
    events
        .list(&ListParams::default().fields(&selector))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .filter_map(|e| e.message)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pods_image_pull_secrets_pull_its_image_and_no_other_pods() {
    require_root();
    let registry = Registry::start_with_auth("alice", "s3cret");
    registry.push_busybox("latest", &[]);
    let image = format!("{}/busybox:latest", registry.addr);

    let cp = plane();
    let admin = cp.admin().await;
    common_apiserver::namespace(&admin, NAMESPACE).await;
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), NAMESPACE);
    let post = PostParams::default();
    let right = json!({"auths": {&registry.addr: {"auth": auth("alice:s3cret")}}});
    let wrong = json!({"auths": {&registry.addr: {"username": "alice", "password": "nope"}}});
    // The legacy type: the auths map without its wrapper.
    let legacy = json!({&registry.addr: {"auth": auth("alice:s3cret"), "email": "a@x"}});
    for s in [
        secret(
            "regcred",
            "kubernetes.io/dockerconfigjson",
            ".dockerconfigjson",
            &right,
        ),
        secret(
            "wrong",
            "kubernetes.io/dockerconfigjson",
            ".dockerconfigjson",
            &wrong,
        ),
        secret("legacy", "kubernetes.io/dockercfg", ".dockercfg", &legacy),
        secret("opaque", "Opaque", ".dockerconfigjson", &right),
    ] {
        secrets.create(&post, &s).await.unwrap();
    }

    // The node: the daemon in cluster mode, on the machine's network (the registry is
    // on its loopback). Its own credentials file has a wrong password for the
    // registry: tried last, refused.
    let node_dir = tempfile::tempdir().unwrap();
    let node_credentials = node_dir.path().join("config.json");
    let node_config = json!({"auths": {&registry.addr: {"auth": auth("alice:node-wrong")}}});
    std::fs::write(&node_credentials, node_config.to_string()).unwrap();
    let d = cp.node_daemon(
        NODE,
        &["--image-credentials", node_credentials.to_str().unwrap()],
    );
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NAMESPACE);
    let node_events: Api<Event> = Api::namespaced(admin.clone(), NAMESPACE);

    // The pod with the registry's login runs.
    pods.create(&post, &pod("with-secret", &image, &["regcred"]))
        .await
        .unwrap();
    until_running(&pods, "with-secret", &d).await;

    // A pod without it, on the same node, with the image in the store: its pull
    // (Always) is its own, and the registry refuses it.
    pods.create(&post, &pod("no-secret", &image, &[]))
        .await
        .unwrap();
    let refused = until_pull_failed(&pods, "no-secret").await;
    eprintln!("without the secret: {refused}");
    let node_file = node_credentials.display().to_string();
    assert!(
        refused.contains("401") && refused.contains(&image),
        "{refused}"
    );
    assert!(
        refused.contains(&format!("in {node_file} (sent user \"alice\"")),
        "only the node's credentials are tried: {refused}"
    );
    assert!(!refused.contains("regcred"), "{refused}");

    // Wrong credentials: refused, then the node's, refused too; the message names both
    // in the order tried.
    pods.create(&post, &pod("wrong-secret", &image, &["wrong"]))
        .await
        .unwrap();
    let refused = until_pull_failed(&pods, "wrong-secret").await;
    eprintln!("with the wrong secret: {refused}");
    assert!(refused.contains("401"), "{refused}");
    let secret_at = refused
        .find(&format!(
            "secret \"{NAMESPACE}/wrong\" (sent user \"alice\""
        ))
        .unwrap_or_else(|| panic!("the secret is named: {refused}"));
    let node_at = refused
        .find(&format!("in {node_file} (sent user \"alice\""))
        .unwrap_or_else(|| panic!("the node's file is named: {refused}"));
    assert!(secret_at < node_at, "the pod's login first: {refused}");

    // A missing Secret and one of another type are warnings, a refused login makes the
    // next be tried, and the legacy type's login pulls.
    pods.create(
        &post,
        &pod("fallback", &image, &["gone", "opaque", "wrong", "legacy"]),
    )
    .await
    .unwrap();
    until_running(&pods, "fallback", &d).await;
    let missing = eventually("the missing secret's event", WAIT, || async {
        let found = events(&node_events, "fallback", "FailedToRetrieveImagePullSecret").await;
        (!found.is_empty()).then_some(found)
    })
    .await;
    assert_eq!(
        missing[0],
        "Unable to retrieve some image pull secrets (gone); attempting to pull the image may \
         not succeed."
    );
    let invalid = eventually("the opaque secret's event", WAIT, || async {
        let found = events(&node_events, "fallback", "InvalidImagePullSecret").await;
        (!found.is_empty()).then_some(found)
    })
    .await;
    assert!(
        invalid[0].starts_with(
            "Secret \"opaque\" in imagePullSecrets is not used: it is of type \"Opaque\""
        ),
        "{invalid:?}"
    );

    // The first pod still runs; the refused ones still wait on their image.
    assert!(
        container_state(&pods, "with-secret")
            .await
            .is_some_and(|s| s.get("running").is_some())
    );
    for name in ["no-secret", "wrong-secret"] {
        let state = container_state(&pods, name).await.unwrap();
        assert!(state.get("waiting").is_some(), "{name}: {state}");
    }
}
