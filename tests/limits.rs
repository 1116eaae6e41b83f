//! rlimits and oom_score_adj on this host (root without CAP_SYS_RESOURCE here): values
//! the host allows are applied, the others clamped with a LimitClamped event; a bad
//! rlimits annotation is a clear CreateContainerConfigError. (The full policy, with
//! CAP_SYS_RESOURCE, is verified in the VM suite.)

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;

fn can_raise() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let caps = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
        .unwrap();
    caps & (1 << 24) != 0
}

fn hard_nofile() -> u64 {
    let (_, hard) =
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap();
    hard
}

#[test]
fn rlimits_annotation_applied_or_clamped_and_best_effort_score() {
    require_root();
    let d = TestDaemon::start();
    d.write_manifest(
        "lim.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: lim\n  annotations:\n    podhost.io/rlimits.main: \"nofile=4096:65536,nproc=2048\"\nspec:\n  containers:\n  - name: main\n    image: localhost/busybox:latest\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", \"cat /proc/self/limits; cat /proc/self/oom_score_adj; sleep 100\"]\n",
    );
    let pod = d.wait_pod("lim", "Running", 20, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    let logs = wait_until(std::time::Duration::from_secs(5), "limits printed", || {
        let l = d.logs_of("lim", "main");
        l.lines().count().ge(&10).then_some(l)
    })
    .expect("limits printed");
    let field = |name: &str| -> String {
        let line = logs
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{logs}"));
        line[name.len()..]
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(":")
    };
    let want_hard = if can_raise() {
        65536
    } else {
        hard_nofile().min(65536)
    };
    assert_eq!(field("Max open files"), format!("4096:{want_hard}"));
    assert_eq!(field("Max processes"), "2048:2048");
    assert_eq!(
        logs.lines().last().map(str::trim),
        Some("1000"),
        "BestEffort oom_score_adj"
    );
    let clamped = d
        .pod_events("lim")
        .into_iter()
        .any(|e| e["reason"] == "LimitClamped");
    assert_eq!(
        clamped,
        want_hard < 65536,
        "a LimitClamped event exactly when clamped"
    );
    assert_eq!(pod["status"]["qosClass"], "BestEffort");
}

#[test]
fn bad_rlimits_annotation_is_a_config_error() {
    require_root();
    let d = TestDaemon::start();
    d.write_manifest(
        "badlim.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: badlim\n  annotations:\n    podhost.io/rlimits.main: \"files=10\"\nspec:\n  restartPolicy: Never\n  containers:\n  - name: main\n    image: localhost/busybox:latest\n    imagePullPolicy: IfNotPresent\n    command: [\"true\"]\n",
    );
    // As the kubelet: Waiting with the reason (not an exit, not a restart); the pod
    // stays Pending while the start is retried.
    let p = d.wait_pod("badlim", "CreateContainerConfigError", 20, |p| {
        let w = &container_status(p, "main")?["state"]["waiting"];
        (w["reason"] == "CreateContainerConfigError").then(|| p.clone())
    });
    assert_eq!(phase(&p), "Pending");
    let cs = container_status(&p, "main").unwrap();
    assert_eq!(cs["restartCount"], 0);
    let t = &cs["state"]["waiting"];
    let msg = t["message"].as_str().unwrap();
    assert!(
        msg.contains("podhost.io/rlimits.main") && msg.contains("files"),
        "{msg}"
    );
}
