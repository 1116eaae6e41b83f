//! A power loss: every process is gone, every mount and cgroup with them, and the
//! boot-scoped records (written without fsync, see `disk::atomic`) may be empty. The next
//! daemon must bring the pod back as it does after a daemon and shim crash: the lost
//! attempt shown as the kubelet shows a lost container, a new one running, the pod's
//! generated files written again.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;

/// The files a power loss may leave empty: written with `disk::write_boot_scoped`.
const BOOT_SCOPED_ATTEMPT_FILES: [&str; 4] =
    ["config.json", "shim.pid", "started.json", "stop-signal"];
const BOOT_SCOPED_POD_FILES: [&str; 3] = ["etc-hosts", "resolv.conf", "hostname"];

/// Processes whose environment carries `MARK=<marker>`: the test's container, also
/// once its shim is gone.
fn marked_pids(marker: &str) -> Vec<i32> {
    let want = format!("MARK={marker}");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .unwrap_or_default()
                .split(|b| *b == 0)
                .any(|kv| kv == want.as_bytes())
        })
        .collect()
}

/// Waits for exactly `count` marked processes. "Running" is reported once the container's
/// start is signalled (as runc's `start` returns once the exec fifo is opened); its
/// process may still be on its way to execve, and `/proc/PID/environ` shows `MARK` only
/// after that execve.
fn wait_marked_pids(marker: &str, count: usize, what: &str) -> Vec<i32> {
    wait_until(Duration::from_secs(10), what, || {
        let pids = marked_pids(marker);
        (pids.len() == count).then_some(pids)
    })
    .unwrap_or_else(|| panic!("{what}: marked processes {:?}", marked_pids(marker)))
}

fn sigkill(pid: i32) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    );
}

fn wait_dead(pids: &[i32]) {
    let until = Instant::now() + Duration::from_secs(10);
    while pids
        .iter()
        .any(|p| Path::new(&format!("/proc/{p}")).exists())
    {
        assert!(Instant::now() < until, "processes {pids:?} did not die");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn truncate(path: &Path) {
    assert!(path.exists(), "{} was written", path.display());
    std::fs::write(path, b"").unwrap();
}

#[test]
fn empty_boot_scoped_records_after_a_power_loss_bring_the_pod_back() {
    require_root();
    let mut d = TestDaemon::start();
    let marker = format!("powerloss-{}", d.node);
    d.write_manifest(
        "s.yaml",
        &busybox_pod(
            "s",
            "  terminationGracePeriodSeconds: 2\n",
            &format!("    env:\n    - name: MARK\n      value: {marker}\n"),
            "exec sleep 1000",
        ),
    );
    let pod = d.wait_pod("s", "s Running", 30, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
    let pod_dir = d.root.join("pods").join(&uid);
    let attempt = pod_dir.join("containers/main/0");
    let started: serde_json::Value =
        serde_json::from_slice(&std::fs::read(attempt.join("started.json")).unwrap()).unwrap();
    let shim = i32::try_from(started["shim_pid"].as_i64().unwrap()).unwrap();

    let mut victims = wait_marked_pids(&marker, 1, "the container runs");
    // The power goes: the daemon, the shim and the container die at once, and nothing
    // of the kernel's state (mounts, cgroups) is there when the host comes back.
    d.kill9();
    victims.push(shim);
    victims.iter().copied().for_each(sigkill);
    wait_dead(&victims);
    for m in d.mounts().iter().rev() {
        nix::mount::umount2(m.as_str(), nix::mount::MntFlags::MNT_DETACH)
            .unwrap_or_else(|e| panic!("umount {m}: {e}"));
    }
    assert!(d.mounts().is_empty(), "{:?}", d.mounts());
    remove_cgroup_tree(&d.cgroup_root);
    // What was never fsynced is empty (ext4 can leave a renamed file so).
    for f in BOOT_SCOPED_ATTEMPT_FILES {
        truncate(&attempt.join(f));
    }
    for f in BOOT_SCOPED_POD_FILES {
        truncate(&pod_dir.join(f));
    }

    d.spawn_daemon();
    let pod = d.wait_pod("s", "s running again after the power loss", 40, |p| {
        let cs = container_status(p, "main")?;
        (cs["restartCount"] == 1 && cs["state"]["running"].is_object()).then(|| p.clone())
    });
    let last = &container_status(&pod, "main").unwrap()["lastState"]["terminated"];
    assert_eq!(last["reason"], "ContainerStatusUnknown", "{last}");
    assert_eq!(last["exitCode"], 137, "{last}");
    wait_marked_pids(&marker, 1, "one container runs again");
    for f in BOOT_SCOPED_POD_FILES {
        let content = std::fs::read_to_string(pod_dir.join(f)).unwrap();
        assert!(!content.trim().is_empty(), "{f} was written again");
    }
    let full = d.full_name("s");
    let hostname = d.cli(&["exec", &full, "--", "cat", "/etc/hostname"]);
    assert!(hostname.status.success(), "{hostname:?}");
    assert_eq!(String::from_utf8_lossy(&hostname.stdout).trim(), full);

    d.remove_manifest("s.yaml");
    d.wait_gone("s", 40);
    assert!(marked_pids(&marker).is_empty());
}
