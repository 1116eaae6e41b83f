//! Termination as the kubelet does it: preStop, then the stop signal, then SIGKILL at
//! the deadline; hooks of several containers run in parallel.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::{Duration, Instant};

use common::*;

fn two_container_pod(name: &str, grace: u32, pre_stop: &str, main: &str) -> String {
    let container = |cname: &str| {
        format!(
            "  - name: {cname}\n    image: localhost/busybox:latest\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", {main}]\n    lifecycle:\n      preStop:\n        exec:\n          command: [\"sh\", \"-c\", {pre}]\n",
            main = serde_json::to_string(&main.replace("NAME", cname)).unwrap(),
            pre = serde_json::to_string(pre_stop).unwrap(),
        )
    };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: {grace}\n  containers:\n{}{}",
        container("a"),
        container("b")
    )
}

fn log_of(
    d: &TestDaemon,
    pod: &serde_json::Value,
    container: &str,
) -> Vec<(chrono::DateTime<chrono::Utc>, String, String)> {
    let uid = pod["metadata"]["uid"].as_str().unwrap();
    let name = pod["metadata"]["name"].as_str().unwrap();
    log_lines(
        &d.logs
            .join(format!("default_{name}_{uid}/{container}/0.log")),
    )
}

fn find(
    lines: &[(chrono::DateTime<chrono::Utc>, String, String)],
    msg: &str,
) -> chrono::DateTime<chrono::Utc> {
    lines
        .iter()
        .find(|l| l.2 == msg)
        .unwrap_or_else(|| panic!("no {msg:?} in {lines:?}"))
        .0
}

#[test]
fn pre_stop_finishes_before_the_stop_signal_in_parallel() {
    require_root();
    let d = TestDaemon::start();
    d.write_manifest(
        "hooks.yaml",
        &two_container_pod(
            "hooks",
            20,
            "echo prestop-begin > /proc/1/fd/1; sleep 2; echo prestop-end > /proc/1/fd/1",
            "trap 'echo term; exit 0' TERM; echo up; while true; do sleep 0.1; done",
        ),
    );
    let pod = d.wait_pod("hooks", "Running", 20, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    wait_until(Duration::from_secs(5), "both up", || {
        (!log_of(&d, &pod, "a").is_empty() && !log_of(&d, &pod, "b").is_empty()).then_some(())
    })
    .expect("containers logged");
    let removed = Instant::now();
    d.remove_manifest("hooks.yaml");
    let took = d.wait_gone("hooks", 20);
    eprintln!("two containers with a 2 s preStop each stopped in {took:?}");
    for c in ["a", "b"] {
        let lines = log_of(&d, &pod, c);
        let (begin, end, term) = (
            find(&lines, "prestop-begin"),
            find(&lines, "prestop-end"),
            find(&lines, "term"),
        );
        assert!(
            begin < end && end <= term,
            "{c}: preStop must finish before the stop signal: {lines:?}"
        );
        assert!((end - begin).as_seconds_f64() >= 1.9);
    }
    assert!(took >= Duration::from_secs(2), "{took:?}");
    assert!(
        took < Duration::from_secs(4) + Duration::from_millis(1500),
        "hooks ran in parallel: {took:?}"
    );
    let _ = removed;
}

#[test]
fn sigkill_follows_a_process_that_ignores_sigterm() {
    require_root();
    let d = TestDaemon::start();
    d.write_manifest(
        "stubborn.yaml",
        &busybox_pod(
            "stubborn",
            "  terminationGracePeriodSeconds: 3\n",
            "",
            "trap 'echo ignoring-term' TERM; echo up; while true; do sleep 0.1; done",
        ),
    );
    let pod = d.wait_pod("stubborn", "Running", 20, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    wait_until(Duration::from_secs(5), "up", || {
        (!log_of(&d, &pod, "main").is_empty()).then_some(())
    })
    .unwrap();
    let full = d.full_name("stubborn");
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
    d.remove_manifest("stubborn.yaml");
    let took = d.wait_gone("stubborn", 20);
    eprintln!("SIGTERM-ignoring container killed after {took:?}");
    assert!(
        took >= Duration::from_secs(3),
        "the grace period is honoured: {took:?}"
    );
    assert!(
        took < Duration::from_secs(6),
        "SIGKILL at the deadline: {took:?}"
    );
    let lines = log_of(&d, &pod, "main");
    assert!(
        lines.iter().any(|l| l.2 == "ignoring-term"),
        "SIGTERM came first: {lines:?}"
    );
    assert!(TestDaemon::pids_with(&format!("{}/pods/{uid}", d.root.display())).is_empty());
    assert!(d.daemon_log().contains("sending SIGKILL"), "{full}");
}

#[test]
fn hung_pre_stop_is_abandoned_at_the_deadline_and_sigkill_follows() {
    require_root();
    let d = TestDaemon::start();
    d.write_manifest(
        "hung.yaml",
        &format!(
            "{}    lifecycle:\n      preStop:\n        exec:\n          command: [\"sleep\", \"100\"]\n",
            busybox_pod(
                "hung",
                "  terminationGracePeriodSeconds: 3\n",
                "",
                "trap 'echo term' TERM; echo up; while true; do sleep 0.1; done",
            )
        ),
    );
    let pod = d.wait_pod("hung", "Running", 20, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    wait_until(Duration::from_secs(5), "up", || {
        (!log_of(&d, &pod, "main").is_empty()).then_some(())
    })
    .unwrap();
    let removed = chrono::Utc::now();
    d.remove_manifest("hung.yaml");
    // The event appears while the pod is still terminating (hook abandoned at 3 s,
    // SIGKILL 2 s after the stop signal).
    let event = wait_until(Duration::from_secs(8), "FailedPreStopHook", || {
        d.pod_events("hung")
            .into_iter()
            .find(|e| e["reason"] == "FailedPreStopHook")
    })
    .expect("FailedPreStopHook event");
    assert!(
        event["message"]
            .as_str()
            .unwrap()
            .contains("not completed in grace period"),
        "{event}"
    );
    let took = d.wait_gone("hung", 20);
    let lines = log_of(&d, &pod, "main");
    let term = find(&lines, "term");
    let term_after = (term - removed).as_seconds_f64();
    eprintln!("stop signal {term_after:.2}s after removal; pod gone after {took:?} more");
    assert!(
        (2.9..4.5).contains(&term_after),
        "stop signal at the grace deadline: {term_after}"
    );
    let total = (chrono::Utc::now() - removed).as_seconds_f64();
    assert!(
        (4.9..8.0).contains(&total),
        "SIGKILL 2 s after the stop signal: {total}"
    );
}

#[test]
fn failed_pre_stop_is_an_event_not_a_stuck_pod() {
    require_root();
    let d = TestDaemon::start();
    d.write_manifest(
        "failhook.yaml",
        &format!(
            "{}    lifecycle:\n      preStop:\n        exec:\n          command: [\"sh\", \"-c\", \"echo hook-broke; exit 9\"]\n",
            busybox_pod(
                "failhook",
                "  terminationGracePeriodSeconds: 10\n",
                "",
                "trap 'sleep 1; exit 0' TERM; echo up; while true; do sleep 0.1; done",
            )
        ),
    );
    d.wait_pod("failhook", "Running", 20, |p| {
        (phase(p) == "Running").then_some(())
    });
    // Running is reported when the process starts; the trap is set once it logged.
    wait_until(Duration::from_secs(5), "up", || {
        d.logs_of("failhook", "main").contains("up").then_some(())
    })
    .expect("container logged");
    d.remove_manifest("failhook.yaml");
    let event = wait_until(Duration::from_secs(5), "FailedPreStopHook", || {
        d.pod_events("failhook")
            .into_iter()
            .find(|e| e["reason"] == "FailedPreStopHook")
    });
    let took = d.wait_gone("failhook", 10);
    let event = event.expect("FailedPreStopHook event");
    let msg = event["message"].as_str().unwrap();
    assert!(
        msg.contains("exited with 9") && msg.contains("hook-broke"),
        "{msg}"
    );
    assert!(took < Duration::from_secs(4), "{took:?}");
}

#[test]
fn sleep_pre_stop_delays_the_stop_signal() {
    require_root();
    let d = TestDaemon::start();
    d.write_manifest(
        "nap.yaml",
        &format!(
            "{}    lifecycle:\n      preStop:\n        sleep:\n          seconds: 2\n",
            busybox_pod(
                "nap",
                "  terminationGracePeriodSeconds: 10\n",
                "",
                "trap 'echo term; exit 0' TERM; echo up; while true; do sleep 0.1; done",
            )
        ),
    );
    let pod = d.wait_pod("nap", "Running", 20, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    wait_until(Duration::from_secs(5), "up", || {
        (!log_of(&d, &pod, "main").is_empty()).then_some(())
    })
    .unwrap();
    let removed = chrono::Utc::now();
    d.remove_manifest("nap.yaml");
    d.wait_gone("nap", 20);
    let term = find(&log_of(&d, &pod, "main"), "term");
    let after = (term - removed).as_seconds_f64();
    assert!(
        (1.9..4.0).contains(&after),
        "stop signal {after}s after removal"
    );
}
