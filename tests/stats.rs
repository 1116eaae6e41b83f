//! Statistics on a real daemon: a pod burning CPU, holding memory and writing files,
//! seen through `/stats/summary` (numbers plausible and consistent with its cgroup
//! files), `/metrics/cadvisor`, the pod's network counters growing with traffic, and
//! `podhost top pods|node`.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::PathBuf;
use std::time::Duration;

use common::*;
use serde_json::Value;

const MI: u64 = 1024 * 1024;

const POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: busy
spec:
  volumes:
  - name: scratch
    emptyDir: {}
  containers:
  - name: burn
    image: localhost/busybox:latest
    imagePullPolicy: Never
    command: [sh, -c, 'while :; do :; done']
  - name: hold
    image: localhost/busybox:latest
    imagePullPolicy: Never
    command: [sh, -c, 'x=$(yes | head -c 41943040); echo held; while :; do sleep 3600; done']
  - name: write
    image: localhost/busybox:latest
    imagePullPolicy: Never
    volumeMounts:
    - name: scratch
      mountPath: /scratch
    command: [sh, -c, 'dd if=/dev/zero of=/big bs=1M count=8 && dd if=/dev/zero of=/scratch/f bs=1M count=4 && sync && echo written; sleep 3600']
";

/// `GET path` through the CLI's socket (curl is not needed): the raw body.
fn get(d: &TestDaemon, path: &str) -> String {
    let client = podhost::api::client::Client::new(&d.socket);
    let answer = client.request("GET", path, None).expect(path);
    String::from_utf8(answer.body).unwrap()
}

fn summary(d: &TestDaemon) -> Value {
    serde_json::from_str(&get(d, "/stats/summary")).unwrap()
}

fn pod_of<'a>(s: &'a Value, name: &str) -> &'a Value {
    s["pods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["podRef"]["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in the summary: {s:#}"))
}

fn container_of<'a>(pod: &'a Value, name: &str) -> &'a Value {
    pod["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("container {name} not in {pod:#}"))
}

fn num(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn v2() -> bool {
    std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
}

/// A file of the container's cgroup (`controller` is the v1 hierarchy).
fn cgroup_file(d: &TestDaemon, uid: &str, container: &str, controller: &str, file: &str) -> String {
    let rel = format!(
        "{}/kubepods/besteffort/pod{uid}/{container}",
        d.cgroup_root.trim_start_matches('/')
    );
    let dir = if v2() {
        PathBuf::from("/sys/fs/cgroup").join(rel)
    } else {
        PathBuf::from("/sys/fs/cgroup").join(controller).join(rel)
    };
    std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn memory_usage_file(d: &TestDaemon, uid: &str, container: &str) -> u64 {
    let text = if v2() {
        cgroup_file(d, uid, container, "", "memory.current")
    } else {
        cgroup_file(d, uid, container, "memory", "memory.usage_in_bytes")
    };
    text.trim().parse().unwrap()
}

fn cpu_usage_file(d: &TestDaemon, uid: &str, container: &str) -> u64 {
    if v2() {
        let stat = cgroup_file(d, uid, container, "", "cpu.stat");
        let usec: u64 = stat
            .lines()
            .find_map(|l| l.strip_prefix("usage_usec "))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        usec * 1000
    } else {
        cgroup_file(d, uid, container, "cpuacct", "cpuacct.usage")
            .trim()
            .parse()
            .unwrap()
    }
}

/// A summary in which every container of `pod` has a CPU rate (two samples taken).
fn summary_with_rates(d: &TestDaemon, pod: &str) -> Value {
    wait_until(Duration::from_secs(30), "CPU rates", || {
        let s = summary(d);
        // A sample up to a second old may predate the pod: wait for one that has it.
        let found = s["pods"]
            .as_array()
            .and_then(|pods| pods.iter().find(|p| p["podRef"]["name"] == pod));
        let all = found.is_some_and(|p| {
            p["containers"].as_array().map(|c| c.len()) == Some(3)
                && p["containers"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|c| c["cpu"]["usageNanoCores"].is_u64())
        });
        if all {
            return Some(s);
        }
        // A sample is reused for a second; the next request must come after it.
        std::thread::sleep(Duration::from_millis(1100));
        None
    })
    .expect("every container of the pod gets a CPU rate")
}

#[test]
fn summary_metrics_and_top_show_a_busy_pod() {
    require_root();
    let d = TestDaemon::start();
    d.write_manifest("busy.yaml", POD);
    let name = d.full_name("busy");
    let pod = d.wait_pod("busy", "Running", 30, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
    wait_until(Duration::from_secs(30), "hold and write ready", || {
        (d.logs_of("busy", "hold").contains("held")
            && d.logs_of("busy", "write").contains("written"))
        .then_some(())
    })
    .expect("the hold and write containers got ready");

    let s = summary_with_rates(&d, &name);
    let node = &s["node"];
    assert_eq!(node["nodeName"], d.node.as_str());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let mem_total: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .unwrap()
        .trim()
        .trim_end_matches(" kB")
        .parse::<u64>()
        .unwrap()
        * 1024;
    assert_eq!(
        num(&node["memory"]["availableBytes"]) + num(&node["memory"]["workingSetBytes"]),
        mem_total,
        "memory.available = capacity - workingSet"
    );
    assert!(num(&node["cpu"]["usageCoreNanoSeconds"]) > 0);
    assert!(num(&node["cpu"]["usageNanoCores"]) > 0, "{node:#}");
    assert!(num(&node["fs"]["capacityBytes"]) >= num(&node["fs"]["usedBytes"]));
    assert!(num(&node["fs"]["inodes"]) > num(&node["fs"]["inodesFree"]));
    assert!(
        num(&node["runtime"]["imageFs"]["usedBytes"]) > 0,
        "busybox is loaded"
    );
    assert!(num(&node["rlimit"]["curproc"]) > 0);

    let p = pod_of(&s, &name);
    assert_eq!(p["podRef"]["uid"], uid.as_str());
    assert_eq!(p["podRef"]["namespace"], "default");

    // CPU: the burner uses a good part of a core; its counter is the cgroup's.
    let burn = container_of(p, "burn");
    let burn_cores = num(&burn["cpu"]["usageNanoCores"]);
    assert!(
        burn_cores > 50_000_000,
        "a busy loop uses more than 0.05 core: {burn:#}"
    );
    let reported = num(&burn["cpu"]["usageCoreNanoSeconds"]);
    let file_after = cpu_usage_file(&d, &uid, "burn");
    assert!(
        reported <= file_after,
        "the reported counter ({reported}) is one the cgroup had (now {file_after})"
    );
    assert!(
        num(&p["cpu"]["usageCoreNanoSeconds"]) >= reported,
        "pod ≥ its container"
    );

    // Memory: the holder keeps a 40 MiB string; the numbers are its cgroup's.
    let hold = container_of(p, "hold");
    let ws = num(&hold["memory"]["workingSetBytes"]);
    let usage = num(&hold["memory"]["usageBytes"]);
    assert!(ws >= 40 * MI, "working set {ws} ≥ 40 MiB");
    assert!(num(&hold["memory"]["rssBytes"]) >= 40 * MI);
    assert!(ws <= usage);
    let file_usage = memory_usage_file(&d, &uid, "hold");
    let diff = file_usage.abs_diff(usage);
    assert!(
        diff < 4 * MI,
        "usage {usage} vs the cgroup's {file_usage} (an idle sleeper's memory is stable)"
    );
    assert!(num(&p["memory"]["workingSetBytes"]) >= ws);

    // Files: 8 MiB into the container's rootfs, 4 MiB into the emptyDir.
    let write = container_of(p, "write");
    assert!(num(&write["rootfs"]["usedBytes"]) >= 8 * MI, "{write:#}");
    assert!(num(&write["rootfs"]["inodesUsed"]) >= 2);
    assert!(write["logs"]["usedBytes"].is_u64(), "{write:#}");
    let scratch = p["volume"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "scratch")
        .expect("the emptyDir's stats");
    assert!(num(&scratch["usedBytes"]) >= 4 * MI);
    assert!(num(&p["ephemeral-storage"]["usedBytes"]) >= 12 * MI);
    assert!(num(&p["process_stats"]["process_count"]) >= 3, "{p:#}");

    // PSI: there on cgroup v2, absent (not zero) on v1.
    for c in [burn, hold, write] {
        if v2() {
            assert!(c["cpu"]["psi"]["some"]["total"].is_u64(), "{c:#}");
            assert!(c["memory"]["psi"]["full"]["avg10"].is_f64(), "{c:#}");
            assert!(c["io"]["psi"].is_object(), "{c:#}");
        } else {
            assert!(c["cpu"].get("psi").is_none(), "{c:#}");
            assert!(c["memory"].get("psi").is_none(), "{c:#}");
            assert!(c.get("io").is_none(), "{c:#}");
        }
    }

    // Network: the pod's eth0 counts what it sends.
    let tx_before = num(&p["network"]["txBytes"]);
    assert_eq!(p["network"]["name"], "eth0", "{p:#}");
    let out = d.cli(&[
        "exec",
        &name,
        "-c",
        "hold",
        "--",
        "sh",
        "-c",
        "gw=$(ip route | awk '/default/ {print $3}'); ping -c 5 -s 1000 -W 1 \"$gw\" || true",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let grown = wait_until(Duration::from_secs(10), "tx bytes grow", || {
        std::thread::sleep(Duration::from_millis(1100));
        let s = summary(&d);
        let tx = num(&pod_of(&s, &name)["network"]["txBytes"]);
        (tx >= tx_before + 5 * 1000).then_some(tx)
    });
    assert!(grown.is_some(), "5 pings of 1000 bytes leave eth0");

    // cadvisor's text: names and labels.
    let text = get(&d, "/metrics/cadvisor");
    let line = text
        .lines()
        .find(|l| {
            l.starts_with("container_cpu_usage_seconds_total{container=\"burn\"")
                && l.contains(&format!("pod=\"{name}\""))
        })
        .unwrap_or_else(|| panic!("no cpu series of burn in:\n{text}"));
    assert!(line.contains("namespace=\"default\""), "{line}");
    assert!(
        line.contains("image=\"localhost/busybox:latest\""),
        "{line}"
    );
    assert!(text.contains("# TYPE container_memory_working_set_bytes gauge"));
    assert!(text.contains("container_network_transmit_bytes_total{container=\"\""));
    assert!(text.contains("container_fs_writes_bytes_total"));
    assert_eq!(
        text.contains("container_pressure_cpu_waiting_seconds_total"),
        v2()
    );

    // top: kubectl's columns, the pod, the node.
    let top = d.cli(&["top", "pods"]);
    let top_text = String::from_utf8_lossy(&top.stdout).into_owned();
    assert!(top.status.success(), "{:?}", top);
    let mut lines = top_text.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "CPU(cores)", "MEMORY(bytes)"]);
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(row[0], name);
    assert!(row[1].ends_with('m'), "{top_text}");
    let mib: u64 = row[2].trim_end_matches("Mi").parse().unwrap();
    assert!(mib >= 40, "{top_text}");

    let top = d.cli(&[
        "top",
        "pods",
        "--containers",
        "--sort-by",
        "memory",
        "--psi",
    ]);
    let top_text = String::from_utf8_lossy(&top.stdout).into_owned();
    assert!(top.status.success(), "{:?}", top);
    let first: Vec<&str> = top_text
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(first[1], "hold", "sorted by memory:\n{top_text}");
    assert_eq!(first.len(), 7, "{top_text}");
    assert_eq!(first[4] == "<none>", !v2(), "{top_text}");

    let top = d.cli(&["top", "node"]);
    let top_text = String::from_utf8_lossy(&top.stdout).into_owned();
    assert!(top.status.success(), "{:?}", top);
    let header: Vec<&str> = top_text
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)"]
    );
    assert!(top_text.lines().nth(1).unwrap().starts_with(&d.node));
}

#[test]
fn top_before_any_cpu_rate_says_metrics_not_available() {
    require_root();
    let d = TestDaemon::start();
    // The daemon's first sample has no pods; the pod's first sample gives no rate yet.
    d.write_manifest("idle.yaml", &busybox_pod("idle", "", "", "sleep 3600"));
    d.wait_pod("idle", "Running", 30, |p| {
        (phase(p) == "Running").then_some(())
    });
    // Wait past the reuse window so this request samples, and the pod is new to it.
    std::thread::sleep(Duration::from_millis(1100));
    let out = d.cli(&["top", "pods"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(stderr.contains("metrics not available yet"), "{stderr}");
    let out = d.cli(&["top", "pods", "--sort-by", "disk"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--sort-by must be cpu or memory"));
}
