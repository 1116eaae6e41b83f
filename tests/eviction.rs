//! The eviction manager under REAL disk pressure: a daemon whose --root-dir is a 64 MiB
//! tmpfs of the test's own, `--eviction-hard=nodefs.available<30%` checked every second.
//! A pod that fills its writable layer is evicted with the kubelet's status, message,
//! condition and event; a critical pod that uses even more is passed over; a quiet pod
//! keeps running; the dead layer is reclaimed and DiskPressure goes away.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::PathBuf;

use common::*;
use serde_json::Value;

/// A tmpfs mounted by this test, unmounted when dropped (after the daemon, whose own
/// clean-up kills the pods first: declare it before the daemon).
struct SmallFs(PathBuf);

impl SmallFs {
    fn mount(at: &std::path::Path, size: &str) -> Self {
        std::fs::create_dir_all(at).unwrap();
        nix::mount::mount(
            Some("tmpfs"),
            at,
            Some("tmpfs"),
            nix::mount::MsFlags::empty(),
            Some(format!("size={size},mode=0755").as_str()),
        )
        .expect("mount a tmpfs for the daemon's root dir");
        SmallFs(at.to_path_buf())
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
    }
}

fn writer(name: &str, mib: u32, annotations: &str) -> String {
    let meta = if annotations.is_empty() {
        String::new()
    } else {
        format!("  annotations:\n{annotations}")
    };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n{meta}spec:\n  \
         terminationGracePeriodSeconds: 30\n  containers:\n  - name: main\n    \
         image: localhost/busybox:latest\n    imagePullPolicy: Never\n    \
         command: [\"sh\", \"-c\", \"dd if=/dev/zero of=/fill bs=1M count={mib} && echo written; exec sleep 1000\"]\n"
    )
}

/// The node's conditions from the daemon's API.
fn node_conditions(d: &TestDaemon) -> Value {
    podhost::api::client::Client::new(&d.socket)
        .get_json("/node/conditions")
        .unwrap()
}

fn condition(conditions: &Value, kind: &str) -> String {
    conditions
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == kind)
        .map(|c| c["status"].as_str().unwrap().to_string())
        .unwrap_or_default()
}

#[test]
fn disk_pressure_evicts_the_biggest_writer_but_not_a_critical_pod_nor_a_quiet_one() {
    require_root();
    let small;
    let mut d = TestDaemon::prepare_with(&[
        "--eviction-hard=nodefs.available<30%",
        "--eviction-monitoring-period=1",
        "--eviction-pressure-transition-period=2",
    ]);
    // Over the root dir prepare_with loaded the image into: the image is loaded again
    // through the daemon, onto the small filesystem.
    small = SmallFs::mount(&d.root, "64m");
    d.spawn_daemon();
    d.load(busybox_layout());
    let conditions = node_conditions(&d);
    assert_eq!(
        condition(&conditions, "DiskPressure"),
        "False",
        "{conditions}"
    );
    assert_eq!(condition(&conditions, "MemoryPressure"), "False");

    d.write_manifest(
        "quiet.yaml",
        &busybox_pod("quiet", "", "", "exec sleep 1000"),
    );
    d.write_manifest(
        "guarded.yaml",
        &writer("guarded", 28, "    podhost.io/critical: \"true\"\n"),
    );
    wait_until(std::time::Duration::from_secs(60), "guarded wrote", || {
        d.logs_of("guarded", "main")
            .contains("written")
            .then_some(())
    })
    .expect("the critical pod wrote its file");
    let conditions = node_conditions(&d);
    assert_eq!(
        condition(&conditions, "DiskPressure"),
        "False",
        "28 MiB of 64 leave more than 30%: {conditions}"
    );
    // The hog writes less than the critical pod: it is second in the ranking, and
    // evicted because the first is critical.
    d.write_manifest("hog.yaml", &writer("hog", 20, ""));
    let hog = d.wait_pod("hog", "evicted", 60, |p| {
        (p["status"]["reason"] == "Evicted").then(|| p.clone())
    });
    assert_eq!(phase(&hog), "Failed");
    let message = hog["status"]["message"].as_str().unwrap();
    assert!(
        message
            .starts_with("The node was low on resource: ephemeral-storage. Threshold quantity: "),
        "{message}"
    );
    assert!(
        message.contains(". Container main was using ")
            && message.ends_with(", request is 0, has larger consumption of ephemeral-storage. "),
        "{message}"
    );
    let disruption = hog["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "DisruptionTarget")
        .cloned()
        .unwrap_or_else(|| panic!("no DisruptionTarget: {hog}"));
    assert_eq!(disruption["status"], "True");
    assert_eq!(disruption["reason"], "TerminationByKubelet");
    assert!(
        d.pod_events("hog")
            .iter()
            .any(|e| e["reason"] == "Evicted" && e["message"] == message),
        "{:?}",
        d.pod_events("hog")
    );
    let node_events = d.node_events();
    assert!(
        node_events
            .iter()
            .any(|e| e["reason"] == "NodeHasDiskPressure"),
        "{node_events:?}"
    );
    assert!(
        d.daemon_log().contains("cannot evict a critical pod"),
        "{}",
        d.daemon_log()
    );

    // The hog's dead layer is reclaimed, pressure ends after the transition period, and
    // nothing else was evicted meanwhile.
    // The condition and its event are recorded one after the other: both are waited for.
    let ended = wait_until(
        std::time::Duration::from_secs(60),
        "DiskPressure False and its event",
        || {
            let c = node_conditions(&d);
            let event = d
                .node_events()
                .iter()
                .any(|e| e["reason"] == "NodeHasNoDiskPressure");
            (condition(&c, "DiskPressure") == "False" && event).then_some(())
        },
    );
    assert!(
        ended.is_some(),
        "DiskPressure did not end with a NodeHasNoDiskPressure event: {:?} {:?}",
        node_conditions(&d),
        d.node_events()
    );
    for name in ["quiet", "guarded"] {
        let p = d.pod(name).unwrap();
        assert_eq!(phase(&p), "Running", "{name}: {p}");
        assert_ne!(p["status"]["reason"], "Evicted", "{name}: {p}");
    }
    drop(d);
    drop(small);
}
