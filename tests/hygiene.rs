//! Issue 8's hygiene on the host, through the daemon: settings the shim cannot apply
//! are pod events and the shim's log reaches the daemon's log; status written by the
//! writer thread survives kill -9; stale temps are swept at start and live ones kept;
//! container GC removes only log dirs podhost made.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use serde_json::Value;

fn uid_of(pod: &Value) -> String {
    pod["metadata"]["uid"].as_str().unwrap().to_string()
}

fn attempt_dir(d: &TestDaemon, uid: &str, attempt: u32) -> PathBuf {
    d.root
        .join("pods")
        .join(uid)
        .join("containers/main")
        .join(attempt.to_string())
}

fn init_pid(d: &TestDaemon, uid: &str) -> i32 {
    let started: Value = serde_json::from_slice(
        &std::fs::read(attempt_dir(d, uid, 0).join("started.json")).unwrap(),
    )
    .unwrap();
    i32::try_from(started["init_pid"].as_i64().unwrap()).unwrap()
}

fn read_i32(path: &str) -> i32 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// The pid of a process that has exited and been reaped.
fn dead_pid() -> i32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id() as i32;
    child.wait().unwrap();
    pid
}

#[test]
fn an_oom_score_adj_the_host_forbids_is_a_pod_event_and_the_shim_log_reaches_the_daemon_log() {
    require_root();
    let d = TestDaemon::start();
    d.write_manifest(
        "crit.yaml",
        &busybox_pod(
            "crit",
            "  priorityClassName: system-node-critical\n",
            "",
            "exec sleep 1000",
        ),
    );
    let pod = d.wait_pod("crit", "crit Running", 30, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    let uid = uid_of(&pod);
    let actual = read_i32(&format!("/proc/{}/oom_score_adj", init_pid(&d, &uid)));
    let events = d.pod_events("crit");
    let not_applied: Vec<&Value> = events
        .iter()
        .filter(|e| e["reason"] == "OOMScoreAdjNotApplied")
        .collect();
    if actual == -997 {
        // A host with CAP_SYS_RESOURCE: applied, so nothing to report.
        assert!(not_applied.is_empty(), "{events:#?}");
        return;
    }
    assert_eq!(not_applied.len(), 1, "one event for the start: {events:#?}");
    let e = not_applied[0];
    assert_eq!(e["type"], "Warning");
    assert_eq!(e["object"], format!("pod/{}/main", d.full_name("crit")));
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("oom_score_adj -997 was not applied")
            && message.contains(&format!("runs with {actual}"))
            && message.contains("CAP_SYS_RESOURCE"),
        "wanted, actual and why: {message}"
    );
    // The daemon's log line for the event, and the shim's own line forwarded with the
    // pod and container named.
    let full = d.full_name("crit");
    wait_until(
        Duration::from_secs(10),
        "shim line in the daemon log",
        || {
            let log = strip_ansi(&d.daemon_log());
            log.lines()
                .any(|l| {
                    l.contains("podhost::shim:")
                        && l.contains(&format!("pod=\"default/{full}\""))
                        && l.contains("container=\"main\"")
                        && l.contains("oom_score_adj -997 was not applied")
                })
                .then_some(())
        },
    )
    .unwrap_or_else(|| panic!("daemon log:\n{}", d.daemon_log()));
    assert!(
        d.daemon_log()
            .lines()
            .any(|l| l.contains("OOMScoreAdjNotApplied") && l.contains("WARN")),
        "the event is a daemon log line too"
    );
}

/// The daemon's log without colour codes.
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // ESC [ … final letter
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Waits until the pod's status.json on disk says `phase`.
fn wait_on_disk(path: &Path, phase: &str) -> Value {
    wait_until(Duration::from_secs(10), "status.json on disk", || {
        let v: Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
        (v["pod"]["status"]["phase"] == phase).then_some(v)
    })
    .unwrap_or_else(|| panic!("{} never said {phase}", path.display()))
}

#[test]
fn status_survives_kill9_and_the_restart_sweeps_only_dead_writers_temps() {
    require_root();
    let mut d = TestDaemon::start();
    d.write_manifest(
        "st.yaml",
        &busybox_pod(
            "st",
            "  terminationGracePeriodSeconds: 1\n",
            "",
            "exec sleep 1000",
        ),
    );
    let pod = d.wait_pod("st", "st Running", 30, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    let uid = uid_of(&pod);
    // The pod's log dir carries this podhost's mark (its root dir), for container GC.
    let mark = d
        .logs
        .join(format!("default_{}_{uid}", d.full_name("st")))
        .join(podhost::runtime::log_owner::OWNER_FILE);
    assert_eq!(
        std::fs::read_to_string(&mark).unwrap().trim(),
        std::fs::canonicalize(&d.root).unwrap().to_str().unwrap()
    );
    let started_at =
        container_status(&pod, "main").unwrap()["state"]["running"]["startedAt"].clone();
    let status_file = d.root.join("pods").join(&uid).join("status.json");
    wait_on_disk(&status_file, "Running");

    d.kill9();
    // What the writer left is whole and current.
    let on_disk: Value = serde_json::from_slice(&std::fs::read(&status_file).unwrap()).unwrap();
    assert_eq!(on_disk["pod"]["status"]["phase"], "Running");
    let started_events =
        |events: &[Value]| events.iter().filter(|e| e["reason"] == "Started").count();
    assert_eq!(
        started_events(on_disk["events"].as_array().unwrap()),
        1,
        "{on_disk:#}"
    );

    // Temps as a crash leaves them: a dead writer's (stale) and a live one's (kept).
    let dead = dead_pid();
    let me = std::process::id();
    let bundle = attempt_dir(&d, &uid, 0);
    let stale = [
        d.root
            .join("pods")
            .join(&uid)
            .join(format!(".status.json.tmp.{dead}.0")),
        bundle.join(format!(".exit.json.tmp.{dead}.4")),
        bundle.join(format!("exec-process-{dead}.json")),
        d.root.join(".oom-cursor.json.tmp"),
    ];
    let live = [
        bundle.join(format!(".exit.json.tmp.{me}.0")),
        bundle.join(format!("exec-process-{me}.json")),
    ];
    for f in stale.iter().chain(&live) {
        std::fs::write(f, b"partial").unwrap();
    }

    d.spawn_daemon();
    for f in &stale[..3] {
        assert!(!f.exists(), "{} should be swept", f.display());
    }
    // The new daemon saves its own OOM cursor through the same fixed temp name right
    // after its start (it has read the kernel log to its end): a file there now may be
    // that write in progress, but never the crash's leftover.
    let cursor_temp = &stale[3];
    assert!(
        std::fs::read(cursor_temp).map_or(true, |c| c != b"partial"),
        "{} should be swept",
        cursor_temp.display()
    );
    for f in &live {
        assert!(f.exists(), "{} belongs to a live process", f.display());
        std::fs::remove_file(f).unwrap();
    }
    let pod = d.pod("st").unwrap();
    assert_eq!(phase(&pod), "Running");
    let cs = container_status(&pod, "main").unwrap();
    assert_eq!(
        cs["state"]["running"]["startedAt"], started_at,
        "same container"
    );
    assert_eq!(cs["restartCount"], 0);
    assert_eq!(started_events(&d.pod_events("st")), 1, "no second start");
    d.remove_manifest("st.yaml");
    d.wait_gone("st", 30);
    assert!(
        !d.root.join("pods").join(&uid).exists(),
        "no late status write recreated the pod dir"
    );
}
