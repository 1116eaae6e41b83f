//! `podhost rmi` refuses an image a pod uses (naming the pod) and removes it once
//! unused; `podhost gc` runs both GC passes on demand; container GC keeps only the
//! newest dead instance of a crash-looping container.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::*;

#[test]
fn rmi_refuses_images_in_use_and_gc_runs_on_demand() {
    require_root();
    let d = TestDaemon::start();
    d.write_manifest(
        "user.yaml",
        &busybox_pod(
            "user",
            "  terminationGracePeriodSeconds: 2\n",
            "",
            "sleep 100",
        ),
    );
    d.wait_pod("user", "Running", 20, |p| {
        (phase(p) == "Running").then_some(())
    });
    let out = d.cli(&["rmi", "localhost/busybox:latest"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("in use") && err.contains(&d.full_name("user")),
        "{err}"
    );
    d.remove_manifest("user.yaml");
    d.wait_gone("user", 20);
    let out = d.cli(&["gc"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["bytes_freed"].is_u64(), "{report}");
    let out = d.cli(&["rmi", "localhost/busybox:latest"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = d.cli(&["images"]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("localhost/busybox"));
    let out = d.cli(&["rmi", "localhost/busybox:latest"]);
    assert!(!out.status.success(), "a second rmi fails");
}

#[test]
fn container_gc_keeps_the_newest_dead_instance() {
    require_root();
    let d = TestDaemon::start();
    d.write_manifest(
        "loop.yaml",
        &busybox_pod(
            "loop",
            "  restartPolicy: OnFailure\n",
            "",
            "echo run; exit 1",
        ),
    );
    let pod = d.wait_pod("loop", "3 restarts", 30, |p| {
        (container_status(p, "main")?["restartCount"].as_i64()? >= 3).then(|| p.clone())
    });
    let uid = pod["metadata"]["uid"].as_str().unwrap();
    let out = d.cli(&["gc"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let attempts = |dir: std::path::PathBuf| -> Vec<u32> {
        let mut v: Vec<u32> = std::fs::read_dir(dir)
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| {
                        e.file_name()
                            .to_str()?
                            .trim_end_matches(".log")
                            .parse()
                            .ok()
                    })
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    let kept = attempts(d.root.join(format!("pods/{uid}/containers/main")));
    let current = u32::try_from(
        container_status(&d.pod("loop").unwrap(), "main").unwrap()["restartCount"]
            .as_i64()
            .unwrap(),
    )
    .unwrap();
    // The current instance and at most one dead one before it (MaxPerPodContainer 1).
    assert!(kept.len() <= 3, "kept {kept:?}, current {current}");
    assert!(
        kept.contains(&(current.saturating_sub(1))) || kept.contains(&current),
        "{kept:?}"
    );
    assert!(
        !kept.contains(&0) || current <= 1,
        "the oldest dead instance was collected: {kept:?}"
    );
    let logs = attempts(
        d.logs
            .join(format!("default_{}_{uid}/main", d.full_name("loop"))),
    );
    assert!(
        !logs.contains(&0) || current <= 1,
        "its log went with it: {logs:?}"
    );
    std::thread::sleep(Duration::from_millis(10));
}
