//! `kill -9` of the daemon: containers keep running, status is recovered, an exit that
//! happened while the daemon was down is reported with its real code and time, and no
//! container is started twice.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::*;

#[test]
fn daemon_kill9_and_restart_keeps_and_recovers_containers() {
    require_root();
    let mut d = TestDaemon::start();
    let marker = format!("keepalive-{}", d.node);
    d.write_manifest(
        "long.yaml",
        &busybox_pod(
            "long",
            "  terminationGracePeriodSeconds: 2\n",
            "",
            &format!("exec sleep 1000 # {marker}"),
        ),
    );
    d.write_manifest(
        "short.yaml",
        &busybox_pod("short", "  restartPolicy: Never\n", "", "sleep 2; exit 4"),
    );
    let long = d.wait_pod("long", "long Running", 20, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    d.wait_pod("short", "short Running", 20, |p| {
        (phase(p) == "Running").then_some(())
    });
    let long_started =
        container_status(&long, "main").unwrap()["state"]["running"]["startedAt"].clone();
    // Running is shown once the container's `sh` runs; its `exec sleep` follows, later on
    // a loaded machine.
    let before = wait_until(Duration::from_secs(10), "long's sleep", || {
        let pids: Vec<i32> = TestDaemon::pids_with("sleep 1000")
            .into_iter()
            .filter(|p| is_in_test(*p, &marker))
            .collect();
        (!pids.is_empty()).then_some(pids)
    })
    .unwrap_or_default();

    d.kill9();
    // While the daemon is down, `short` exits by itself.
    std::thread::sleep(Duration::from_secs(3));
    let restarted_at = chrono::Utc::now();
    d.spawn_daemon();

    let short = d.wait_pod("short", "short Failed", 20, |p| {
        (phase(p) == "Failed").then(|| p.clone())
    });
    let t = &container_status(&short, "main").unwrap()["state"]["terminated"];
    assert_eq!(t["exitCode"], 4, "the real exit code: {t}");
    assert!(
        ts(&t["finishedAt"]) < restarted_at,
        "the real exit time, before the restart: {t}"
    );

    let long = d.pod("long").unwrap();
    let cs = container_status(&long, "main").unwrap();
    assert_eq!(
        cs["state"]["running"]["startedAt"], long_started,
        "same container"
    );
    assert_eq!(cs["restartCount"], 0);
    std::thread::sleep(Duration::from_secs(1));
    let after: Vec<i32> = TestDaemon::pids_with("sleep 1000")
        .into_iter()
        .filter(|p| is_in_test(*p, &marker))
        .collect();
    assert_eq!(before.len(), 1, "{before:?}");
    assert_eq!(after, before, "same PID, no duplicate container");
    // The recovered container is still controlled: removal stops it.
    d.remove_manifest("long.yaml");
    d.wait_gone("long", 40);
    assert!(
        TestDaemon::pids_with("sleep 1000")
            .into_iter()
            .all(|p| !is_in_test(p, &marker))
    );
}

/// Whether `pid` is this test's container: `exec sleep` replaced the shell, so the marker
/// is looked up in the OCI config of the bundle named by the parent shim's command line.
fn is_in_test(pid: i32, marker: &str) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let ppid: i32 = stat
        .rsplit(')')
        .next()
        .and_then(|s| s.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let cmd = std::fs::read(format!("/proc/{ppid}/cmdline")).unwrap_or_default();
    let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
    let Some(cfg) = cmd
        .split_whitespace()
        .find(|a| a.ends_with("shim-config.json"))
    else {
        return false;
    };
    let bundle = std::path::Path::new(cfg).parent().unwrap();
    std::fs::read_to_string(bundle.join("config.json"))
        .map(|c| c.contains(marker))
        .unwrap_or(false)
}

/// The container's processes by a marker in their bundle's config (see `is_in_test`),
/// and also those no longer under a shim: any `sleep 1000` whose environment names the
/// marker.
fn container_pids(marker: &str) -> Vec<i32> {
    TestDaemon::pids_with("sleep 1000")
        .into_iter()
        .filter(|p| {
            let env = std::fs::read(format!("/proc/{p}/environ")).unwrap_or_default();
            env.split(|b| *b == 0)
                .any(|kv| kv == format!("MARK={marker}").as_bytes())
        })
        .collect()
}

/// A pod whose container sleeps, marked in its environment so that its processes are
/// found even after their shim is gone.
fn marked_sleeper(name: &str, marker: &str) -> String {
    busybox_pod(
        name,
        "  terminationGracePeriodSeconds: 2\n",
        &format!("    env:\n    - name: MARK\n      value: {marker}\n"),
        "exec sleep 1000",
    )
}

fn started_record(d: &TestDaemon, pod_uid: &str, attempt: u32) -> serde_json::Value {
    let path = d
        .root
        .join("pods")
        .join(pod_uid)
        .join("containers/main")
        .join(attempt.to_string())
        .join("started.json");
    serde_json::from_str(&std::fs::read_to_string(&path).expect("started.json")).unwrap()
}

fn kill9(pid: i32) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill -9");
}

/// Waits until the container was restarted after a lost attempt, and checks the lost
/// attempt is reported as the kubelet reports a container it lost.
fn expect_lost_then_restarted(d: &TestDaemon, name: &str) -> serde_json::Value {
    let pod = d.wait_pod(name, "restarted after the lost container", 40, |p| {
        let cs = container_status(p, "main")?;
        (cs["restartCount"] == 1 && cs["state"]["running"].is_object()).then(|| p.clone())
    });
    let last = &container_status(&pod, "main").unwrap()["lastState"]["terminated"];
    assert_eq!(last["reason"], "ContainerStatusUnknown", "{last}");
    assert_eq!(last["exitCode"], 137, "{last}");
    assert!(
        last["message"]
            .as_str()
            .unwrap_or_default()
            .contains("shim"),
        "{last}"
    );
    pod
}

/// Runs pod "s" (a sleeper whose command line carries `marker`) and returns its first
/// attempt's start record and the container's pids, seen from the host.
fn run_marked_sleeper(d: &TestDaemon, marker: &str) -> (serde_json::Value, Vec<i32>) {
    d.write_manifest("s.yaml", &marked_sleeper("s", marker));
    let pod = d.wait_pod("s", "s Running", 20, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
    let first = started_record(d, &uid, 0);
    // Running is shown once the container's `sh` runs; its `exec sleep` follows, later on
    // a loaded machine.
    let before = wait_until(Duration::from_secs(10), "the marked sleeper", || {
        let pids = container_pids(marker);
        (!pids.is_empty()).then_some(pids)
    })
    .unwrap_or_default();
    assert_eq!(before.len(), 1, "{before:?}");
    (first, before)
}

#[test]
fn shim_kill9_with_daemon_alive_kills_container_and_restarts_it() {
    assert!(nix::unistd::geteuid().is_root(), "this test needs root");
    let d = TestDaemon::start();
    let marker = format!("shimkill-{}", d.node);
    let (first, before) = run_marked_sleeper(&d, &marker);

    kill9(i32::try_from(first["shim_pid"].as_i64().unwrap()).unwrap());
    expect_lost_then_restarted(&d, "s");
    let after = container_pids(&marker);
    assert_eq!(after.len(), 1, "one container, the new one: {after:?}");
    assert_ne!(after, before, "the orphaned container was killed");
    assert!(
        !d.mounts().iter().any(|m| m.contains("/containers/main/0/")),
        "the lost attempt's rootfs is unmounted: {:?}",
        d.mounts()
    );
    d.remove_manifest("s.yaml");
    d.wait_gone("s", 40);
    assert!(container_pids(&marker).is_empty());
}

#[test]
fn shim_kill9_while_daemon_down_is_reaped_by_the_next_daemon() {
    assert!(nix::unistd::geteuid().is_root(), "this test needs root");
    let mut d = TestDaemon::start();
    let marker = format!("shimdown-{}", d.node);
    let (first, before) = run_marked_sleeper(&d, &marker);

    d.kill9();
    kill9(i32::try_from(first["shim_pid"].as_i64().unwrap()).unwrap());
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        container_pids(&marker),
        before,
        "without shim and daemon the container still runs (what the next daemon must stop)"
    );
    d.spawn_daemon();
    expect_lost_then_restarted(&d, "s");
    let after = container_pids(&marker);
    assert_eq!(after.len(), 1, "{after:?}");
    assert!(!after.contains(&before[0]), "the orphan was killed");
    d.remove_manifest("s.yaml");
    d.wait_gone("s", 40);
    assert!(container_pids(&marker).is_empty());
}

/// Where in its start a caught shim must be.
#[derive(Clone, Copy, PartialEq)]
enum Window {
    /// Anywhere between its pid record and `started.json`.
    Starting,
    /// Past the daemon's config-durable byte as well: such a shim goes on to start its
    /// container whatever becomes of the daemon. Before that byte a shim whose daemon
    /// died gives up (its config may not survive a power loss) and the next daemon
    /// uses the attempt's number again with a new shim.
    PastDurableConfig,
}

/// Whether the shim `pid` has read the daemon's byte: it then puts /dev/null on its
/// stdin, the daemon's pipe before.
fn read_durable_byte(pid: i32) -> bool {
    std::fs::read_link(format!("/proc/{pid}/fd/0")).is_ok_and(|p| p == Path::new("/dev/null"))
}

/// Stops (SIGSTOP) the first shim of this test's root that has not written
/// `started.json` yet and is in `window`. Returns its pid and bundle, or None if every
/// start was too quick to catch.
fn catch_starting_shim(
    d: &TestDaemon,
    timeout: Duration,
    window: Window,
) -> Option<(i32, std::path::PathBuf)> {
    let needle = d.root.display().to_string();
    let until = std::time::Instant::now() + timeout;
    while std::time::Instant::now() < until {
        for pid in TestDaemon::pids_with(&needle) {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            let Some(cfg) = cmd
                .split_whitespace()
                .find(|a| a.ends_with("shim-config.json"))
                .filter(|_| cmd.contains(" shim "))
            else {
                continue;
            };
            // libcontainer's children carry the shim's command line until the
            // container's exec: only the shim itself (its parent is not one) is wanted.
            let parent =
                std::fs::read(format!("/proc/{}/cmdline", parent_pid(pid))).unwrap_or_default();
            if String::from_utf8_lossy(&parent).contains(cfg) {
                continue;
            }
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGSTOP,
            );
            let bundle = std::path::Path::new(cfg).parent().unwrap().to_path_buf();
            // Caught too late (started) or too early (not yet settled: a shim that did
            // not record its pid is treated as never started, and killed; or not yet
            // in the window asked for).
            if bundle.join("started.json").exists()
                || !bundle.join("shim.pid").exists()
                || (window == Window::PastDurableConfig && !read_durable_byte(pid))
            {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGCONT,
                );
                continue;
            }
            return Some((pid, bundle));
        }
    }
    None
}

/// Starts pods until one shim is caught before its `started.json` (each try is a new
/// pod; the ones not caught just run).
fn start_and_catch(
    d: &TestDaemon,
    marker: &str,
    window: Window,
) -> (String, i32, std::path::PathBuf) {
    for i in 0..20 {
        let name = format!("w{i}");
        d.write_manifest(
            &format!("{name}.yaml"),
            &marked_sleeper(&name, &format!("{marker}-{name}")),
        );
        if let Some((pid, bundle)) = catch_starting_shim(d, Duration::from_secs(15), window) {
            return (name, pid, bundle);
        }
    }
    panic!("no shim start was slow enough to be caught before started.json in 20 tries");
}

#[test]
fn daemon_killed_before_the_start_record_does_not_start_the_container_twice() {
    assert!(nix::unistd::geteuid().is_root(), "this test needs root");
    let mut d = TestDaemon::start();
    let marker = format!("window-{}", d.node);
    let (name, shim, bundle) = start_and_catch(&d, &marker, Window::PastDurableConfig);
    d.kill9();
    d.spawn_daemon();
    // The new daemon sees a live shim without a start record; it must wait for it.
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        !bundle.parent().unwrap().join("1").exists(),
        "no second attempt while the first shim is starting"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(shim),
        nix::sys::signal::Signal::SIGCONT,
    )
    .unwrap();
    let pod = d.wait_pod(&name, "Running", 30, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    let cs = container_status(&pod, "main").unwrap();
    assert_eq!(cs["restartCount"], 0, "{cs}");
    let started: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(bundle.join("started.json")).unwrap())
            .unwrap();
    assert_eq!(
        started["shim_pid"], shim,
        "the caught shim's container was adopted"
    );
    std::thread::sleep(Duration::from_secs(1));
    let mine = container_pids(&format!("{marker}-{name}"));
    assert_eq!(
        mine,
        vec![i32::try_from(started["init_pid"].as_i64().unwrap()).unwrap()]
    );
}

#[test]
fn shim_killed_while_creating_with_daemon_down_is_started_once() {
    assert!(nix::unistd::geteuid().is_root(), "this test needs root");
    let mut d = TestDaemon::start();
    let marker = format!("creating-{}", d.node);
    let (name, shim, bundle) = start_and_catch(&d, &marker, Window::Starting);
    d.kill9();
    kill9(shim);
    std::thread::sleep(Duration::from_millis(300));
    d.spawn_daemon();
    let pod = d.wait_pod(&name, "Running", 30, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    let cs = container_status(&pod, "main").unwrap();
    // Either the shim died before libcontainer started the program (the attempt is
    // done again under the same number) or after (a lost container, restarted).
    let restarts = cs["restartCount"].as_i64().unwrap();
    assert!(restarts <= 1, "{cs}");
    if restarts == 1 {
        assert_eq!(
            cs["lastState"]["terminated"]["reason"], "ContainerStatusUnknown",
            "{cs}"
        );
    }
    let _ = bundle;
    std::thread::sleep(Duration::from_secs(1));
    let running = container_pids(&format!("{marker}-{name}"));
    assert_eq!(running.len(), 1, "one container of {name}: {running:?}");
    assert!(
        TestDaemon::pids_with(&d.root.display().to_string())
            .iter()
            .all(|p| *p != shim),
        "the killed shim is gone"
    );
}

#[test]
fn image_id_and_last_state_survive_a_daemon_restart() {
    assert!(nix::unistd::geteuid().is_root(), "this test needs root");
    let mut d = TestDaemon::start();
    d.write_manifest(
        "c.yaml",
        &busybox_pod("c", "", "", "echo run; sleep 1; exit 3"),
    );
    let before = d.wait_pod("c", "restarted once", 30, |p| {
        let cs = container_status(p, "main")?;
        (cs["restartCount"].as_i64()? >= 1 && cs["lastState"]["terminated"].is_object())
            .then(|| cs.clone())
    });
    let image_id = before["imageID"].as_str().unwrap().to_string();
    assert!(image_id.starts_with("sha256:"), "{before}");
    d.kill9();
    d.spawn_daemon();
    // Until the new daemon has adopted the pod, its status is the one the killed daemon
    // last persisted (batched: it may predate the restart the test saw).
    let cs = d.wait_pod("c", "adopted with its restart", 20, |p| {
        let cs = container_status(p, "main")?;
        (cs["restartCount"].as_i64()? >= 1).then(|| cs.clone())
    });
    assert_eq!(cs["imageID"], image_id.as_str(), "{cs}");
    let last = &cs["lastState"]["terminated"];
    assert_eq!(last["exitCode"], 3, "{cs}");
    assert_eq!(last["reason"], "Error", "{cs}");
    assert!(cs["restartCount"].as_i64().unwrap() >= 1, "{cs}");
}

/// Pid namespaces of the live processes whose MARK starts with `prefix`.
fn live_instances(prefix: &str) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = e.file_name().to_string_lossy().to_string();
        if pid.parse::<i32>().is_err() {
            continue;
        }
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let marked = env
            .split(|b| *b == 0)
            .any(|kv| kv.starts_with(format!("MARK={prefix}").as_bytes()));
        if let (true, Ok(ns)) = (marked, std::fs::read_link(format!("/proc/{pid}/ns/pid"))) {
            out.insert(ns.display().to_string());
        }
    }
    out
}

/// Found by the torture test: v2 of a pod waits for v1 to terminate; v2 removed while
/// waiting made v3 start at once, beside the still-terminating v1.
#[test]
fn a_version_removed_while_waiting_still_holds_back_its_successor() {
    assert!(nix::unistd::geteuid().is_root(), "this test needs root");
    let d = TestDaemon::start();
    let marker = format!("chain-{}", d.node);
    let version = |v: u32| {
        busybox_pod(
            "p",
            "  terminationGracePeriodSeconds: 5\n",
            &format!(
                "    env:\n    - name: MARK\n      value: {marker}-v{v}\n    lifecycle:\n      preStop:\n        exec:\n          command: [\"sh\", \"-c\", \"sleep 3\"]\n"
            ),
            &format!("exec sleep 1000 # v{v}"),
        )
    };
    d.write_manifest("p.yaml", &version(1));
    d.wait_pod("p", "v1 Running", 20, |p| {
        (phase(p) == "Running").then_some(())
    });
    d.write_manifest("p.yaml", &version(2));
    // v1 is in its preStop hook now; v2 waits for it. Replace v2 by v3.
    std::thread::sleep(Duration::from_millis(1500));
    d.write_manifest("p.yaml", &version(3));
    let until = std::time::Instant::now() + Duration::from_secs(12);
    let mut most = 0;
    while std::time::Instant::now() < until {
        most = most.max(live_instances(&marker).len());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(most, 1, "two versions of the pod ran at once");
    assert!(
        TestDaemon::pids_with("sleep 1000 # v3").len() == 1
            || !live_instances(&format!("{marker}-v3")).is_empty(),
        "v3 runs in the end"
    );
}

fn parent_pid(pid: i32) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit(')')
        .next()
        .and_then(|s| s.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// The shim is the small `podhost-shim` binary, and once its container runs it is the
/// smaller `podhost-monitor` (same pid, still the container's parent); podhost-shim's
/// `shim-cleanup` still deletes libcontainer's state and the rootfs mount after the exit.
#[test]
fn the_running_shim_is_the_small_monitor_and_cleans_up_after_the_exit() {
    assert!(nix::unistd::geteuid().is_root(), "this test needs root");
    let d = TestDaemon::start();
    let marker = format!("monitor-{}", d.node);
    let (first, before) = run_marked_sleeper(&d, &marker);
    let shim = i32::try_from(first["shim_pid"].as_i64().unwrap()).unwrap();
    // The monitor takes over once the container has run past the shim's short grace
    // for containers that are over at once (10 ms).
    let exe_name = || {
        std::fs::read_link(format!("/proc/{shim}/exe"))
            .ok()
            .and_then(|e| e.file_name().map(|n| n.to_string_lossy().into_owned()))
    };
    let became_monitor = wait_until(Duration::from_secs(10), "the monitor runs", || {
        (exe_name().as_deref() == Some("podhost-monitor")).then_some(())
    });
    assert!(
        became_monitor.is_some(),
        "the running shim is podhost-monitor: {:?}",
        exe_name()
    );
    let argv = std::fs::read(format!("/proc/{shim}/cmdline")).unwrap();
    let argv: Vec<&[u8]> = argv.split(|b| *b == 0).collect();
    assert_eq!(argv[1], b"shim", "{argv:?}");
    assert!(
        argv[2].ends_with(b"/containers/main/0/shim-config.json"),
        "{argv:?}"
    );
    // The shim that created the container (and whose binary runs the clean-up) was
    // the small podhost-shim, not podhost: the monitor's state names it.
    let state: serde_json::Value = serde_json::from_slice(argv[3]).unwrap();
    let cleanup_exe = std::path::Path::new(state["podhost_exe"].as_str().unwrap());
    assert_eq!(
        cleanup_exe.file_name().and_then(|n| n.to_str()),
        Some("podhost-shim"),
        "{state}"
    );
    assert_eq!(
        parent_pid(before[0]),
        shim,
        "the monitor is the container's parent"
    );
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(std::str::from_utf8(argv[2]).unwrap()).unwrap())
            .unwrap();
    let state_dir = std::path::Path::new(config["libcontainer_root"].as_str().unwrap())
        .join(config["container_id"].as_str().unwrap());
    assert!(state_dir.exists(), "{state_dir:?}");
    d.remove_manifest("s.yaml");
    d.wait_gone("s", 40);
    assert!(container_pids(&marker).is_empty());
    // The cleanup runs after the exit is reported: give it a moment.
    assert!(
        wait_until(
            Duration::from_secs(10),
            "libcontainer state deleted",
            || { (!state_dir.exists()).then_some(()) }
        )
        .is_some(),
        "libcontainer's state was not deleted: {state_dir:?}"
    );
    assert!(
        !d.mounts().iter().any(|m| m.contains("/containers/main/0/")),
        "the rootfs is unmounted: {:?}",
        d.mounts()
    );
}
