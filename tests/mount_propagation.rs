//! `mountPropagation` of hostPath volumes, as the kubelet defines it: None (rprivate)
//! sees no host mount made later, HostToContainer (rslave) sees them, Bidirectional
//! (rshared, privileged containers only) also shows the container's mounts on the host.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;

fn mount(args: &[&str]) {
    let out = Command::new("mount").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "mount {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Unmounts what the test mounted, even when it fails.
struct Cleanup(Vec<String>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for p in self.0.iter().rev() {
            let _ = Command::new("umount").args(["-R", "-l", p]).status();
        }
    }
}

fn is_mount_point(p: &Path) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let p = p.display().to_string();
    info.lines()
        .any(|l| l.split(' ').nth(4) == Some(p.as_str()))
}

#[test]
fn none_host_to_container_and_bidirectional() {
    require_root();
    let d = TestDaemon::start();
    let shared = d.dir.path().join("shared");
    let both = d.dir.path().join("both");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::create_dir_all(&both).unwrap();
    let cleanup = Cleanup(vec![
        shared.display().to_string(),
        both.display().to_string(),
    ]);
    for dir in [&shared, &both] {
        let dir = dir.to_str().unwrap();
        mount(&["--bind", dir, dir]);
        mount(&["--make-rshared", dir]);
    }
    let host_path = |name: &str, p: &Path| {
        format!(
            "  - name: {name}\n    hostPath: {{path: {}, type: Directory}}\n",
            p.display()
        )
    };
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: prop\nspec:\n  terminationGracePeriodSeconds: 2\n  volumes:\n{}{}  containers:\n  - name: main\n    image: localhost/busybox:latest\n    imagePullPolicy: Never\n    command: [sh, -c, 'exec sleep 1003']\n    securityContext: {{privileged: true}}\n    volumeMounts:\n    - {{name: shared, mountPath: /none}}\n    - {{name: shared, mountPath: /h2c, mountPropagation: HostToContainer}}\n    - {{name: both, mountPath: /bi, mountPropagation: Bidirectional}}\n",
        host_path("shared", &shared),
        host_path("both", &both),
    );
    d.write_manifest("prop.yaml", &manifest);
    d.wait_pod("prop", "running", 30, |p| {
        container_status(p, "main")?["state"]["running"]
            .is_object()
            .then_some(())
    });
    let pod = d.full_name("prop");
    let sh = |cmd: &str| {
        let out = d.cli(&["exec", &pod, "--", "sh", "-c", cmd]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    // A mount the host makes later, under the volume.
    let sub = shared.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    mount(&[
        "-t",
        "tmpfs",
        "-o",
        "size=1m",
        "late",
        sub.to_str().unwrap(),
    ]);
    std::fs::write(sub.join("mark"), "from-host").unwrap();
    let seen = wait_until(Duration::from_secs(5), "host mount in /h2c", || {
        (sh("cat /h2c/sub/mark 2>/dev/null") == "from-host").then_some(())
    });
    assert!(
        seen.is_some(),
        "HostToContainer does not see the host's later mount"
    );
    assert_eq!(
        sh("cat /none/sub/mark 2>/dev/null"),
        "",
        "None sees the host's later mount"
    );
    // A mount the container makes, under the Bidirectional volume.
    sh(
        "mkdir -p /bi/inner && mount -t tmpfs -o size=1m inner /bi/inner && echo from-pod > /bi/inner/mark",
    );
    let inner = both.join("inner");
    let back = wait_until(
        Duration::from_secs(5),
        "container mount on the host",
        || (std::fs::read_to_string(inner.join("mark")).ok()?.trim() == "from-pod").then_some(()),
    );
    assert!(
        back.is_some(),
        "Bidirectional: the container's mount is not on the host"
    );
    assert!(is_mount_point(&inner));
    d.remove_manifest("prop.yaml");
    d.wait_gone("prop", 30);
    drop(cleanup);
}
