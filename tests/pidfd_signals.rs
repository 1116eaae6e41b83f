//! Signals reach the recorded process or nobody (issue 28): real processes, the real
//! kernel's pidfds. A handle whose recorded start time is not that of the process at
//! the pid never signals it; a live matching process gets the signal; a reaped one is
//! "gone", not an error. The last test drives the daemon: an adopted container whose
//! `started.json` names another start time is never signalled, even when its pod is
//! deleted, and a fresh start record carries the init's true start time.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command};
use std::time::Duration;

use common::{TestDaemon, busybox_pod, phase, require_root, wait_until};
use nix::sys::signal::Signal;
use podhost::runtime::process_handle::{Delivery, ProcessHandle, StartCheck};
use podhost::runtime::sys::LinuxKernel;
use serde_json::Value;

/// The start time of `pid` as procfs (not podhost) reads it: clock ticks after boot.
fn start_ticks(pid: i32) -> u64 {
    procfs::process::Process::new(pid)
        .unwrap()
        .stat()
        .unwrap()
        .starttime
}

fn sleeper() -> Child {
    Command::new("sleep").arg("600").spawn().unwrap()
}

fn pid_of(child: &Child) -> i32 {
    i32::try_from(child.id()).unwrap()
}

/// How `child` ended, waiting at most a few seconds; `None` while it runs.
fn ended_by(child: &mut Child, within: Duration) -> Option<std::process::ExitStatus> {
    let until = std::time::Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if std::time::Instant::now() >= until {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn recorded(pid: i32, ticks: u64) -> ProcessHandle {
    ProcessHandle::recorded_with(
        &LinuxKernel,
        pid,
        StartCheck::Ticks(ticks),
        "a test sleeper",
    )
    .unwrap()
}

#[test]
fn a_live_process_with_the_recorded_start_gets_the_signal() {
    assert!(require_root());
    let mut child = sleeper();
    let pid = pid_of(&child);
    let handle = recorded(pid, start_ticks(pid));
    assert!(!handle.is_gone());
    assert_eq!(handle.signal(Signal::SIGTERM).unwrap(), Delivery::Sent);
    let status = ended_by(&mut child, Duration::from_secs(5)).expect("the sleeper ended");
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
}

#[test]
fn a_process_whose_start_is_not_the_recorded_one_survives_the_signal() {
    assert!(require_root());
    let mut child = sleeper();
    let pid = pid_of(&child);
    // What a record of an earlier process at this pid would say: another start.
    let handle = recorded(pid, start_ticks(pid) - 1);
    assert!(handle.is_gone());
    assert_eq!(handle.signal(Signal::SIGKILL).unwrap(), Delivery::Gone);
    let survived = ended_by(&mut child, Duration::from_millis(500)).is_none();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        survived,
        "a process that is not the recorded one was signalled"
    );
}

#[test]
fn a_reaped_process_is_gone_and_not_an_error() {
    assert!(require_root());
    let mut child = sleeper();
    let pid = pid_of(&child);
    let ticks = start_ticks(pid);
    let held = recorded(pid, ticks);
    child.kill().unwrap();
    child.wait().unwrap();
    // Opened while it ran: the pidfd names it, and it is reaped now.
    assert_eq!(held.signal(Signal::SIGTERM).unwrap(), Delivery::Gone);
    // Opened after the reap: nothing at the pid is the recorded process.
    let late = recorded(pid, ticks);
    assert!(late.is_gone());
    assert_eq!(late.signal(Signal::SIGTERM).unwrap(), Delivery::Gone);
}

#[test]
fn pid_zero_and_minus_one_are_refused() {
    assert!(require_root());
    for pid in [0, -1] {
        let err = ProcessHandle::recorded_with(
            &LinuxKernel,
            pid,
            StartCheck::Ticks(1),
            "a damaged record",
        )
        .unwrap_err();
        assert!(err.to_string().contains("is not a process id"), "{err}");
    }
}

fn started_json(d: &TestDaemon, uid: &str) -> (std::path::PathBuf, Value) {
    let path = d
        .root
        .join(format!("pods/{uid}/containers/main/0/started.json"));
    let v = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    (path, v)
}

fn alive(pid: i32) -> bool {
    // Test code: a probe of a pid this test watches, no decision of podhost's.
    procfs::process::Process::new(pid)
        .and_then(|p| p.stat())
        .is_ok_and(|s| s.state != 'Z')
}

#[test]
fn an_adopted_container_whose_record_names_another_start_is_never_signalled() {
    assert!(require_root());
    let mut d = TestDaemon::start();
    d.write_manifest(
        "p.yaml",
        &busybox_pod(
            "p",
            "  terminationGracePeriodSeconds: 1\n",
            "",
            "sleep 3600",
        ),
    );
    let pod = d.wait_pod("p", "p Running", 30, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
    let (path, mut started) = started_json(&d, &uid);
    let pid = i32::try_from(started["init_pid"].as_i64().unwrap()).unwrap();
    // The shim recorded the init's true start time.
    assert_eq!(
        started["init_start_ticks"].as_u64(),
        Some(start_ticks(pid)),
        "{started}"
    );

    // The daemon dies; the record now names a process with another start at that pid
    // (what it would say had the init been reaped and its pid reused).
    d.kill9();
    started["init_start_ticks"] = Value::from(start_ticks(pid) + 1);
    std::fs::write(&path, serde_json::to_vec(&started).unwrap()).unwrap();
    d.spawn_daemon();
    d.wait_pod("p", "p adopted and Running", 20, |p| {
        (phase(p) == "Running").then_some(())
    });

    // Deleting the pod sends the stop signal, then SIGKILL after the 1 s grace: neither
    // may reach a process that is not the recorded one.
    d.remove_manifest("p.yaml");
    wait_until(
        Duration::from_secs(20),
        "the SIGKILL after the grace",
        || {
            d.daemon_log()
                .contains("grace period over, sending SIGKILL")
                .then_some(())
        },
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(alive(pid), "the process at the recorded pid was signalled");
    let log = d.daemon_log();
    assert!(
        log.contains("the container's init is gone already; nothing signalled"),
        "{log}"
    );

    // Once it really ends, the pod goes.
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL).unwrap();
    d.wait_gone("p", 40);
}
