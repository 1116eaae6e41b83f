//! Bad API requests on the unix socket, written by hand (as a broken client or curl
//! would): each gets an HTTP error whose message says what was wrong, none makes the
//! daemon buffer an unbounded body, and the running pod is untouched.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use super::common::*;
use super::{Healthy, Outcome, print_outcomes};

/// Sends `head` (request line and headers, without the blank line), then `body`
/// written by another thread (the server may answer and close before reading it all);
/// returns the status and the body of the answer ("" and 0 when the server closed the
/// connection without one).
fn exchange(
    socket: &Path,
    head: &str,
    body: impl FnOnce(&mut UnixStream) + Send + 'static,
) -> (u16, String) {
    let mut s = UnixStream::connect(socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    // The server may refuse a huge head before reading all of it: the answer counts.
    let _ = s.write_all(format!("{head}\r\n\r\n").as_bytes());
    let mut writer = s.try_clone().unwrap();
    let sender = std::thread::spawn(move || body(&mut writer));
    let mut reply = Vec::new();
    // A read error after part of an answer (a reset once the server gave up) ends it.
    let mut buf = [0u8; 8192];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                reply.extend_from_slice(&buf[..n]);
                if complete(&reply) {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                panic!("no answer within 30 s to {head:?}")
            }
            Err(_) => break,
        }
    }
    let _ = s.shutdown(std::net::Shutdown::Both);
    let _ = sender.join();
    let text = String::from_utf8_lossy(&reply).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// True once `reply` holds a whole answer with a Content-Length body.
fn complete(reply: &[u8]) -> bool {
    let text = String::from_utf8_lossy(reply);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
    head.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .is_some_and(|n| body.len() >= n)
}

fn send(bytes: Vec<u8>) -> impl FnOnce(&mut UnixStream) + Send + 'static {
    move |s| {
        let _ = s.write_all(&bytes);
    }
}

/// The `message` of a `Status` answer, or the answer itself.
fn message_of(answer: &str) -> String {
    serde_json::from_str::<serde_json::Value>(answer)
        .ok()
        .and_then(|v| v["message"].as_str().map(String::from))
        .unwrap_or_else(|| answer.to_string())
}

fn post(path: &str, body: &str) -> (String, Vec<u8>) {
    (
        format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}",
            body.len()
        ),
        body.as_bytes().to_vec(),
    )
}

fn get(path: &str) -> (String, Vec<u8>) {
    (format!("GET {path} HTTP/1.1\r\nHost: x"), Vec::new())
}

#[test]
fn bad_api_requests_get_clear_errors_and_disturb_nothing() {
    require_root();
    let d = TestDaemon::start();
    let healthy = Healthy::start(&d);
    let mut outcomes = Vec::new();
    let mut wrong = Vec::new();
    let mut check =
        |kind: &'static str, (head, body): (String, Vec<u8>), status: u16, expect: &str| {
            let (got, answer) = exchange(&d.socket, &head, send(body));
            if got != status || !answer.contains(expect) {
                wrong.push(format!(
                    "{kind}: expected {status} with {expect:?}, got {got} {answer:?}"
                ));
            }
            let message = serde_json::from_str::<serde_json::Value>(&answer)
                .ok()
                .and_then(|v| v["message"].as_str().map(String::from))
                .unwrap_or(answer);
            outcomes.push(Outcome {
                kind,
                message: format!("{got} {message}"),
            });
        };

    check(
        "bad JSON",
        post("/images/load", "{\"path\": "),
        400,
        "bad load request: EOF while parsing",
    );
    check(
        "JSON of the wrong type",
        post("/images/load", "{\"path\": 5}"),
        400,
        "bad load request: invalid type: integer `5`, expected a string",
    );
    check(
        "JSON missing a field",
        post("/images/pull", "{}"),
        400,
        "bad pull request: missing field `reference`",
    );
    check(
        "not JSON at all",
        post("/images/remove", "\u{0}\u{1}binary"),
        400,
        "bad remove request: expected value",
    );
    check(
        "load of a path that does not exist",
        post(
            "/images/load",
            "{\"path\": \"/nonexistent/podhost-corpus\"}",
        ),
        400,
        "/nonexistent/podhost-corpus",
    );
    check(
        "rmi of an unknown image",
        post("/images/remove", "{\"reference\": \"localhost/nope:1\"}"),
        404,
        "localhost/nope:1",
    );
    check(
        "unknown pod",
        get("/pods/nosuchpod"),
        404,
        "pod \\\"nosuchpod\\\" not found",
    );
    check(
        "unknown pod's log",
        get("/pods/nosuchpod/log?container=main"),
        404,
        "pod \\\"nosuchpod\\\" not found",
    );
    check(
        "pod name with path tricks",
        get("/pods/..%2F..%2Fetc%2Fpasswd/events"),
        404,
        "not found",
    );
    check(
        "unknown route",
        get("/apis/v1/nodes"),
        404,
        "no such API path: /apis/v1/nodes",
    );
    check(
        "wrong method",
        (
            format!(
                "DELETE /pods/{} HTTP/1.1\r\nHost: x",
                d.full_name("healthy")
            ),
            Vec::new(),
        ),
        404,
        "no such API path",
    );

    // A body announced as 100 MiB is refused before it is read.
    let head = "POST /images/load HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 104857600";
    let (got, answer) = exchange(&d.socket, head, send(vec![b' '; 1 << 20]));
    if got != 413 || !answer.contains("larger than 65536 bytes") {
        wrong.push(format!("declared oversized body: got {got} {answer:?}"));
    }
    outcomes.push(Outcome {
        kind: "oversized body (declared)",
        message: format!("{got} {}", message_of(&answer)),
    });

    // The same without a length (chunked): refused once 64 KiB have arrived.
    let head = "POST /images/pull HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked";
    let chunked = |s: &mut UnixStream| {
        let chunk = vec![b' '; 1 << 20];
        for _ in 0..64 {
            if s.write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                .is_err()
                || s.write_all(&chunk).is_err()
                || s.write_all(b"\r\n").is_err()
            {
                return;
            }
        }
        let _ = s.write_all(b"0\r\n\r\n");
    };
    let (got, answer) = exchange(&d.socket, head, chunked);
    if got != 413 || !answer.contains("larger than 65536 bytes") {
        wrong.push(format!("chunked oversized body: got {got} {answer:?}"));
    }
    outcomes.push(Outcome {
        kind: "oversized body (chunked)",
        message: format!("{got} {}", message_of(&answer)),
    });

    // Not HTTP, and a 1 MiB header: refused by the HTTP layer, the daemon goes on.
    let (got, _) = exchange(&d.socket, "\u{1}\u{2}HELLO podhost", send(Vec::new()));
    if !(got == 400 || got == 0) {
        wrong.push(format!("not HTTP: got {got}"));
    }
    outcomes.push(Outcome {
        kind: "not HTTP",
        message: format!("{got} (connection closed)"),
    });
    let (got, _) = exchange(
        &d.socket,
        &format!(
            "GET /pods HTTP/1.1\r\nHost: x\r\nX-Big: {}",
            "a".repeat(1 << 20)
        ),
        send(Vec::new()),
    );
    if !(got == 431 || got == 400 || got == 0) {
        wrong.push(format!("huge header: got {got}"));
    }
    outcomes.push(Outcome {
        kind: "1 MiB header",
        message: format!("{got} (connection closed)"),
    });

    print_outcomes("bad API requests", &outcomes);
    assert!(wrong.is_empty(), "unclear answers:\n{}", wrong.join("\n"));
    healthy.assert_undisturbed(&d, &["localhost/busybox:latest"]);
}
