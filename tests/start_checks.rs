//! Start-up checks that save a user an hour: a daemon that cannot work says why at once,
//! instead of failing every container later.

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// A network namespace made by `ip netns add`, deleted when dropped (also on failure).
struct NamedNetns(String);

impl NamedNetns {
    fn add() -> Self {
        let name = format!("podhost-it-cg{}", std::process::id());
        let out = Command::new("ip")
            .args(["netns", "add", &name])
            .output()
            .unwrap();
        assert!(out.status.success(), "ip netns add {name}: {out:?}");
        NamedNetns(name)
    }
}

impl Drop for NamedNetns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// `ip netns exec` mounts a fresh sysfs over /sys, so /sys/fs/cgroup is an empty
/// directory of it: the daemon must refuse to start, and say so, before it writes
/// anything.
#[test]
fn a_daemon_under_ip_netns_exec_refuses_to_start_and_says_why() {
    assert!(require_root());
    let dir = tempfile::tempdir().unwrap();
    let manifests = dir.path().join("manifests");
    std::fs::create_dir(&manifests).unwrap();
    let root = dir.path().join("root");
    let netns = NamedNetns::add();
    let mut child = Command::new("ip")
        .args([
            "netns",
            "exec",
            &netns.0,
            BIN,
            "daemon",
            "--pod-manifest-path",
        ])
        .arg(&manifests)
        .arg("--root-dir")
        .arg(&root)
        .arg("--log-dir")
        .arg(dir.path().join("logs"))
        .arg("--socket")
        .arg(dir.path().join("podhost.sock"))
        .args(["--node-name", "cgroup-check"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > until {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "the daemon kept running without cgroups: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("no cgroup hierarchy is mounted at /sys/fs/cgroup"),
        "{stderr}"
    );
    assert!(stderr.contains("ip netns exec"), "{stderr}");
    assert!(!root.exists(), "nothing is written before the check");
}
