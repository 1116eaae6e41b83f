//! The exit is reported before its record is durable (the monitor tells the daemon, then
//! fsyncs `exit.json`). The crash cases of that window: the monitor killed after telling,
//! and the daemon killed before the record exists. The monitor of a debug build stops
//! itself in that window when `PODHOST_TEST_MONITOR_STOP_AFTER_REPORT` is set.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use serde_json::Value;

const STOP_ENV: (&str, &str) = ("PODHOST_TEST_MONITOR_STOP_AFTER_REPORT", "1");

fn spawn_stopping_daemon(d: &mut TestDaemon) {
    spawn_daemon_with(d, STOP_ENV);
}

/// Starts the daemon with one test switch in its environment (inherited by its shims)
/// and waits for its API.
fn spawn_daemon_with(d: &mut TestDaemon, env: (&str, &str)) {
    d.spawn_daemon_with_env(&[env]);
    d.wait_api_up();
}

fn attempt_dir(d: &TestDaemon, pod: &Value, attempt: u32) -> PathBuf {
    let uid = pod["metadata"]["uid"].as_str().unwrap();
    d.root
        .join("pods")
        .join(uid)
        .join("containers/main")
        .join(attempt.to_string())
}

fn shim_pid(bundle: &Path) -> i32 {
    let started: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("started.json")).unwrap()).unwrap();
    i32::try_from(started["shim_pid"].as_i64().unwrap()).unwrap()
}

/// The process state letter from /proc/PID/stat (`T`: stopped); None once it is gone.
fn proc_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

fn terminated(pod: &Value) -> Option<Value> {
    let state = &container_status(pod, "main")?["state"]["terminated"];
    state.is_object().then(|| state.clone())
}

/// Waits until the API shows the exit while the monitor is stopped before recording it.
fn exit_shown_unrecorded(d: &TestDaemon, name: &str) -> (Value, PathBuf, i32) {
    let (pod, state) = d.wait_pod(name, "the exit shown", 60, |p| {
        terminated(p).map(|t| (p.clone(), t))
    });
    assert_eq!(state["exitCode"], 3, "{state}");
    let bundle = attempt_dir(d, &pod, 0);
    let pid = shim_pid(&bundle);
    let stopped = wait_until(Duration::from_secs(10), "monitor stopped", || {
        (proc_state(pid) == Some('T')).then_some(())
    });
    assert!(
        stopped.is_some(),
        "the monitor {pid} stopped after its report"
    );
    assert!(
        !bundle.join("exit.json").exists(),
        "the exit was shown before its record was written"
    );
    (pod, bundle, pid)
}

#[test]
fn a_monitor_killed_after_reporting_the_exit_loses_nothing() {
    assert!(require_root(), "this test needs root");
    let mut d = TestDaemon::prepare_with(&[]);
    spawn_stopping_daemon(&mut d);
    d.write_manifest(
        "lost.yaml",
        &busybox_pod("lost", "  restartPolicy: Never\n", "", "exit 3"),
    );
    let (_, bundle, pid) = exit_shown_unrecorded(&d, "lost");
    let monitor = KillOnDrop(pid);
    // The exit is not durable: the pod must not be final on it yet.
    let pod = d.pod("lost").unwrap();
    assert!(
        !matches!(phase(&pod), "Failed" | "Succeeded"),
        "not final before the record: {pod}"
    );
    assert!(!bundle.join("terminated.json").exists());
    drop(monitor);

    // The daemon records the exit it was told and releases what the monitor held.
    let pod = d.wait_pod("lost", "the pod failed", 60, |p| {
        (phase(p) == "Failed").then(|| p.clone())
    });
    let state = terminated(&pod).unwrap();
    assert_eq!(state["exitCode"], 3, "{state}");
    assert_eq!(state["reason"], "Error", "not a lost container: {state}");
    let record: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("exit.json")).unwrap()).unwrap();
    assert_eq!(record["exit_code"], 3, "{record}");
    assert!(record.get("unknown").is_none(), "{record}");
    wait_until(Duration::from_secs(10), "terminated.json", || {
        bundle.join("terminated.json").exists().then_some(())
    })
    .expect("the verdict is recorded");
    let bundle_text = bundle.display().to_string();
    let left: Vec<String> = d
        .mounts()
        .into_iter()
        .filter(|m| m.starts_with(&bundle_text))
        .collect();
    assert!(
        left.is_empty(),
        "the container's mounts are released: {left:?}"
    );

    // A restarted daemon shows the same.
    d.kill9();
    d.spawn_daemon();
    let pod = d.wait_pod("lost", "the pod adopted", 60, |p| {
        terminated(p).map(|_| p.clone())
    });
    assert_eq!(phase(&pod), "Failed", "{pod}");
    let state = terminated(&pod).unwrap();
    assert_eq!(state["exitCode"], 3, "{state}");
    assert_eq!(state["reason"], "Error", "{state}");
}

#[test]
fn a_daemon_killed_before_the_exit_is_recorded_finds_it_recorded() {
    assert!(require_root(), "this test needs root");
    let mut d = TestDaemon::prepare_with(&[]);
    spawn_stopping_daemon(&mut d);
    d.write_manifest(
        "crash.yaml",
        &busybox_pod("crash", "  restartPolicy: OnFailure\n", "", "exit 3"),
    );
    let (pod, bundle, pid) = exit_shown_unrecorded(&d, "crash");
    let monitor = KillOnDrop(pid);
    // The next attempt waits for the record (and the clean-up).
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !attempt_dir(&d, &pod, 1).exists(),
        "no restart before the exit is recorded"
    );
    d.kill9();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGCONT,
    )
    .unwrap();
    let ended = wait_until(Duration::from_secs(30), "monitor gone", || {
        proc_state(pid).is_none().then_some(())
    });
    assert!(ended.is_some(), "the monitor finished after SIGCONT");
    drop(monitor);
    let record: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("exit.json")).unwrap()).unwrap();
    assert_eq!(record["exit_code"], 3, "{record}");
    assert!(record.get("unknown").is_none(), "{record}");

    // The next daemon (whose monitors record at once) takes the recorded exit as
    // attempt 0's end and starts attempt 1.
    d.spawn_daemon();
    let pod = d.wait_pod("crash", "the restart", 60, |p| {
        let c = container_status(p, "main")?;
        (c["restartCount"].as_i64()? >= 1 && c["lastState"]["terminated"].is_object())
            .then(|| p.clone())
    });
    let last = &container_status(&pod, "main").unwrap()["lastState"]["terminated"];
    assert_eq!(last["exitCode"], 3, "{last}");
    assert_eq!(last["reason"], "Error", "not a lost container: {last}");
}

/// A container that is over before its shim would exec the monitor (a short job, an
/// init container with nothing to do) is watched to the end by the shim itself: the
/// same log, exit, record and release as the monitor's. The shim of a debug build waits
/// for the exit there when `PODHOST_TEST_SHIM_AWAIT_EXIT` is set, so this path is taken
/// for certain.
#[test]
fn a_container_over_before_the_monitor_is_recorded_and_released_by_the_shim() {
    assert!(require_root(), "this test needs root");
    let mut d = TestDaemon::prepare_with(&[]);
    spawn_daemon_with(&mut d, ("PODHOST_TEST_SHIM_AWAIT_EXIT", "1"));
    d.write_manifest(
        "quick.yaml",
        &busybox_pod(
            "quick",
            "  restartPolicy: Never\n",
            "",
            "echo quick-output; exit 3",
        ),
    );
    let pod = d.wait_pod("quick", "the pod failed", 60, |p| {
        (phase(p) == "Failed").then(|| p.clone())
    });
    let state = terminated(&pod).unwrap();
    assert_eq!(state["exitCode"], 3, "{state}");
    assert_eq!(state["reason"], "Error", "{state}");

    let bundle = attempt_dir(&d, &pod, 0);
    let shim_log = std::fs::read_to_string(bundle.join("shim.log")).unwrap();
    assert!(
        shim_log.contains("the container exited before the monitor took over"),
        "the shim watched the exit itself: {shim_log}"
    );
    let record: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("exit.json")).unwrap()).unwrap();
    assert_eq!(record["exit_code"], 3, "{record}");
    let logs = d.cli(&["logs", &d.full_name("quick")]);
    assert!(
        String::from_utf8_lossy(&logs.stdout).contains("quick-output"),
        "the container's output is in its log: {logs:?}"
    );

    // Released as the monitor releases: libcontainer's state, the rootfs, the cgroup.
    let config: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("shim-config.json")).unwrap()).unwrap();
    let state_dir = Path::new(config["libcontainer_root"].as_str().unwrap())
        .join(config["container_id"].as_str().unwrap());
    let spec: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("config.json")).unwrap()).unwrap();
    let cgroup = spec["linux"]["cgroupsPath"]
        .as_str()
        .unwrap()
        .trim_start_matches('/');
    let released = wait_until(Duration::from_secs(10), "container released", || {
        let cgroups_left = cgroup_hierarchies()
            .into_iter()
            .any(|h| h.join(cgroup).exists());
        (!state_dir.exists() && !cgroups_left).then_some(())
    });
    assert!(
        released.is_some(),
        "libcontainer's state {state_dir:?} and the cgroup {cgroup} are removed"
    );
    let bundle_text = bundle.display().to_string();
    assert!(
        !d.mounts().iter().any(|m| m.starts_with(&bundle_text)),
        "the rootfs is unmounted: {:?}",
        d.mounts()
    );
}
