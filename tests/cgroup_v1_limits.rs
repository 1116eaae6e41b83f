//! Limits on a cgroup v1 / hybrid host (this machine and CI are such hosts): each
//! container's memory, CPU and pids limits are applied through the v1 hierarchies, an
//! OOM kill is reported as OOMKilled with its victim named, and what v1 cannot give is
//! said (node event at start, a Warning event on the pod).
//!
//! These tests are about v1: on a pure cgroup v2 host they fail, loudly, saying so
//! (v2 enforcement is covered by the VM suite's checks).

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::PathBuf;
use std::time::Duration;

use common::*;
use serde_json::Value;

/// Fails unless /sys/fs/cgroup is a v1 / hybrid layout (a tmpfs of v1 hierarchies).
fn require_v1_host() {
    let st = nix::sys::statfs::statfs("/sys/fs/cgroup").unwrap();
    assert_ne!(
        st.filesystem_type(),
        nix::sys::statfs::CGROUP2_SUPER_MAGIC,
        "THIS TEST CHECKS cgroup v1 ENFORCEMENT, but /sys/fs/cgroup is a pure cgroup v2 \
         hierarchy here: run it on a v1/hybrid host (the VM suite covers v2)"
    );
    for ctrl in ["memory", "cpu", "pids"] {
        assert!(
            PathBuf::from("/sys/fs/cgroup")
                .join(ctrl)
                .join("cgroup.procs")
                .exists(),
            "cgroup v1 host without the {ctrl} hierarchy at /sys/fs/cgroup/{ctrl}"
        );
    }
    eprintln!("cgroup v1/hybrid host detected: testing v1 enforcement");
}

/// The container's cgroup directory in the v1 hierarchy `controller`.
fn v1_dir(d: &TestDaemon, controller: &str, qos_dir: &str, uid: &str) -> PathBuf {
    PathBuf::from("/sys/fs/cgroup")
        .join(controller)
        .join(format!(
            "{}/kubepods{qos_dir}/pod{uid}/main",
            d.cgroup_root.trim_start_matches('/')
        ))
}

fn read(dir: &std::path::Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.join(file).display()))
        .trim()
        .to_string()
}

fn uid(pod: &Value) -> String {
    pod["metadata"]["uid"].as_str().unwrap().to_string()
}

fn running(d: &TestDaemon, name: &str) -> Value {
    d.wait_pod(name, "Running", 30, |p| {
        (container_status(p, "main")?["state"]["running"].is_object()).then(|| p.clone())
    })
}

#[test]
fn the_node_says_at_start_that_v1_enforces_container_limits_only() {
    require_root();
    require_v1_host();
    let d = TestDaemon::start();
    let event = wait_until(Duration::from_secs(10), "the node's v1 event", || {
        d.node_events()
            .into_iter()
            .find(|e| e["reason"] == "CgroupV1LimitsOnly")
    })
    .expect("a CgroupV1LimitsOnly node event");
    assert_eq!(event["type"], "Warning", "{event}");
    let msg = event["message"].as_str().unwrap();
    assert!(
        msg.contains("limits are enforced") && msg.contains("NOT enforced"),
        "{msg}"
    );
    assert!(
        msg.contains("QoS") && msg.contains("memory.oom.group"),
        "{msg}"
    );
    assert!(
        !d.daemon_log().contains("degraded mode"),
        "no more degraded mode on a v1 host with its controllers"
    );
}

#[test]
fn a_container_over_its_memory_limit_is_oom_killed_and_the_victim_named() {
    require_root();
    require_v1_host();
    let d = TestDaemon::start();
    d.write_manifest(
        "hog.yaml",
        &busybox_pod(
            "hog",
            "  restartPolicy: OnFailure\n",
            "    resources:\n      limits: {memory: 32Mi}\n",
            // tail keeps the whole newline-free input: 200 MiB asked of a 32 MiB cgroup.
            "echo start; head -c 209715200 /dev/zero | tail",
        ),
    );
    let terminated = d.wait_pod("hog", "OOMKilled", 60, |p| {
        let cs = container_status(p, "main")?;
        ["state", "lastState"]
            .iter()
            .map(|s| cs[*s]["terminated"].clone())
            .find(|t| t["reason"] == "OOMKilled")
    });
    assert_eq!(terminated["exitCode"], 137, "{terminated}");
    let msg = terminated["message"].as_str().unwrap();
    assert!(
        msg.starts_with("OOMKilled: tail (pid ") && msg.contains("at memory limit 32Mi"),
        "the victim and the limit are named: {msg}"
    );
    let events = d.pod_events("hog");
    let oom = events
        .iter()
        .find(|e| e["reason"] == "OOMKilled")
        .unwrap_or_else(|| panic!("no OOMKilled event: {events:?}"));
    assert!(
        oom["message"].as_str().unwrap().contains("tail (pid "),
        "{oom}"
    );
    let v1 = events
        .iter()
        .find(|e| e["reason"] == "CgroupV1NotEnforced")
        .unwrap_or_else(|| panic!("no CgroupV1NotEnforced event: {events:?}"));
    assert_eq!(v1["type"], "Warning");
    assert!(
        v1["message"].as_str().unwrap().contains("memory.oom.group"),
        "{v1}"
    );
}

#[test]
fn a_guaranteed_container_gets_its_memory_and_cpu_limits_and_is_throttled() {
    require_root();
    require_v1_host();
    let d = TestDaemon::start();
    d.write_manifest(
        "burn.yaml",
        &busybox_pod(
            "burn",
            "",
            "    resources:\n      limits: {cpu: 100m, memory: 64Mi}\n",
            "while :; do :; done",
        ),
    );
    let pod = running(&d, "burn");
    assert_eq!(pod["status"]["qosClass"], "Guaranteed");
    let uid = uid(&pod);
    let cpu = v1_dir(&d, "cpu", "", &uid);
    assert_eq!(read(&cpu, "cpu.cfs_quota_us"), "10000");
    assert_eq!(read(&cpu, "cpu.cfs_period_us"), "100000");
    assert_eq!(read(&cpu, "cpu.shares"), "102");
    let memory = v1_dir(&d, "memory", "", &uid);
    assert_eq!(
        read(&memory, "memory.limit_in_bytes"),
        (64u64 << 20).to_string()
    );
    if memory.join("memory.memsw.limit_in_bytes").exists() {
        // Swap accounting on: memory+swap = the limit, so it never swaps past it.
        assert_eq!(
            read(&memory, "memory.memsw.limit_in_bytes"),
            (64u64 << 20).to_string()
        );
    }
    let throttled = wait_until(Duration::from_secs(20), "CFS throttling", || {
        let stat = read(&cpu, "cpu.stat");
        let n: u64 = stat
            .lines()
            .find_map(|l| l.strip_prefix("nr_throttled "))
            .unwrap()
            .parse()
            .unwrap();
        (n > 0).then_some(n)
    });
    assert!(
        throttled.is_some(),
        "the busy loop was never throttled at 100m"
    );
}

#[test]
fn the_pod_pids_limit_stops_a_fork_bomb() {
    require_root();
    require_v1_host();
    let d = TestDaemon::start_with(&["--pod-pids-limit=32"]);
    d.write_manifest(
        "bomb.yaml",
        &busybox_pod(
            "bomb",
            "",
            "",
            // The subshell forks until the kernel refuses; the container goes on.
            "(for i in $(seq 200); do sleep 300 & echo spawned $i; done); echo bomb-over; sleep 300",
        ),
    );
    let pod = running(&d, "bomb");
    let uid = uid(&pod);
    let logs = wait_until(Duration::from_secs(30), "the bomb's end", || {
        let l = d.logs_of("bomb", "main");
        l.contains("bomb-over").then_some(l)
    })
    .expect("the fork loop ended");
    assert!(
        logs.contains("can't fork"),
        "the kernel refused a fork: {logs}"
    );
    let spawned = logs
        .lines()
        .filter_map(|l| l.trim().strip_prefix("spawned "))
        .filter_map(|n| n.trim().parse::<u32>().ok())
        .max()
        .unwrap_or(0);
    assert!(
        (1..32).contains(&spawned),
        "at most 32 processes in the container, {spawned} sleeps spawned"
    );
    let pids = v1_dir(&d, "pids", "/besteffort", &uid);
    assert_eq!(read(&pids, "pids.max"), "32");
    let current: u32 = read(&pids, "pids.current").parse().unwrap();
    assert!(current <= 32, "pids.current {current}");
}
