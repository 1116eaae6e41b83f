//! Container GC on fake attempt dirs, logs and real mounts.

use std::collections::HashSet;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use chrono::{DateTime, Utc};
use nix::mount::{MsFlags, mount};
use podhost::disk::Layout;
use podhost::gc::{
    ContainerGcPolicy, DeadContainer, collect, plan, remove, remove_orphans_older_than, scan,
};
use serde_json::json;

use super::is_root;

fn t(secs: i64) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp(1_700_000_000 + secs, 0).unwrap()
}

/// Writes an attempt dir (with `exit.json` if `finished` is given) and its log.
fn attempt(
    layout: &Layout,
    ns_pod: Option<(&str, &str)>,
    uid: &str,
    name: &str,
    n: u32,
    finished: Option<i64>,
) {
    let dir = layout.attempt_dir(uid, name, n);
    fs::create_dir_all(dir.join("upper")).unwrap();
    fs::write(dir.join("config.json"), b"{}").unwrap();
    fs::write(
        dir.join("started.json"),
        serde_json::to_vec(&json!({"shim_pid": 999_999_999, "init_pid": 999_999_998,
            "started_at": t(0)}))
        .unwrap(),
    )
    .unwrap();
    if let Some(f) = finished {
        let exit = json!({"exit_code": 1, "signal": null, "started_at": t(0), "finished_at": t(f)});
        fs::write(dir.join("exit.json"), serde_json::to_vec(&exit).unwrap()).unwrap();
    }
    if let Some((ns, pod)) = ns_pod {
        let log = layout.container_log(ns, pod, uid, name, n);
        fs::create_dir_all(log.parent().unwrap()).unwrap();
        fs::write(&log, b"2024-01-01T00:00:00Z stdout F hi\n").unwrap();
    }
}

fn status(layout: &Layout, uid: &str, ns: &str, pod: &str) {
    let rec =
        json!({"pod": {"metadata": {"name": pod, "namespace": ns, "uid": uid}}, "events": []});
    fs::create_dir_all(layout.pod_dir(uid)).unwrap();
    fs::write(
        layout.pod_dir(uid).join("status.json"),
        serde_json::to_vec(&rec).unwrap(),
    )
    .unwrap();
}

/// A process standing in for the live shim of attempt dir `bundle` (its cmdline
/// names the attempt's shim-config.json, as a real shim's does), recorded in
/// started.json; killed on drop.
struct FakeShim(std::process::Child);

impl FakeShim {
    fn start(bundle: &Path) -> FakeShim {
        // `; exit` keeps sh from exec'ing sleep in place (dash does that for a lone
        // last command), which would drop the config path from the cmdline.
        let child = Command::new("sh")
            .arg("-c")
            .arg("sleep 30; exit 0")
            .arg(bundle.join("shim-config.json"))
            .spawn()
            .unwrap();
        fs::write(
            bundle.join("started.json"),
            serde_json::to_vec(&json!({"shim_pid": child.id(), "init_pid": 1, "started_at": t(0)}))
                .unwrap(),
        )
        .unwrap();
        // spawn() returns once the child's exec has swapped its memory, a moment
        // before the kernel fills in its argv: until then /proc/PID/cmdline reads
        // empty.
        let cmdline = format!("/proc/{}/cmdline", child.id());
        for _ in 0..500 {
            if fs::read(&cmdline).is_ok_and(|c| !c.is_empty()) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        FakeShim(child)
    }
}

impl Drop for FakeShim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn key(d: &DeadContainer) -> String {
    format!("{}/{}/{}", d.pod_uid, d.container, d.attempt)
}

#[test]
fn scan_finds_dead_attempts_with_their_logs() {
    let tmp = tempfile::tempdir().unwrap();
    let layout = Layout::new(tmp.path().join("root"), tmp.path().join("logs"));
    status(&layout, "u1", "default", "web-node");
    for n in 0..3 {
        attempt(
            &layout,
            Some(("default", "web-node")),
            "u1",
            "app",
            n,
            Some(10 * n as i64),
        );
    }
    // Running: no exit record.
    attempt(&layout, Some(("default", "web-node")), "u1", "app", 3, None);
    // No status.json: the log dir is found by its UID.
    attempt(
        &layout,
        Some(("kube-system", "dns-node")),
        "u2",
        "dns",
        0,
        Some(5),
    );
    // A shim still cleaning up (its cmdline names the attempt's shim-config.json).
    attempt(&layout, None, "u3", "c", 0, Some(5));
    let shim = FakeShim::start(&layout.attempt_dir("u3", "c", 0));
    let mut dead = scan(&layout);
    drop(shim);
    dead.sort_by_key(key);
    assert_eq!(
        dead.iter().map(key).collect::<Vec<_>>(),
        ["u1/app/0", "u1/app/1", "u1/app/2", "u2/dns/0"]
    );
    assert_eq!(dead[1].finished_at, t(10));
    assert_eq!(
        dead[1].log_file,
        layout.container_log("default", "web-node", "u1", "app", 1)
    );
    assert_eq!(
        dead[3].log_file,
        layout.container_log("kube-system", "dns-node", "u2", "dns", 0)
    );
    assert!(
        dead.iter()
            .all(|d| d.log_file.exists() && d.attempt_dir.is_dir())
    );
}

#[test]
fn collect_removes_old_attempts_and_their_logs_keeps_current_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let layout = Layout::new(tmp.path().join("root"), tmp.path().join("logs"));
    status(&layout, "live", "default", "web-node");
    for n in 0..4 {
        attempt(
            &layout,
            Some(("default", "web-node")),
            "live",
            "app",
            n,
            Some(10 * n as i64),
        );
    }
    attempt(
        &layout,
        Some(("default", "web-node")),
        "live",
        "app",
        4,
        None,
    );
    attempt(
        &layout,
        Some(("default", "web-node")),
        "live",
        "side",
        0,
        Some(1),
    );
    status(&layout, "gone", "default", "old-node");
    attempt(
        &layout,
        Some(("default", "old-node")),
        "gone",
        "app",
        0,
        Some(1),
    );
    attempt(
        &layout,
        Some(("default", "old-node")),
        "gone",
        "app",
        1,
        Some(2),
    );
    let live = HashSet::from(["live".to_string()]);
    let planned = plan(&scan(&layout), &live, &ContainerGcPolicy::default(), t(100));
    assert_eq!(
        planned.iter().map(key).collect::<Vec<_>>(),
        [
            "live/app/0",
            "gone/app/0",
            "gone/app/1",
            "live/app/1",
            "live/app/2"
        ]
    );
    let report = collect(&layout, &live, &ContainerGcPolicy::default(), t(100));
    assert_eq!(report.removed.len(), 5);
    assert_eq!(report.failed, 0);
    let left: Vec<u32> = podhost::disk::attempts(&layout.container_dir("live", "app"));
    assert_eq!(left, [3, 4]);
    assert!(layout.attempt_dir("live", "side", 0).is_dir());
    for n in 0..3 {
        assert!(
            !layout
                .container_log("default", "web-node", "live", "app", n)
                .exists()
        );
    }
    assert!(
        layout
            .container_log("default", "web-node", "live", "app", 3)
            .exists()
    );
    // The gone pod's dirs were modified just now: kept for the grace period…
    assert!(report.orphans.pod_dirs.is_empty());
    assert!(layout.pod_dir("gone").exists());
    // …and removed after it.
    let orphans = remove_orphans_older_than(&layout, &live, Duration::ZERO);
    assert_eq!(orphans.pod_dirs, ["gone"]);
    assert_eq!(
        orphans.log_dirs,
        [layout.pod_log_dir("default", "old-node", "gone")]
    );
    assert!(!layout.pod_dir("gone").exists());
    assert!(layout.pod_dir("live").exists());
    assert!(layout.pod_log_dir("default", "web-node", "live").exists());
    // No trash left anywhere.
    let trash = walk_names(tmp.path())
        .into_iter()
        .filter(|n| n.starts_with(".gc-"))
        .count();
    assert_eq!(trash, 0);
}

fn walk_names(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            out.push(e.file_name().to_string_lossy().into_owned());
            if e.file_type().unwrap().is_dir() {
                out.extend(walk_names(&e.path()));
            }
        }
    }
    out
}

#[test]
fn remove_unmounts_a_mounted_rootfs_and_orphans_with_ns_mounts() {
    require_root!();
    let tmp = tempfile::tempdir().unwrap();
    let layout = Layout::new(tmp.path().join("root"), tmp.path().join("logs"));
    attempt(&layout, Some(("default", "p-node")), "u", "app", 0, Some(1));
    attempt(&layout, Some(("default", "p-node")), "u", "app", 1, Some(2));
    let rootfs = layout.attempt_dir("u", "app", 0).join("rootfs");
    fs::create_dir_all(&rootfs).unwrap();
    mount(
        Some("tmpfs"),
        &rootfs,
        Some("tmpfs"),
        MsFlags::empty(),
        Some("size=1m"),
    )
    .unwrap();
    fs::write(rootfs.join("inside"), b"x").unwrap();
    let dead = scan(&layout);
    let d0 = dead.iter().find(|d| d.attempt == 0).unwrap();
    remove(d0).unwrap();
    assert!(!layout.attempt_dir("u", "app", 0).exists());
    assert!(
        !fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .contains(rootfs.to_str().unwrap())
    );
    assert!(!d0.log_file.exists());
    remove(d0).unwrap();

    // The pod's namespace handle: a bind mount of an nsfs file.
    let ns = layout.pod_ns_dir("u");
    fs::create_dir_all(&ns).unwrap();
    fs::write(ns.join("net"), b"").unwrap();
    mount(
        Some("/proc/self/ns/net"),
        &ns.join("net"),
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .unwrap();
    let report = remove_orphans_older_than(&layout, &HashSet::new(), Duration::ZERO);
    assert_eq!(report.pod_dirs, ["u"]);
    assert!(!layout.pod_dir("u").exists());
    assert!(!layout.pod_log_dir("default", "p-node", "u").exists());
}

#[test]
fn stale_libcontainer_states_are_removed_live_ones_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let layout = Layout::new(tmp.path().join("root"), tmp.path().join("logs"));
    let state = |id: &str, bundle: &Path| {
        let dir = layout.libcontainer_root().join(id);
        fs::create_dir_all(&dir).unwrap();
        fs::write(
            dir.join("state.json"),
            serde_json::to_vec(&json!({"id": id, "status": "stopped", "bundle": bundle})).unwrap(),
        )
        .unwrap();
    };
    // The attempt dir was collected already.
    state("gone", &tmp.path().join("root/pods/u0/containers/c/0"));
    // Exited, and its shim died before deleting the state (SIGKILL).
    attempt(&layout, None, "u1", "c", 0, Some(5));
    state("exited", &layout.attempt_dir("u1", "c", 0));
    // Running: no exit record.
    attempt(&layout, None, "u2", "c", 0, None);
    state("running", &layout.attempt_dir("u2", "c", 0));
    // Exited, its shim still cleaning up.
    attempt(&layout, None, "u3", "c", 0, Some(5));
    let bundle = layout.attempt_dir("u3", "c", 0);
    let shim = FakeShim::start(&bundle);
    state("cleaning", &bundle);
    // Being created: no state.json yet.
    fs::create_dir_all(layout.libcontainer_root().join("creating")).unwrap();

    let mut removed = podhost::gc::remove_stale_states(&layout);
    drop(shim);
    removed.sort();
    assert_eq!(removed, ["exited", "gone"]);
    let mut left: Vec<String> = fs::read_dir(layout.libcontainer_root())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["cleaning", "creating", "running"]);
}

#[test]
fn a_shared_log_dir_loses_only_the_orphaned_log_dirs_this_podhost_marked() {
    let tmp = tempfile::tempdir().unwrap();
    let logs = tmp.path().join("logs");
    let ours = Layout::new(tmp.path().join("root"), &logs);
    let other = Layout::new(tmp.path().join("other-root"), &logs);
    fs::create_dir_all(&ours.root_dir).unwrap();
    fs::create_dir_all(&other.root_dir).unwrap();
    let write_log = |dir: &Path| {
        fs::create_dir_all(dir.join("c")).unwrap();
        fs::write(dir.join("c/0.log"), b"2024-01-01T00:00:00Z stdout F hi\n").unwrap();
    };
    // A kubelet's pod (never marked), another podhost's and ours, all of pods gone.
    let kubelet = logs.join("kube-system_etcd-node_0b3c7a1e-1111-2222-3333-444455556666");
    write_log(&kubelet);
    let claim = |layout: &podhost::disk::Layout, pod: &str, uid: &str| {
        let mut pending = podhost::disk::PendingDurability::default();
        podhost::runtime::log_owner::claim_pod_log_dir(layout, "default", pod, uid, &mut pending)
            .unwrap();
        pending.complete().unwrap();
    };
    claim(&other, "theirs", "u-theirs");
    write_log(&other.pod_log_dir("default", "theirs", "u-theirs"));
    claim(&ours, "mine", "u-mine");
    write_log(&ours.pod_log_dir("default", "mine", "u-mine"));

    let report = remove_orphans_older_than(&ours, &HashSet::new(), Duration::ZERO);
    assert_eq!(
        report.log_dirs,
        [ours.pod_log_dir("default", "mine", "u-mine")]
    );
    assert!(!ours.pod_log_dir("default", "mine", "u-mine").exists());
    assert!(
        kubelet.join("c/0.log").exists(),
        "the kubelet's logs are kept"
    );
    assert!(
        other
            .pod_log_dir("default", "theirs", "u-theirs")
            .join("c/0.log")
            .exists(),
        "another podhost's logs are kept"
    );
    // The other podhost's own GC takes its dir, and still not the kubelet's.
    let theirs = remove_orphans_older_than(&other, &HashSet::new(), Duration::ZERO);
    assert_eq!(
        theirs.log_dirs,
        [other.pod_log_dir("default", "theirs", "u-theirs")]
    );
    assert!(kubelet.exists());
}
