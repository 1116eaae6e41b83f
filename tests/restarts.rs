//! Exit codes, restart policies and CrashLoopBackOff (daemon runs with 1 s initial and
//! 4 s maximum back-off; the kubelet's 10 s / 300 s are unit-tested in model::backoff).

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::*;

#[test]
fn never_policy_reports_exit_codes_and_phase() {
    require_root();
    let d = TestDaemon::start();
    d.write_manifest(
        "ok.yaml",
        &busybox_pod("ok", "  restartPolicy: Never\n", "", "exit 0"),
    );
    d.write_manifest(
        "bad.yaml",
        &busybox_pod(
            "bad",
            "  restartPolicy: Never\n",
            "",
            "echo failing; exit 5",
        ),
    );
    let ok = d.wait_pod("ok", "ok Succeeded", 20, |p| {
        (phase(p) == "Succeeded").then(|| p.clone())
    });
    let t = &container_status(&ok, "main").unwrap()["state"]["terminated"];
    assert_eq!(t["exitCode"], 0);
    assert_eq!(t["reason"], "Completed");
    let bad = d.wait_pod("bad", "bad Failed", 20, |p| {
        (phase(p) == "Failed").then(|| p.clone())
    });
    let cs = container_status(&bad, "main").unwrap();
    let t = &cs["state"]["terminated"];
    assert_eq!(t["exitCode"], 5);
    assert_eq!(t["reason"], "Error");
    assert!(ts(&t["finishedAt"]) >= ts(&t["startedAt"]));
    assert_eq!(cs["restartCount"], 0);
    std::thread::sleep(Duration::from_secs(2));
    let bad = d.pod("bad").unwrap();
    assert_eq!(
        container_status(&bad, "main").unwrap()["restartCount"],
        0,
        "Never: no restart"
    );
}

#[test]
fn on_failure_restarts_with_doubling_backoff() {
    require_root();
    let d = TestDaemon::start();
    d.write_manifest(
        "crash.yaml",
        &busybox_pod(
            "crash",
            "  restartPolicy: OnFailure\n",
            "",
            "echo run; exit 3",
        ),
    );
    // Restarts 0 (immediate), then 1 s, 2 s, 4 s, 4 s.
    let pod = d.wait_pod("crash", "4 restarts", 40, |p| {
        let cs = container_status(p, "main")?;
        (cs["restartCount"].as_i64()? >= 4).then(|| p.clone())
    });
    let cs = container_status(&pod, "main").unwrap();
    assert_eq!(cs["lastState"]["terminated"]["exitCode"], 3);
    // Every start has its own CRI log file, numbered by restart count.
    let uid = pod["metadata"]["uid"].as_str().unwrap();
    let dir = d
        .logs
        .join(format!("default_{}_{uid}/main", d.full_name("crash")));
    let mut starts = Vec::new();
    for n in 0..=4 {
        // restartCount counts a start; the container's first line may land just after.
        let path = dir.join(format!("{n}.log"));
        let lines = wait_until(
            Duration::from_secs(10),
            "the attempt's first log line",
            || {
                let lines = log_lines(&path);
                (!lines.is_empty()).then_some(lines)
            },
        )
        .unwrap_or_default();
        assert_eq!(
            lines.first().map(|l| l.2.as_str()),
            Some("run"),
            "attempt {n}"
        );
        starts.push(lines[0].0);
    }
    let gaps: Vec<f64> = starts
        .windows(2)
        .map(|w| (w[1] - w[0]).as_seconds_f64())
        .collect();
    eprintln!("gaps between starts: {gaps:?}");
    let expected = [0.0, 1.0, 2.0, 4.0];
    for (gap, want) in gaps.iter().zip(expected) {
        assert!(
            *gap >= want - 0.05 && *gap < want + 1.5,
            "gap {gap} vs back-off {want}: {gaps:?}"
        );
    }
    // The waiting reason during back-off, and the BackOff event.
    let seen = wait_until(Duration::from_secs(10), "CrashLoopBackOff", || {
        let p = d.pod("crash")?;
        let w = &container_status(&p, "main")?["state"]["waiting"];
        (w["reason"] == "CrashLoopBackOff").then(|| w["message"].as_str().unwrap_or("").to_string())
    })
    .expect("CrashLoopBackOff seen");
    assert!(
        seen.starts_with("back-off 4s restarting failed container=main pod="),
        "{seen}"
    );
    assert!(
        d.pod_events("crash")
            .iter()
            .any(|e| e["reason"] == "BackOff")
    );
    // --previous shows the instance before the current one.
    let out = d.cli(&["logs", "--previous", &d.full_name("crash")]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "run\n");
}

#[test]
fn on_failure_success_is_not_restarted_and_always_restarts_success() {
    require_root();
    let d = TestDaemon::start();
    d.write_manifest(
        "once.yaml",
        &busybox_pod("once", "  restartPolicy: OnFailure\n", "", "exit 0"),
    );
    d.write_manifest("loop.yaml", &busybox_pod("loop", "", "", "exit 0"));
    d.wait_pod("once", "once Succeeded", 20, |p| {
        (phase(p) == "Succeeded").then_some(())
    });
    let p = d.wait_pod("loop", "loop restarted twice", 20, |p| {
        (container_status(p, "main")?["restartCount"].as_i64()? >= 2).then(|| p.clone())
    });
    assert_eq!(phase(&p), "Running", "Always: phase stays Running");
    assert_eq!(
        container_status(&d.pod("once").unwrap(), "main").unwrap()["restartCount"],
        0
    );
}

#[test]
fn bad_command_is_a_start_error_with_backoff() {
    require_root();
    let d = TestDaemon::start();
    d.write_manifest(
        "nocmd.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: nocmd\nspec:\n  restartPolicy: Never\n  containers:\n  - name: main\n    image: localhost/busybox:latest\n    imagePullPolicy: IfNotPresent\n    command: [\"/no/such/binary\"]\n",
    );
    let p = d.wait_pod("nocmd", "nocmd Failed", 20, |p| {
        (phase(p) == "Failed").then(|| p.clone())
    });
    let t = &container_status(&p, "main").unwrap()["state"]["terminated"];
    assert_eq!(t["exitCode"], 128);
    assert_eq!(t["reason"], "StartError");
    assert!(
        t["message"]
            .as_str()
            .unwrap_or("")
            .contains("/no/such/binary"),
        "{t}"
    );
}

#[test]
fn missing_image_waits_and_starts_once_loaded() {
    require_root();
    let d = TestDaemon::start();
    d.write_manifest(
        "img.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: img\nspec:\n  containers:\n  - name: main\n    image: localhost/other:v1\n    command: [\"sleep\", \"100\"]\n",
    );
    let w = d.wait_pod("img", "image error", 20, |p| {
        let r = container_status(p, "main")?["state"]["waiting"]["reason"]
            .as_str()?
            .to_string();
        // localhost/ images are local only: never pulled, so no pull back-off.
        (r == "ErrImageNeverPull").then_some(r)
    });
    eprintln!("waiting reason: {w}");
    let p = d.pod("img").unwrap();
    let msg = container_status(&p, "main").unwrap()["state"]["waiting"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("localhost/other:v1"), "{msg}");
    // The same image under another name, loaded through the daemon: the waiting
    // container starts right away instead of at the end of its back-off.
    let copy = d.dir.path().join("other-layout");
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(busybox_layout())
        .arg(&copy)
        .status()
        .unwrap();
    assert!(status.success());
    let index = std::fs::read_to_string(copy.join("index.json")).unwrap();
    std::fs::write(
        copy.join("index.json"),
        index.replace("localhost/busybox:latest", "localhost/other:v1"),
    )
    .unwrap();
    let out = d.cli(&["load", copy.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("localhost/other:v1"));
    d.wait_pod("img", "img Running after load", 5, |p| {
        (phase(p) == "Running").then_some(())
    });
    let out = d.cli(&["images"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("localhost/other:v1") && text.contains("localhost/busybox:latest"),
        "{text}"
    );
}
