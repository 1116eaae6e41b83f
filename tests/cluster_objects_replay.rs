//! The ConfigMap and Secret watches of cluster mode against recorded answers of a real
//! kube-apiserver (v1.20.2, `Node,RBAC` + NodeRestriction, node `podhost-a`).
//!
//! `objects.jsonl` holds the exchanges of two objects, taken from the node's
//! `--kube-record` in a run of `scripts/cluster-test.sh` (the `conf` and `needy` pods):
//! ConfigMap `app-config` listed (greeting=hello) then changed by `kubectl patch`
//! (MODIFIED, greeting=bye); Secret `late-secret` listed while it did not exist, then
//! created (ADDED, token=t). `tokens.jsonl`: the TokenRequest of the `tokened` pod's
//! projected token (default service account, expirationSeconds 600, bound to the pod)
//! and the token the server issued.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use podhost::cluster::objects::ObjectWatches;
use podhost::cluster::replay::Replay;
use podhost::model::config_refs::{ObjectKind, ObjectRef, ObjectSet, ObjectState, TokenRef};
use podhost::model::env::ConfigLookup;
use tokio::sync::watch;

fn fixture(name: &str) -> Replay {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/cluster")
        .join(name);
    Replay::load(&path).unwrap()
}

fn object(kind: ObjectKind, name: &str) -> ObjectRef {
    ObjectRef {
        kind,
        namespace: "default".into(),
        name: name.into(),
    }
}

async fn until(
    rx: &mut watch::Receiver<Arc<ObjectSet>>,
    what: &str,
    done: impl Fn(&ObjectSet) -> bool,
) -> Arc<ObjectSet> {
    tokio::time::timeout(Duration::from_secs(10), rx.wait_for(|s| done(s)))
        .await
        .unwrap_or_else(|_| panic!("{what}: not seen"))
        .unwrap()
        .clone()
}

#[tokio::test]
async fn each_named_object_is_listed_and_watched_alone_and_its_changes_arrive() {
    let replay = fixture("objects.jsonl");
    let (tx, mut rx) = watch::channel(Arc::new(ObjectSet::default()));
    let mut watches = ObjectWatches::new(replay.client(), tx);
    let refs: BTreeSet<ObjectRef> = [
        object(ObjectKind::ConfigMap, "app-config"),
        object(ObjectKind::Secret, "late-secret"),
    ]
    .into();
    watches.set_refs(&refs);
    // Both known at once as pending: a worker waits for their first answer.
    assert_eq!(rx.borrow().pending(&refs).len(), 2);
    let set = until(
        &mut rx,
        "the patched ConfigMap and the created Secret",
        |s| {
            let greeting = s
                .config_map("default", "app-config")
                .and_then(|c| c.data.as_ref()?.get("greeting").cloned());
            greeting.as_deref() == Some("bye") && s.secret("default", "late-secret").is_some()
        },
    )
    .await;
    let token = &set
        .secret("default", "late-secret")
        .unwrap()
        .data
        .as_ref()
        .unwrap()["token"];
    assert_eq!(token.0, b"t");
    // Server bookkeeping is not kept.
    let cm = set.config_map("default", "app-config").unwrap();
    assert!(cm.metadata.managed_fields.is_none());
    // One object per request, never a namespace's collection.
    let asked = replay.asked();
    assert!(asked.len() >= 4, "{asked:?}");
    for e in &asked {
        assert_eq!(e.method, "GET");
        assert!(
            e.query.contains("fieldSelector=metadata.name%3D"),
            "{} {}",
            e.path,
            e.query
        );
    }
    assert!(replay.unexpected().is_empty(), "{:?}", replay.unexpected());

    // No pod names the Secret any more: forgotten; the ConfigMap stays as it was.
    watches.set_refs(&[object(ObjectKind::ConfigMap, "app-config")].into());
    let set = rx.borrow().clone();
    assert!(set.secrets.is_empty());
    assert!(matches!(
        set.config_maps
            .get(&("default".into(), "app-config".into())),
        Some(ObjectState::Present(_))
    ));
}

#[tokio::test]
async fn a_missing_object_is_answered_as_missing_not_left_pending() {
    // Only the Secret's empty list is served; its watch then stays quiet.
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cluster/objects.jsonl"),
    )
    .unwrap();
    let exchanges = text
        .lines()
        .map(|l| serde_json::from_str::<podhost::cluster::record::Exchange>(l).unwrap())
        .filter(|e| e.path.ends_with("/secrets") && !e.query.contains("watch=true"))
        .collect();
    let replay = Replay::from_exchanges(exchanges);
    let (tx, mut rx) = watch::channel(Arc::new(ObjectSet::default()));
    let mut watches = ObjectWatches::new(replay.client(), tx);
    let refs: BTreeSet<ObjectRef> = [object(ObjectKind::Secret, "late-secret")].into();
    watches.set_refs(&refs);
    let set = until(&mut rx, "the Secret answered", |s| {
        s.pending(&refs).is_empty()
    })
    .await;
    assert!(matches!(
        set.secrets.get(&("default".into(), "late-secret".into())),
        Some(ObjectState::Missing)
    ));
    assert!(set.secret("default", "late-secret").is_none());
}

#[tokio::test]
async fn a_projected_token_is_requested_bound_to_the_pod_and_kept() {
    let replay = fixture("tokens.jsonl");
    let (tx, mut rx) = watch::channel(Arc::new(ObjectSet::default()));
    let mut watches = ObjectWatches::new(replay.client(), tx);
    let token = TokenRef {
        namespace: "default".into(),
        service_account: "default".into(),
        pod_name: "tokened".into(),
        pod_uid: "ef38c068-d0a5-4f2d-be69-1139ddc2bf5a".into(),
        audience: String::new(),
        expiration_seconds: 600,
    };
    let refs: BTreeSet<TokenRef> = [token.clone()].into();
    watches.set_tokens(&refs);
    let set = until(&mut rx, "the token issued", |s| {
        s.pending_tokens(&refs).is_empty()
    })
    .await;
    let jwt = set.service_account_token(&token).unwrap();
    assert_eq!(jwt.split('.').count(), 3, "a JWT");
    let asked = replay.asked();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0].method, "POST");
    assert_eq!(
        asked[0].path,
        "/api/v1/namespaces/default/serviceaccounts/default/token"
    );
    let spec = &asked[0].request.as_ref().unwrap()["spec"];
    assert_eq!(spec["expirationSeconds"], 600);
    assert_eq!(spec["boundObjectRef"]["kind"], "Pod");
    assert_eq!(spec["boundObjectRef"]["name"], "tokened");
    assert_eq!(spec["boundObjectRef"]["uid"], token.pod_uid.as_str());
    // The API server's own audience: none asked for.
    assert!(spec.get("audiences").is_none(), "{spec}");
    // No pod asks for it any more: forgotten.
    watches.set_tokens(&BTreeSet::new());
    assert!(rx.borrow().tokens.is_empty());
}
