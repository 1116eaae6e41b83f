//! `hostUsers: false` through the daemon on this host's kernel: the pod's user
//! namespace maps container root to its own block of 65536 host IDs, the image's
//! files are root's inside, blocks do not overlap, are released with the pod and
//! reused, and survive a daemon kill -9. The same on the VM kernel:
//! tests/vm/checks/65-userns.sh.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use std::time::Duration;

const PROBE: &str = r#"echo "uidmap=$(cat /proc/self/uid_map | tr -s ' ' | sed 's/^ //')"
echo "gidmap=$(cat /proc/self/gid_map | tr -s ' ' | sed 's/^ //')"
echo "id=$(id -u):$(id -g)"
echo "binowner=$(stat -c %u:%g /bin/busybox)"
echo "rootowner=$(stat -c %u:%g /)"
if touch /probe 2>/dev/null && chown 1000:1000 /probe; then echo write=ok; else echo write=no; fi
echo "shmowner=$(stat -c %u:%g /dev/shm)"
echo "netdevs=$(ls /sys/class/net | tr '\n' ' ')"
echo done
exec sleep 1000"#;

fn logs_when_done(d: &TestDaemon, pod: &str) -> String {
    wait_until(Duration::from_secs(40), "the probe printed done", || {
        let l = d.logs_of(pod, "main");
        l.lines().any(|x| x == "done").then_some(l)
    })
    .unwrap_or_else(|| {
        panic!(
            "{pod} never printed done; logs:\n{}\nevents: {:?}\ndaemon log:\n{}",
            d.logs_of(pod, "main"),
            d.pod_events(pod),
            d.daemon_log()
        )
    })
}

/// The block base from a `0 BASE 65536` map line.
fn base_of(map: &str) -> u32 {
    let parts: Vec<&str> = map.split_whitespace().collect();
    assert_eq!(parts.len(), 3, "{map}");
    assert_eq!(parts[0], "0");
    assert_eq!(parts[2], "65536");
    parts[1].parse().unwrap()
}

/// Host uid and gid of the `sleep 1000` that runs in the user namespace mapped to `base`.
fn host_ids_of_sleep(base: u32) -> (u32, u32) {
    let pid = wait_until(Duration::from_secs(20), "the container's sleep", || {
        TestDaemon::pids_with("sleep 1000").into_iter().find(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/uid_map"))
                .map(|m| m.split_whitespace().nth(1) == Some(base.to_string().as_str()))
                .unwrap_or(false)
        })
    })
    .expect("a sleep in the pod's user namespace");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let id = |key: &str| -> u32 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    (id("Uid:"), id("Gid:"))
}

fn blocks_file(d: &TestDaemon) -> serde_json::Value {
    let bytes = std::fs::read(d.root.join("userns/blocks.json")).unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

#[test]
fn a_pod_without_host_users_runs_as_root_of_its_own_block() {
    assert!(require_root());
    // Two blocks only: a third pod waits until one is released.
    let mut d = TestDaemon::start_with(&["--userns-range", "1048576:131072"]);
    for name in ["ua", "ub"] {
        d.write_manifest(
            &format!("{name}.yaml"),
            &busybox_pod(name, "  hostUsers: false\n", "", PROBE),
        );
    }
    let a = logs_when_done(&d, "ua");
    let b = logs_when_done(&d, "ub");
    let (base_a, base_b) = (base_of(&field(&a, "uidmap")), base_of(&field(&b, "uidmap")));
    let mut bases = [base_a, base_b];
    bases.sort();
    assert_eq!(bases, [1048576, 1048576 + 65536], "two blocks, no overlap");
    for (logs, base) in [(&a, base_a), (&b, base_b)] {
        assert_eq!(field(logs, "gidmap"), format!("0 {base} 65536"));
        assert_eq!(field(logs, "id"), "0:0", "root inside");
        assert_eq!(
            field(logs, "binowner"),
            "0:0",
            "the image's files are root's inside"
        );
        assert_eq!(field(logs, "rootowner"), "0:0");
        assert_eq!(field(logs, "write"), "ok", "root inside owns its rootfs");
        assert_eq!(
            field(logs, "shmowner"),
            "0:0",
            "the pod's shm is its root's"
        );
        // sysfs mounts only for a net namespace the container's user namespace owns:
        // its own, with the pod network's eth0 beside loopback.
        assert_eq!(
            field(logs, "netdevs"),
            "eth0 lo",
            "its own net namespace's sysfs"
        );
    }
    // The host sees the container's root as the block's first ID.
    let (uid, gid) = host_ids_of_sleep(base_a);
    assert_eq!((uid, gid), (base_a, base_a));

    // `podhost exec` joins the pod's user namespace and gets the container's filter and
    // capabilities (CAP_SYS_ADMIN in the pod's namespace loads it, then goes).
    let out = d.cli(&[
        "exec",
        &d.full_name("ub"),
        "-c",
        "main",
        "--",
        "sh",
        "-c",
        "cat /proc/self/uid_map; id -u; grep -E '^(Seccomp|CapEff):' /proc/self/status; grep CapEff /proc/1/status",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(got[0], format!("0 {base_b} 65536"), "{got:?}");
    assert_eq!(got[1], "0", "{got:?}");
    assert_eq!(got[3], "Seccomp: 2", "{got:?}");
    assert_eq!(
        got[2], got[4],
        "the exec'd process's CapEff vs the container's: {got:?}"
    );

    // A third pod: the range is exhausted; it says so and waits.
    d.write_manifest(
        "uc.yaml",
        &busybox_pod("uc", "  hostUsers: false\n", "", PROBE),
    );
    wait_until(Duration::from_secs(20), "an exhaustion event", || {
        d.pod_events("uc")
            .iter()
            .any(|e| {
                e["reason"] == "FailedCreatePodSandBox"
                    && e["message"]
                        .as_str()
                        .unwrap_or("")
                        .contains("no free block")
            })
            .then_some(())
    })
    .unwrap_or_else(|| panic!("no exhaustion event: {:?}", d.pod_events("uc")));

    // The allocation survives a daemon kill -9: the pods keep their blocks.
    let before = blocks_file(&d);
    d.kill9();
    d.spawn_daemon();
    assert_eq!(blocks_file(&d)["pods"], before["pods"]);
    d.wait_pod("ua", "ua running again under the new daemon", 30, |p| {
        (phase(p) == "Running").then_some(())
    });
    assert_eq!(host_ids_of_sleep(base_a), (base_a, base_a));

    // Removing ua releases its block, which uc (still waiting) then gets.
    d.remove_manifest("ua.yaml");
    d.wait_gone("ua", 60);
    let c = logs_when_done(&d, "uc");
    assert_eq!(
        base_of(&field(&c, "uidmap")),
        base_a,
        "the released block is reused"
    );
    let pods = blocks_file(&d)["pods"].as_object().unwrap().clone();
    assert_eq!(pods.len(), 2, "{pods:?}");
    for name in ["ub", "uc"] {
        d.remove_manifest(&format!("{name}.yaml"));
    }
    for name in ["ub", "uc"] {
        d.wait_gone(name, 60);
    }
    assert_eq!(blocks_file(&d)["pods"], serde_json::json!({}));
}

/// The fallback where idmapped mounts are missing, on real files: a copy of a
/// snapshot with every owner shifted into the block (IDs the pod cannot see become
/// its nobody), modes with setuid bits, symlinks, hard links, overlay whiteouts and
/// opaque markers kept; made once and cached per block.
#[test]
fn the_chowned_copy_shifts_every_owner_into_the_block() {
    use podhost::runtime::userns::{IdMap, chown_copy};
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    assert!(require_root());
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("snapshots").join("sha256-abc");
    std::fs::create_dir_all(snap.join("bin")).unwrap();
    std::fs::create_dir_all(snap.join("opaque")).unwrap();
    std::fs::write(snap.join("bin/tool"), b"#!/bin/sh\n").unwrap();
    std::fs::set_permissions(
        snap.join("bin/tool"),
        std::fs::Permissions::from_mode(0o4755),
    )
    .unwrap();
    std::fs::write(snap.join("user-file"), b"u").unwrap();
    std::os::unix::fs::chown(snap.join("user-file"), Some(1000), Some(2000)).unwrap();
    std::fs::write(snap.join("high"), b"h").unwrap();
    std::os::unix::fs::chown(snap.join("high"), Some(100_000), Some(100_000)).unwrap();
    std::fs::hard_link(snap.join("user-file"), snap.join("link")).unwrap();
    std::os::unix::fs::symlink("bin/tool", snap.join("sym")).unwrap();
    nix::sys::stat::mknod(
        &snap.join("gone"),
        nix::sys::stat::SFlag::S_IFCHR,
        nix::sys::stat::Mode::empty(),
        0,
    )
    .unwrap();
    xattr::set(snap.join("opaque"), "trusted.overlay.opaque", b"y").unwrap();

    let map = IdMap { base: 196608 };
    let (copy, made) = chown_copy::ensure_copy(dir.path(), map, &snap).unwrap();
    assert!(made);
    assert_eq!(
        copy,
        dir.path().join("snapshots-idmapped/196608/sha256-abc")
    );
    let owner = |p: &str| {
        let m = std::fs::symlink_metadata(copy.join(p)).unwrap();
        (m.uid(), m.gid())
    };
    assert_eq!(owner(""), (196608, 196608));
    assert_eq!(owner("bin/tool"), (196608, 196608));
    assert_eq!(owner("user-file"), (197608, 198608));
    assert_eq!(owner("high"), (196608 + 65534, 196608 + 65534));
    assert_eq!(owner("sym"), (196608, 196608));
    let tool = std::fs::metadata(copy.join("bin/tool")).unwrap();
    assert_eq!(tool.mode() & 0o7777, 0o4755, "setuid kept after the chown");
    assert_eq!(
        std::fs::metadata(copy.join("link")).unwrap().ino(),
        std::fs::metadata(copy.join("user-file")).unwrap().ino(),
        "hard links stay links"
    );
    assert_eq!(
        std::fs::read_link(copy.join("sym")).unwrap(),
        std::path::Path::new("bin/tool")
    );
    let gone = std::fs::symlink_metadata(copy.join("gone")).unwrap();
    assert_eq!(
        (gone.mode() & libc::S_IFMT, gone.rdev()),
        (libc::S_IFCHR, 0)
    );
    assert_eq!(
        xattr::get(copy.join("opaque"), "trusted.overlay.opaque").unwrap(),
        Some(b"y".to_vec())
    );
    // Cached: the second container of the block reuses it.
    let (again, made) = chown_copy::ensure_copy(dir.path(), map, &snap).unwrap();
    assert_eq!((again, made), (copy.clone(), false));
    // Pruned when no pod holds the block any more.
    assert_eq!(
        chown_copy::prune(dir.path(), &[map], &dir.path().join("snapshots")),
        0
    );
    assert_eq!(
        chown_copy::prune(dir.path(), &[], &dir.path().join("snapshots")),
        1
    );
    assert!(!copy.exists());
}
