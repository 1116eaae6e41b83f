//! `kubectl port-forward` over SPDY/3.1, replayed: tests/fixtures/cluster/
//! port-forward-spdy.jsonl holds the bytes a real kubectl 1.32 sent
//! (KUBECTL_PORT_FORWARD_WEBSOCKETS=false, through a 1.20 API server), recorded by
//! scripts/cluster/record-port-forward-fixture.sh: one session with two HTTP GETs to
//! busybox httpd on the pod's port 8080 (a stream pair each, told apart by requestID)
//! and a connection to port 8081, where nothing listens. Replayed byte for byte against
//! a real pod of a real daemon (tests/common_spdy: the kubelet API over the daemon's
//! state, its `PodPortForwarder` into the pod's network namespace); checked: each GET's
//! answer comes back on its data stream, which ends, and the refused port is a message
//! on its error stream.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::common_spdy;

use common::busybox_pod;
use common_spdy::{load_fixture, replay, setup};

const FIXTURE: &str = "tests/fixtures/cluster/port-forward-spdy.jsonl";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectls_spdy_port_forward_bytes_replayed_against_a_real_pod() {
    let recorded = load_fixture(FIXTURE);
    assert_eq!(recorded.len(), 1, "one port-forward session");
    let rec = &recorded[0];
    let s = setup(
        "web",
        &busybox_pod(
            "web",
            "",
            "",
            "mkdir -p /www && echo hello-from-the-pod >/www/index.html && exec httpd -f -p 8080 -h /www",
        ),
    )
    .await;
    let types = rec.stream_types();
    let headers = rec.stream_headers();
    let answer = replay(
        s.addr,
        &s.pki,
        rec,
        &format!("/portForward/{}/{}", s.namespace, s.pod),
    )
    .await;
    assert!(
        answer.head.starts_with("HTTP/1.1 101")
            && answer
                .head
                .to_ascii_lowercase()
                .contains("x-stream-protocol-version: portforward.k8s.io"),
        "answer: {}",
        answer.head
    );
    let stream_of = |kind: &str, port: &str| -> Vec<u32> {
        let mut ids: Vec<u32> = types
            .iter()
            .filter(|(id, t)| {
                t.as_str() == kind && headers[*id].get("port").map(String::as_str) == Some(port)
            })
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        ids
    };
    let gets = stream_of("data", "8080");
    assert_eq!(gets.len(), 2, "two connections to 8080: {types:?}");
    for id in &gets {
        let body = String::from_utf8_lossy(answer.data.get(id).map_or(&[][..], |d| d)).into_owned();
        assert!(
            body.starts_with("HTTP/1.1 200 OK") && body.ends_with("hello-from-the-pod\n"),
            "GET on stream {id}: {body:?}"
        );
        assert!(answer.finished.contains(id), "stream {id} ended with FIN");
    }
    for id in stream_of("error", "8080") {
        assert!(
            answer.data.get(&id).is_none_or(|d| d.is_empty()),
            "no error for 8080: {:?}",
            answer.data.get(&id)
        );
        assert!(answer.finished.contains(&id), "error stream {id} ended");
    }
    let refused = stream_of("error", "8081");
    assert_eq!(refused.len(), 1, "one error stream for 8081: {types:?}");
    let message =
        String::from_utf8_lossy(answer.data.get(&refused[0]).map_or(&[][..], |d| d)).into_owned();
    assert!(
        message.contains("8081") && message.contains(&s.pod),
        "the refusal names the port and the pod: {message:?}"
    );
}
