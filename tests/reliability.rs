//! `kill -9` of the daemon: containers keep running, status is recovered, an exit that
//! happened while the daemon was down is reported with its real code and time, and no
//! container is started twice.

mod common;

use std::time::Duration;

use common::*;

#[test]
fn daemon_kill9_and_restart_keeps_and_recovers_containers() {
    require_root();
    let mut d = TestDaemon::start();
    let marker = format!("keepalive-{}", d.node);
    d.write_manifest(
        "long.yaml",
        &busybox_pod(
            "long",
            "  terminationGracePeriodSeconds: 2\n",
            "",
            &format!("exec sleep 1000 # {marker}"),
        ),
    );
    d.write_manifest(
        "short.yaml",
        &busybox_pod("short", "  restartPolicy: Never\n", "", "sleep 2; exit 4"),
    );
    let long = d.wait_pod("long", "long Running", 20, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    d.wait_pod("short", "short Running", 20, |p| {
        (phase(p) == "Running").then_some(())
    });
    let long_started =
        container_status(&long, "main").unwrap()["state"]["running"]["startedAt"].clone();
    let before: Vec<i32> = TestDaemon::pids_with("sleep 1000");
    let before: Vec<i32> = before
        .into_iter()
        .filter(|p| is_in_test(*p, &marker))
        .collect();

    d.kill9();
    // While the daemon is down, `short` exits by itself.
    std::thread::sleep(Duration::from_secs(3));
    let restarted_at = chrono::Utc::now();
    d.spawn_daemon();

    let short = d.wait_pod("short", "short Failed", 20, |p| {
        (phase(p) == "Failed").then(|| p.clone())
    });
    let t = &container_status(&short, "main").unwrap()["state"]["terminated"];
    assert_eq!(t["exitCode"], 4, "the real exit code: {t}");
    assert!(
        ts(&t["finishedAt"]) < restarted_at,
        "the real exit time, before the restart: {t}"
    );

    let long = d.pod("long").unwrap();
    let cs = container_status(&long, "main").unwrap();
    assert_eq!(
        cs["state"]["running"]["startedAt"], long_started,
        "same container"
    );
    assert_eq!(cs["restartCount"], 0);
    std::thread::sleep(Duration::from_secs(1));
    let after: Vec<i32> = TestDaemon::pids_with("sleep 1000")
        .into_iter()
        .filter(|p| is_in_test(*p, &marker))
        .collect();
    assert_eq!(before.len(), 1, "{before:?}");
    assert_eq!(after, before, "same PID, no duplicate container");
    // The recovered container is still controlled: removal stops it.
    d.remove_manifest("long.yaml");
    d.wait_gone("long", 40);
    assert!(
        TestDaemon::pids_with("sleep 1000")
            .into_iter()
            .all(|p| !is_in_test(p, &marker))
    );
}

/// Whether `pid` is this test's container: `exec sleep` replaced the shell, so the marker
/// is looked up in the OCI config of the bundle named by the parent shim's command line.
fn is_in_test(pid: i32, marker: &str) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let ppid: i32 = stat
        .rsplit(')')
        .next()
        .and_then(|s| s.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let cmd = std::fs::read(format!("/proc/{ppid}/cmdline")).unwrap_or_default();
    let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
    let Some(cfg) = cmd
        .split_whitespace()
        .find(|a| a.ends_with("shim-config.json"))
    else {
        return false;
    };
    let bundle = std::path::Path::new(cfg).parent().unwrap();
    std::fs::read_to_string(bundle.join("config.json"))
        .map(|c| c.contains(marker))
        .unwrap_or(false)
}
