//! Events to the API server against recorded answers of a real kube-apiserver
//! (v1.20.2, `Node,RBAC` + NodeRestriction, node `podhost-a`).
//!
//! `events.jsonl` is taken from the node's `--kube-record` in a run of
//! `scripts/cluster-test.sh`: the pod `needy` (its Secret missing at first) started
//! twice, so its `Pulled` event was created (POST) and then counted (PATCH, count 2).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Event;
use podhost::cluster::events::send;
use podhost::cluster::record::Exchange;
use podhost::cluster::replay::Replay;
use podhost::model::event_correlator::{Correlated, EventCorrelator};

fn recorded() -> Vec<Exchange> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cluster/events.jsonl");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn a_repeated_event_is_created_once_then_counted_with_a_patch() {
    let exchanges = recorded();
    // The event as the node first sent it.
    let first: Event = serde_json::from_value(exchanges[0].request.clone().unwrap()).unwrap();
    let replay = Replay::from_exchanges(exchanges);
    let client = replay.client();
    let mut correlator = EventCorrelator::default();
    let t0: DateTime<Utc> = DateTime::parse_from_rfc3339("2026-11-24T20:16:42Z")
        .unwrap()
        .into();
    let created = correlator.correlate(first.clone(), t0);
    assert!(matches!(created, Correlated::Create(_)), "{created:?}");
    send(&client, &created).await.unwrap();
    let again = correlator.correlate(first, t0 + chrono::Duration::seconds(10));
    let Correlated::Patch(patched) = &again else {
        panic!("the same event again is a patch: {again:?}")
    };
    assert_eq!(patched.count, Some(2));
    send(&client, &again).await.unwrap();

    let asked = replay.asked();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert_eq!(asked[0].method, "POST");
    assert_eq!(asked[0].path, "/api/v1/namespaces/default/events");
    let body = asked[0].request.as_ref().unwrap();
    assert_eq!(body["source"]["component"], "kubelet");
    assert_eq!(body["involvedObject"]["fieldPath"], "spec.containers{app}");
    assert_eq!(asked[1].method, "PATCH");
    assert_eq!(
        asked[1].path,
        "/api/v1/namespaces/default/events/needy.18eb147ca859bf9d"
    );
    let patch = asked[1].request.as_ref().unwrap();
    assert_eq!(patch["count"], 2);
    assert_eq!(patch["lastTimestamp"], "2026-11-24T20:16:52Z");
    assert!(replay.unexpected().is_empty(), "{:?}", replay.unexpected());
}
