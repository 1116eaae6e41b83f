//! `GET /pods?watch=true` and `podhost get pods --watch`, against the real daemon (as
//! root): the current pods as ADDED, each change as MODIFIED as it happens, a removed
//! pod as DELETED with its last state; the table form prints its header once.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use common::{BIN, KillOnDrop, TestDaemon, busybox_pod, require_root};
use serde_json::Value;

/// `podhost get pods --watch ARGS`, its stdout's lines on a channel.
fn watcher(d: &TestDaemon, args: &[&str]) -> (Child, KillOnDrop, Receiver<String>) {
    let mut child = Command::new(BIN)
        .arg("--socket")
        .arg(&d.socket)
        .args(["get", "pods", "--watch"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let guard = KillOnDrop(child.id() as i32);
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    (child, guard, rx)
}

/// The next watch event for pod `full` that `want` accepts; events before it are
/// skipped (other changes of the pod), but none may be of another kind than `allowed`.
fn next_event(
    rx: &Receiver<String>,
    full: &str,
    allowed: &[&str],
    what: &str,
    want: impl Fn(&str, &Value) -> bool,
) -> Value {
    let end = Instant::now() + Duration::from_secs(30);
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        let Ok(line) = rx.recv_timeout(left) else {
            break;
        };
        let event: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let kind = event["type"].as_str().unwrap().to_string();
        if event["object"]["metadata"]["name"] != full {
            continue;
        }
        assert!(
            allowed.contains(&kind.as_str()),
            "{what}: unexpected {kind}: {line}"
        );
        if want(&kind, &event["object"]) {
            return event;
        }
    }
    panic!("no event: {what}");
}

#[test]
fn the_watch_shows_a_pod_appear_run_and_go() {
    require_root();
    let d = TestDaemon::start();
    d.write_manifest(
        "before.yaml",
        &busybox_pod("before", "", "", "trap 'exit 0' TERM; sleep 3600 & wait"),
    );
    d.wait_pod("before", "before Running", 30, |p| {
        (common::phase(p) == "Running").then_some(())
    });
    let (_child, _guard, rx) = watcher(&d, &["-o", "json"]);
    // What exists when the watch begins comes first, as ADDED.
    next_event(
        &rx,
        &d.full_name("before"),
        &["ADDED"],
        "the running pod",
        |k, p| k == "ADDED" && p["status"]["phase"] == "Running",
    );
    let full = d.full_name("w");
    d.write_manifest(
        "w.yaml",
        &busybox_pod(
            "w",
            "  terminationGracePeriodSeconds: 2\n",
            "",
            "trap 'exit 0' TERM; sleep 3600 & wait",
        ),
    );
    next_event(&rx, &full, &["ADDED"], "the new pod added", |k, _| {
        k == "ADDED"
    });
    let running = next_event(&rx, &full, &["MODIFIED"], "the pod Running", |_, p| {
        p["status"]["phase"] == "Running"
    });
    let uid = running["object"]["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    d.remove_manifest("w.yaml");
    let deleted = next_event(
        &rx,
        &full,
        &["MODIFIED", "DELETED"],
        "the pod deleted",
        |k, _| k == "DELETED",
    );
    // The pod as it was last seen: terminated, and the same pod.
    assert_eq!(deleted["object"]["metadata"]["uid"], uid.as_str());
    assert!(
        deleted["object"]["metadata"]["deletionTimestamp"].is_string(),
        "{deleted}"
    );
    d.remove_manifest("before.yaml");
    d.wait_gone("before", 30);
}

#[test]
fn the_watch_table_prints_its_header_once_and_a_row_per_change() {
    require_root();
    let d = TestDaemon::start();
    let (_child, _guard, rx) = watcher(&d, &[]);
    d.write_manifest(
        "t.yaml",
        &busybox_pod(
            "t",
            "  terminationGracePeriodSeconds: 2\n",
            "",
            "trap 'exit 0' TERM; sleep 3600 & wait",
        ),
    );
    let full = d.full_name("t");
    let mut lines = Vec::new();
    let end = Instant::now() + Duration::from_secs(30);
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        let Ok(line) = rx.recv_timeout(left) else {
            break;
        };
        let running = line.starts_with(&full) && line.contains("Running");
        lines.push(line);
        if running {
            break;
        }
    }
    assert!(
        lines.last().is_some_and(|l| l.contains("Running")),
        "a row shows the pod Running: {lines:#?}"
    );
    assert!(lines[0].starts_with("NAME"), "{lines:#?}");
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("NAME")).count(),
        1,
        "one header: {lines:#?}"
    );
    assert!(
        lines.len() >= 3,
        "the pod's rows before Running too: {lines:#?}"
    );
    d.remove_manifest("t.yaml");
    d.wait_gone("t", 30);
}
