//! A daemon whose essential task dies does not live on half-dead: it exits with status
//! 70 (EX_SOFTWARE), naming the task and the panic in its log, so that the service
//! manager restarts it; the containers live on in their shims and the next daemon
//! adopts them. The panic is injected through `PODHOST_TEST_PANIC_MANAGER=1`, which
//! only debug builds (these tests' binary) read: the manager panics at its first sync.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::{TestDaemon, busybox_pod, container_status, phase};
use serde_json::Value;

/// `EXIT_TASK_ENDED` of crates/daemon/src/daemon/supervise.rs.
const EXIT_TASK_ENDED: i32 = 70;

fn init_pid(d: &TestDaemon, uid: &str) -> i32 {
    let path = d
        .root
        .join(format!("pods/{uid}/containers/main/0/started.json"));
    let started: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    i32::try_from(started["init_pid"].as_i64().unwrap()).unwrap()
}

fn alive(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
}

/// Starts a daemon with the fault injection `env`, asserts that it exits by itself with
/// EXIT_TASK_ENDED, and returns its log.
fn expect_task_ended_exit(d: &mut TestDaemon, env: (&str, &str)) -> String {
    d.spawn_daemon_with_env(&[env]);
    let status = d.wait_daemon_exit(Duration::from_secs(60));
    let log = d.daemon_log();
    assert_eq!(
        status.code(),
        Some(EXIT_TASK_ENDED),
        "exit status {status}; log:\n{log}"
    );
    log
}

/// Runs pod `name` (a long sleep) until Running, then kill -9s the daemon; returns the
/// pod's UID and its container's init pid.
fn run_pod_then_kill_daemon(d: &mut TestDaemon, name: &str) -> (String, i32) {
    d.write_manifest(
        &format!("{name}.yaml"),
        &busybox_pod(name, "", "", "sleep 3600"),
    );
    let pod = d.wait_pod(name, &format!("{name} Running"), 20, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
    let pid = init_pid(d, &uid);
    d.kill9();
    (uid, pid)
}

#[test]
fn a_panicking_manager_exits_the_daemon_and_the_next_one_adopts_the_container() {
    assert!(nix::unistd::geteuid().is_root(), "this test needs root");
    let mut d = TestDaemon::start();
    let (uid, pid) = run_pod_then_kill_daemon(&mut d, "s");

    // A daemon whose manager panics at its first sync exits by itself, non-zero.
    let log = expect_task_ended_exit(&mut d, ("PODHOST_TEST_PANIC_MANAGER", "1"));
    assert!(
        log.contains(
            "the daemon's pod manager task panicked: injected by PODHOST_TEST_PANIC_MANAGER=1"
        ),
        "the log names the task and its panic:\n{log}"
    );
    assert!(
        !d.socket.exists(),
        "the exiting daemon removed its API socket"
    );
    assert!(alive(pid), "the container outlived the daemon");

    // The next daemon (the service manager's restart) adopts it: same process, no restart.
    d.spawn_daemon();
    let pod = d.wait_pod("s", "s adopted and Running", 20, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    let cs = container_status(&pod, "main").unwrap();
    assert_eq!(cs["restartCount"], 0, "{cs}");
    assert_eq!(init_pid(&d, &uid), pid);
    assert!(alive(pid));
    d.remove_manifest("s.yaml");
    d.wait_gone("s", 40);
    assert!(!alive(pid), "the container ended with its pod");
}

#[test]
fn a_panicking_pod_worker_ends_the_daemon_without_releasing_its_pod() {
    assert!(nix::unistd::geteuid().is_root(), "this test needs root");
    let mut d = TestDaemon::start();
    let (uid, pid) = run_pod_then_kill_daemon(&mut d, "p");

    // This daemon's worker of pod p panics in its sync loop.
    let full = d.full_name("p");
    let log = expect_task_ended_exit(&mut d, ("PODHOST_TEST_PANIC_POD_SYNC", &full));
    assert!(
        log.contains("a pod worker panicked")
            && log.contains(&format!("PODHOST_TEST_PANIC_POD_SYNC={full}")),
        "the log names the worker's panic:\n{log}"
    );
    assert!(alive(pid), "the container outlived the daemon");
    assert!(
        d.root.join(format!("pods/{uid}/status.json")).exists(),
        "the pod was not released while its container runs"
    );

    // The next daemon adopts it and can still stop it.
    d.spawn_daemon();
    let pod = d.wait_pod("p", "p adopted and Running", 20, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    assert_eq!(container_status(&pod, "main").unwrap()["restartCount"], 0);
    assert_eq!(init_pid(&d, &uid), pid);
    d.remove_manifest("p.yaml");
    d.wait_gone("p", 40);
    assert!(!alive(pid), "the container ended with its pod");
}
