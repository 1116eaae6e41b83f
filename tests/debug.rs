//! `podhost debug`: an ephemeral container joins a running pod's namespaces (and its
//! target's pid namespace), shows in `ephemeralContainerStatuses`, is never restarted,
//! and is stopped with the pod.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;

fn ephemeral_status(pod: &serde_json::Value, name: &str) -> Option<serde_json::Value> {
    pod["status"]["ephemeralContainerStatuses"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == name)
        .cloned()
}

fn start_app(d: &TestDaemon, name: &str) -> String {
    d.write_manifest(
        &format!("{name}.yaml"),
        &busybox_pod(
            name,
            "  terminationGracePeriodSeconds: 3\n",
            "",
            "exec sleep 1001",
        ),
    );
    d.wait_pod(name, "running", 30, |p| {
        container_status(p, "main")?["state"]["running"]
            .is_object()
            .then_some(())
    });
    d.full_name(name)
}

#[test]
fn a_debug_container_sees_its_targets_processes_and_reports_its_exit() {
    require_root();
    let d = TestDaemon::start();
    let pod = start_app(&d, "dbg");
    let out = d.cli(&[
        "debug",
        &pod,
        "--image",
        "localhost/busybox:latest",
        "--image-pull-policy",
        "Never",
        "--target",
        "main",
        "-c",
        "peek",
        "--",
        "sh",
        "-c",
        "ps; echo hello; exit 3",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(3),
        "stdout {stdout}, stderr {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("hello"), "{stdout}");
    assert!(
        stdout.contains("sleep 1001"),
        "the target's processes are visible: {stdout}"
    );
    let p = d.pod("dbg").unwrap();
    let s = ephemeral_status(&p, "peek").unwrap();
    assert_eq!(s["state"]["terminated"]["exitCode"], 3, "{s}");
    assert_eq!(s["restartCount"], 0);
    assert_eq!(p["spec"]["ephemeralContainers"][0]["name"], "peek");
    assert_eq!(phase(&p), "Running");
    assert_eq!(container_status(&p, "main").unwrap()["restartCount"], 0);
    std::thread::sleep(std::time::Duration::from_secs(2));
    let s = ephemeral_status(&d.pod("dbg").unwrap(), "peek").unwrap();
    assert_eq!(s["restartCount"], 0, "never restarted");

    // Without a target, its own pid namespace: the app's processes are not visible.
    let out = d.cli(&[
        "debug",
        &pod,
        "--image",
        "localhost/busybox:latest",
        "--image-pull-policy",
        "Never",
        "-c",
        "alone",
        "--",
        "ps",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    assert!(!stdout.contains("sleep 1001"), "{stdout}");
    // A taken name is refused.
    let out = d.cli(&[
        "debug",
        &pod,
        "--image",
        "localhost/busybox:latest",
        "-c",
        "main",
        "--",
        "true",
    ]);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already has a container named \"main\""),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_running_debug_container_is_stopped_with_its_pod() {
    require_root();
    let mut d = TestDaemon::start();
    let pod = start_app(&d, "dbgstop");
    let socket = d.socket.clone();
    let bin = env!("CARGO_BIN_EXE_podhost");
    let mut child = std::process::Command::new(bin)
        .args(["--socket"])
        .arg(&socket)
        .args([
            "debug",
            &pod,
            "--image",
            "localhost/busybox:latest",
            "--image-pull-policy",
            "Never",
            "-c",
            "stay",
            "--",
            "sleep",
            "1002",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    d.wait_pod("dbgstop", "debug container running", 30, |p| {
        ephemeral_status(p, "stay")?["state"]["running"]
            .is_object()
            .then_some(())
    });
    // A daemon restart adopts it like any container.
    d.kill9();
    d.spawn_daemon();
    d.wait_pod("dbgstop", "debug container adopted", 30, |p| {
        ephemeral_status(p, "stay")?["state"]["running"]
            .is_object()
            .then_some(())
    });
    d.remove_manifest("dbgstop.yaml");
    d.wait_gone("dbgstop", 30);
    // The `podhost debug` client's own command line names "sleep 1002" too, and it may
    // not have seen the pod go yet: only the container's process counts.
    let cli = i32::try_from(child.id()).unwrap();
    let left: Vec<i32> = TestDaemon::pids_with("sleep 1002")
        .into_iter()
        .filter(|p| *p != cli)
        .collect();
    assert!(
        left.is_empty(),
        "the debug container was left running: {left:?}"
    );
    let _ = child.kill();
    let _ = child.wait();
}
