//! Cluster mode's Services watch (the containers' service variables) against a replay.
//!
//! The exchanges are written here, not recorded from a real API server: they follow the
//! shape of the recorded pod watch (`pods.jsonl`: a list, then a watch whose body is its
//! event lines). The live check against a real control plane is in
//! scripts/cluster-test.sh.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use podhost::cluster::record::Exchange;
use podhost::cluster::replay::Replay;
use podhost::cluster::services::follow_services;
use podhost::model::service_env::{ServiceSet, service_env};
use serde_json::json;
use tokio::sync::watch;

fn service(namespace: &str, name: &str, ip: &str, rv: &str) -> serde_json::Value {
    json!({
        "kind": "Service", "apiVersion": "v1",
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": rv},
        "spec": {"clusterIP": ip, "type": "ClusterIP", "ports": [
            {"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}
        ]}
    })
}

fn get(query: &str, response: String) -> Exchange {
    Exchange {
        method: "GET".into(),
        path: "/api/v1/services".into(),
        query: query.into(),
        request: None,
        status: 200,
        response,
    }
}

async fn until(
    rx: &mut watch::Receiver<Arc<ServiceSet>>,
    what: &str,
    done: impl Fn(&ServiceSet) -> bool,
) -> Arc<ServiceSet> {
    tokio::time::timeout(Duration::from_secs(10), rx.wait_for(|s| done(s)))
        .await
        .unwrap_or_else(|_| panic!("{what}: not seen"))
        .unwrap()
        .clone()
}

fn listed() -> Exchange {
    let list = json!({
        "kind": "ServiceList", "apiVersion": "v1",
        "metadata": {"resourceVersion": "100"},
        "items": [
            service("default", "kubernetes", "10.96.0.1", "10"),
            service("team", "api", "10.96.0.30", "90"),
        ]
    });
    get("", list.to_string())
}

#[tokio::test]
async fn services_are_listed_once_cluster_wide_without_headless_ones() {
    // The list only: the watch after it stays open and quiet.
    let replay = Replay::from_exchanges(vec![listed()]);
    let (tx, mut rx) = watch::channel(Arc::new(ServiceSet::default()));
    assert!(!rx.borrow().synced);
    let task = tokio::spawn(follow_services(replay.client(), tx));
    let set = until(&mut rx, "the first list", |s| s.synced).await;
    let keys: Vec<(String, String)> = set.services.keys().cloned().collect();
    assert_eq!(
        keys,
        [
            ("default".to_string(), "kubernetes".to_string()),
            ("team".to_string(), "api".to_string())
        ]
    );
    let vars = service_env(&set, "team", true);
    assert!(vars.contains(&("KUBERNETES_SERVICE_HOST".into(), "10.96.0.1".into())));
    assert!(vars.contains(&("API_SERVICE_PORT_HTTPS".into(), "443".into())));
    // One cluster-wide list, then its watch; headless Services left out by the server.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while replay.asked().len() < 2 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let asked = replay.asked();
    assert_eq!(asked.len(), 2, "{asked:?}");
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
    assert!(replay.unexpected().is_empty(), "{:?}", replay.unexpected());
    task.abort();
}

#[tokio::test]
async fn watched_services_are_added_and_deleted() {
    let events = [
        json!({"type": "ADDED", "object": service("default", "web-svc", "10.96.0.20", "101")}),
        json!({"type": "DELETED", "object": service("team", "api", "10.96.0.30", "102")}),
    ]
    .iter()
    .map(|e| format!("{e}\n"))
    .collect::<String>();
    let replay = Replay::from_exchanges(vec![listed(), get("watch=true", events)]);
    let (tx, mut rx) = watch::channel(Arc::new(ServiceSet::default()));
    let task = tokio::spawn(follow_services(replay.client(), tx));
    let set = until(&mut rx, "the watched changes", |s| {
        s.services
            .contains_key(&("default".to_string(), "web-svc".to_string()))
            && !s
                .services
                .contains_key(&("team".to_string(), "api".to_string()))
    })
    .await;
    assert!(set.synced);
    let vars = service_env(&set, "default", true);
    assert!(vars.contains(&("WEB_SVC_SERVICE_HOST".into(), "10.96.0.20".into())));
    assert!(vars.contains(&("WEB_SVC_PORT".into(), "tcp://10.96.0.20:443".into())));
    assert!(replay.unexpected().is_empty(), "{:?}", replay.unexpected());
    task.abort();
}

#[tokio::test]
async fn services_not_listed_stay_not_synced() {
    // No recorded answer: the list fails (500) and is retried; nothing is known.
    let replay = Replay::from_exchanges(Vec::new());
    let (tx, mut rx) = watch::channel(Arc::new(ServiceSet::default()));
    let task = tokio::spawn(follow_services(replay.client(), tx));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while replay.unexpected().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        replay.unexpected().first().map(String::as_str),
        Some("GET /api/v1/services")
    );
    assert!(!rx.borrow_and_update().synced);
    assert!(!rx.has_changed().unwrap());
    task.abort();
}

#[tokio::test]
async fn the_watch_ends_when_no_one_reads_the_services() {
    let replay = Replay::from_exchanges(Vec::new());
    let (tx, rx) = watch::channel(Arc::new(ServiceSet::default()));
    let task = tokio::spawn(follow_services(replay.client(), tx));
    drop(rx);
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the task ends")
        .unwrap();
}
