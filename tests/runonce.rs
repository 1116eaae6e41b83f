//! `podhost daemon --runonce`: the manifests' pods run once, the run waits until each
//! is Running or finished, prints one line per pod and exits 0 only when every pod is
//! Running or Succeeded. The pods are left as they are (a later daemon adopts them).
//! Each test runs the real binary on a real root dir with the busybox image.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::process::{Command, Output, Stdio};

use common::{BIN, TestDaemon, busybox_pod, require_root};

/// A test daemon's dirs and image, without a daemon: the run uses them.
fn prepared() -> TestDaemon {
    assert!(require_root());
    TestDaemon::prepare_on_machine_network(&[])
}

/// Runs `podhost daemon --runonce` on `d`'s dirs (as `TestDaemon` runs its daemon).
fn run_once(d: &TestDaemon, extra: &[&str]) -> Output {
    Command::new(BIN)
        .arg("daemon")
        .arg("--pod-manifest-path")
        .arg(&d.manifests)
        .arg("--root-dir")
        .arg(&d.root)
        .arg("--log-dir")
        .arg(&d.logs)
        .arg("--socket")
        .arg(&d.socket)
        .arg("--node-name")
        .arg(&d.node)
        .arg("--cgroup-root")
        .arg(&d.cgroup_root)
        .args([
            "--crashloop-initial-backoff",
            "1",
            "--crashloop-max-backoff",
            "4",
        ])
        // No node-pressure eviction on a build host with little disk (as TestDaemon).
        .arg("--eviction-hard=")
        .args(&d.extra_args)
        .arg("--runonce")
        .args(extra)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .output()
        .expect("run podhost daemon --runonce")
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The report line of pod `name`.
fn line_of<'a>(stdout: &'a str, d: &TestDaemon, name: &str) -> &'a str {
    let full = d.full_name(name);
    stdout
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(full.as_str()))
        .unwrap_or_else(|| panic!("no line for {full} in:\n{stdout}"))
}

#[test]
fn a_pod_that_exits_zero_makes_the_run_succeed_with_its_status_printed() {
    let d = prepared();
    d.write_manifest(
        "job.yaml",
        &busybox_pod("job", "  restartPolicy: Never\n", "", "echo done"),
    );
    let out = run_once(&d, &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.starts_with("NAMESPACE"), "{stdout}");
    let line = line_of(&stdout, &d, "job");
    assert!(line.starts_with("default "), "{line}");
    assert!(line.contains(" Succeeded "), "{line}");
    assert!(
        line.contains("main=terminated(Completed, exit 0)"),
        "{line}"
    );
    assert!(line.ends_with(" ok"), "{line}");
    assert!(!d.socket.exists(), "a run serves no API socket");
}

#[test]
fn a_failing_pod_or_a_bad_manifest_makes_the_run_fail() {
    let d = prepared();
    d.write_manifest(
        "fail.yaml",
        &busybox_pod("fail", "  restartPolicy: Never\n", "", "exit 3"),
    );
    d.write_manifest(
        "ok.yaml",
        &busybox_pod("ok", "  restartPolicy: Never\n", "", "true"),
    );
    d.write_manifest("broken.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {}\n");
    let out = run_once(&d, &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let fail = line_of(&stdout, &d, "fail");
    assert!(fail.contains(" Failed "), "{fail}");
    assert!(fail.contains("main=terminated(Error, exit 3)"), "{fail}");
    assert!(fail.contains("FAILED: "), "{fail}");
    assert!(line_of(&stdout, &d, "ok").ends_with(" ok"), "{stdout}");
    let broken = stdout
        .lines()
        .find(|l| l.starts_with("manifest error: "))
        .unwrap_or_else(|| panic!("the bad manifest is not reported:\n{stdout}"));
    assert!(
        broken.contains("broken.yaml") && broken.contains("metadata.name"),
        "{broken}"
    );
    assert!(
        stderr.contains("runonce: 1 of 2 pods failed or did not come up, 1 manifests"),
        "{stderr}"
    );
}

#[test]
fn a_pod_that_stays_running_ends_the_run_once_running_and_is_left_running() {
    let d = prepared();
    d.write_manifest("web.yaml", &busybox_pod("web", "", "", "sleep 3600"));
    let out = run_once(&d, &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let line = line_of(&stdout, &d, "web");
    assert!(
        line.contains(" Running ") && line.contains("main=running"),
        "{line}"
    );
    // The container outlives the run, as the kubelet leaves its pods.
    let started: Vec<_> = std::fs::read_dir(d.root.join("pods"))
        .unwrap()
        .flatten()
        .map(|p| p.path().join("containers/main/0/started.json"))
        .filter(|p| p.exists())
        .collect();
    assert_eq!(started.len(), 1, "{started:?}");
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&started[0]).unwrap()).unwrap();
    let pid = i32::try_from(record["init_pid"].as_i64().unwrap()).unwrap();
    assert!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok(),
        "the container (pid {pid}) was stopped when the run ended"
    );
}

#[test]
fn a_crash_looping_pod_fails_the_run_without_waiting_for_the_bound() {
    let d = prepared();
    d.write_manifest("loop.yaml", &busybox_pod("loop", "", "", "exit 1"));
    // The bound is far away: the run must end on the CrashLoopBackOff itself.
    let out = run_once(&d, &["--runonce-timeout", "3600"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let line = line_of(&stdout, &d, "loop");
    assert!(
        line.contains("FAILED: container main is in CrashLoopBackOff"),
        "{line}"
    );
}

#[test]
fn a_pod_not_up_within_the_bound_fails_the_run() {
    let d = prepared();
    // "slow" is Running but never ready (its readiness probe fails): that is up.
    // "init" never gets past its init container: Pending until the bound.
    d.write_manifest(
        "slow.yaml",
        &busybox_pod("slow", "", "", "sleep 3600").replace(
            "    command:",
            "    readinessProbe: {exec: {command: [\"false\"]}}\n    command:",
        ),
    );
    d.write_manifest(
        "init.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: init\nspec:\n  initContainers:\n  - name: wait\n    image: localhost/busybox:latest\n    imagePullPolicy: Never\n    command: [sleep, \"3600\"]\n  containers:\n  - name: main\n    image: localhost/busybox:latest\n    imagePullPolicy: Never\n    command: [sleep, \"3600\"]\n",
    );
    let out = run_once(&d, &["--runonce-timeout", "2"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let init = line_of(&stdout, &d, "init");
    assert!(
        init.contains(" Pending ") && init.contains("FAILED: not up within 2s"),
        "{init}"
    );
    // Running (not ready) is up: readiness is not part of "running".
    assert!(line_of(&stdout, &d, "slow").ends_with(" ok"), "{stdout}");
}

#[test]
fn a_run_on_the_root_dir_of_a_running_daemon_fails_clearly() {
    assert!(require_root());
    let d = TestDaemon::start_on_machine_network(&[]);
    let out = run_once(&d, &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stderr.contains("another podhost daemon already uses") && stderr.contains("lock held"),
        "{stderr}"
    );
    // The daemon's API is untouched.
    assert!(d.cli(&["get", "pods"]).status.success());
}
