//! `kubectl exec` over SPDY/3.1, replayed: tests/fixtures/cluster/exec-spdy.jsonl holds
//! the bytes a real kubectl 1.32 sent (KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false, through
//! a 1.20 API server, which passes the upgraded connection through unchanged), recorded
//! by scripts/cluster/record-exec-spdy-fixture.sh. Each recorded connection's client
//! side — its SYN_STREAMs with zlib header blocks of one compression stream, stdin
//! DATA, FIN, resize messages, RST_STREAMs, GOAWAY — is written byte for byte to the
//! kubelet API over real TLS, against a real container of a real daemon (busybox), and
//! the answers are checked: stdout, stderr, the v4 exit status (Success, or
//! NonZeroExitCode with the code), stdin echoed back, and on a terminal `tty` and
//! `stty size` from the recorded resize.
//!
//! How the kubelet API is served and the bytes replayed: tests/common_spdy. The exec
//! path — the SPDY session, `podhost exec-helper`, libcontainer's tenant exec, the pty —
//! is the daemon's. A second test drives the websocket path's terminal with this test's
//! own websocket client (no kubectl bytes there).

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::common_spdy;

use serde_json::Value;

use common::busybox_pod;
use common_spdy::{Recorded, WAIT, connect, load_fixture, replay, setup};

const FIXTURE: &str = "tests/fixtures/cluster/exec-spdy.jsonl";

async fn exec_node() -> common_spdy::Setup {
    setup("execpod", &busybox_pod("execpod", "", "", "sleep 3600")).await
}

fn find<'a>(recorded: &'a [Recorded], command: &str) -> &'a Recorded {
    recorded
        .iter()
        .find(|r| r.command().contains(command))
        .unwrap_or_else(|| panic!("{FIXTURE} has no exec of {command:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectls_spdy_exec_bytes_replayed_against_a_real_container() {
    let recorded = load_fixture(FIXTURE);
    assert_eq!(recorded.len(), 3, "the fixture's three execs");
    let s = exec_node().await;
    let target = |rec: &Recorded| rec.kubelet_target(&s.namespace, &s.pod, "main");

    // 1. stdin echoed by cat, a line on stderr, exit 3.
    let rec = find(&recorded, "cat");
    let types = rec.stream_types();
    let answer = replay(s.addr, &s.pki, rec, &target(rec)).await;
    assert!(
        answer.head.starts_with("HTTP/1.1 101"),
        "answer: {}",
        answer.head
    );
    assert!(
        answer
            .head
            .to_ascii_lowercase()
            .contains("x-stream-protocol-version: v4.channel.k8s.io"),
        "v4 is chosen from kubectl's offers {:?}: {}",
        rec.protocols,
        answer.head
    );
    assert_eq!(
        answer.text(&types, "stdout"),
        "hello spdy\n",
        "stdin came back; the whole answer: {answer:?}, streams {types:?}"
    );
    assert_eq!(answer.text(&types, "stderr"), "to-stderr\n");
    let status = answer.status(&types);
    assert_eq!(status["status"], "Failure", "{status}");
    assert_eq!(status["reason"], "NonZeroExitCode", "{status}");
    assert_eq!(status["details"]["causes"][0]["reason"], "ExitCode");
    assert_eq!(status["details"]["causes"][0]["message"], "3");
    for kind in ["error", "stdout", "stderr"] {
        let id = types.iter().find(|(_, t)| *t == kind).unwrap().0;
        assert!(answer.finished.contains(id), "{kind} stream ended with FIN");
    }
    assert!(answer.go_away, "the server said GOAWAY");

    // 2. stdout only, success.
    let rec = find(&recorded, "echo ok");
    let types = rec.stream_types();
    let answer = replay(s.addr, &s.pki, rec, &target(rec)).await;
    assert_eq!(answer.text(&types, "stdout"), "ok\n");
    assert_eq!(answer.status(&types)["status"], "Success");

    // 2b. What kubectl sends for a stdout-only exec does not depend on the command (that
    // is in the URL): the same bytes again for 3 MB of output, far past SPDY's 64 KiB
    // initial window, which kubectl (moby/spdystream) never widens.
    let big = format!(
        "/exec/{}/{}/main?command=head&command=-c&command=3000000&command=%2Fdev%2Fzero&output=1&error=1",
        s.namespace, s.pod
    );
    let answer = replay(s.addr, &s.pki, rec, &big).await;
    let stdout_id = *types.iter().find(|(_, t)| *t == "stdout").unwrap().0;
    let out = answer.data.get(&stdout_id).map_or(0, Vec::len);
    assert_eq!(out, 3_000_000, "all of the output came");
    assert_eq!(answer.status(&types)["status"], "Success");

    // 3. a terminal: its name in the container and the size kubectl sent (30x100).
    let rec = find(&recorded, "stty");
    let types = rec.stream_types();
    assert!(
        types.values().any(|t| t == "resize"),
        "kubectl opened a resize stream"
    );
    let answer = replay(s.addr, &s.pki, rec, &target(rec)).await;
    let out = answer.text(&types, "stdout");
    let lines: Vec<&str> = out.split("\r\n").collect();
    assert!(
        lines
            .iter()
            .any(|l| l.trim_start_matches("^@").starts_with("/dev/pts/")),
        "tty names a pty of the container: {out:?}"
    );
    assert!(
        lines.contains(&"30 100"),
        "stty size after the resize: {out:?}"
    );
    assert_eq!(answer.status(&types)["status"], "Success");
}

/// The websocket path's terminal, driven by this test's own websocket client (as
/// kubectl 1.30+ would by default): the resize message (channel 4) sent first, then the
/// output of `tty; stty size` on channel 1 and the status on channel 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_exec_with_a_terminal_gets_a_pty_and_its_size() {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;

    let s = exec_node().await;
    let target = format!(
        "/exec/{}/{}/main?command=sh&command=-c&command=tty%3B+stty+size&input=1&output=1&tty=1",
        s.namespace, s.pod
    );
    let mut request = format!("wss://{}{target}", s.addr)
        .into_client_request()
        .unwrap();
    request.headers_mut().insert(
        "sec-websocket-protocol",
        "v5.channel.k8s.io".parse().unwrap(),
    );
    let tls = connect(s.addr, &s.pki).await;
    let (mut ws, response) = tokio_tungstenite::client_async(request, tls).await.unwrap();
    assert_eq!(
        response.headers()["sec-websocket-protocol"],
        "v5.channel.k8s.io"
    );
    let mut resize = vec![4u8];
    resize.extend_from_slice(br#"{"Width":120,"Height":40}"#);
    ws.send(Message::binary(resize)).await.unwrap();
    let (mut stdout, mut status) = (Vec::new(), Vec::new());
    let read = async {
        while let Some(Ok(message)) = ws.next().await {
            match message {
                Message::Binary(b) if b.first() == Some(&1) => stdout.extend_from_slice(&b[1..]),
                Message::Binary(b) if b.first() == Some(&3) => status.extend_from_slice(&b[1..]),
                Message::Close(_) => break,
                _ => {}
            }
        }
    };
    tokio::time::timeout(WAIT, read)
        .await
        .expect("the exec ends");
    let out = String::from_utf8_lossy(&stdout).into_owned();
    let lines: Vec<&str> = out.split("\r\n").collect();
    assert!(
        lines.iter().any(|l| l.starts_with("/dev/pts/")),
        "tty names a pty of the container: {out:?}"
    );
    assert!(
        lines.contains(&"40 120"),
        "stty size after the resize: {out:?}"
    );
    let status: Value = serde_json::from_slice(&status).unwrap();
    assert_eq!(status["status"], "Success", "{status}");
}

/// The first websocket protocol, `channel.k8s.io` (what Kubernetes' own e2e tests and
/// older clients speak): the output on channel 1; nothing on the error channel for a
/// success, the failure's text for a non-zero exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_exec_over_the_first_channel_protocol() {
    use futures::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;

    let s = exec_node().await;
    for (script, want_out, want_error) in [
        ("echo+remote+execution+test", "remote execution test\n", ""),
        ("exit+3", "", "command terminated with non-zero exit code"),
    ] {
        let target = format!(
            "/exec/{}/{}/main?command=sh&command=-c&command={script}&output=1&error=1",
            s.namespace, s.pod
        );
        let mut request = format!("wss://{}{target}", s.addr)
            .into_client_request()
            .unwrap();
        request
            .headers_mut()
            .insert("sec-websocket-protocol", "channel.k8s.io".parse().unwrap());
        let tls = connect(s.addr, &s.pki).await;
        let (mut ws, response) = tokio_tungstenite::client_async(request, tls).await.unwrap();
        assert_eq!(
            response.headers()["sec-websocket-protocol"],
            "channel.k8s.io"
        );
        let (mut stdout, mut error) = (Vec::new(), Vec::new());
        let read = async {
            while let Some(Ok(message)) = ws.next().await {
                match message {
                    Message::Binary(b) if b.first() == Some(&1) => {
                        stdout.extend_from_slice(&b[1..])
                    }
                    Message::Binary(b) if b.first() == Some(&3) => error.extend_from_slice(&b[1..]),
                    Message::Close(_) => break,
                    _ => {}
                }
            }
        };
        tokio::time::timeout(WAIT, read)
            .await
            .expect("the exec ends");
        assert_eq!(String::from_utf8_lossy(&stdout), want_out, "{script}");
        let error = String::from_utf8_lossy(&error);
        if want_error.is_empty() {
            assert_eq!(error, "", "{script}: nothing on the error channel");
        } else {
            assert!(
                error.starts_with(want_error) && error.ends_with("exit code 3"),
                "{script}: the failure as text: {error}"
            );
        }
    }
}
