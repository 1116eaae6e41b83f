//! A manifest becomes a running pod; logs, exec, status; removal cleans up everything.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;

#[test]
fn pod_runs_logs_exec_and_is_removed_cleanly() {
    require_root();
    let d = TestDaemon::start();
    let written = Instant::now();
    d.write_manifest(
        "web.yaml",
        &busybox_pod(
            "web",
            "  terminationGracePeriodSeconds: 5\n",
            "    env:\n    - name: GREETING\n      value: hello\n    - name: FULL\n      value: $(GREETING)-world\n",
            "trap 'echo got-term; exit 0' TERM; echo start $FULL host=$(hostname) pid=$$$$; echo to-stderr >&2; while true; do sleep 0.2; done",
        ),
    );
    let pod = d.wait_pod("web", "pod Running", 60, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    eprintln!("manifest written → Running: {:?}", written.elapsed());
    let full = d.full_name("web");
    assert_eq!(pod["metadata"]["namespace"], "default");
    assert_eq!(pod["spec"]["nodeName"], d.node.as_str());
    assert_eq!(
        pod["metadata"]["annotations"]["kubernetes.io/config.source"],
        "file"
    );
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
    assert_eq!(
        pod["metadata"]["annotations"]["kubernetes.io/config.hash"],
        uid.as_str()
    );
    let cs = container_status(&pod, "main").unwrap();
    assert_eq!(cs["ready"], true);
    assert_eq!(cs["restartCount"], 0);
    assert!(cs["state"]["running"]["startedAt"].is_string());

    // CRI log file at the kubelet's path, in the kubelet's format.
    let log = d.logs.join(format!("default_{full}_{uid}/main/0.log"));
    wait_until(Duration::from_secs(30), "log lines", || {
        (log_lines(&log).len() >= 2).then_some(())
    })
    .expect("log lines");
    let raw = std::fs::read_to_string(&log).unwrap();
    for line in raw.lines() {
        let parts: Vec<&str> = line.splitn(4, ' ').collect();
        assert_eq!(parts.len(), 4, "line {line:?}");
        assert!(
            parts[0].ends_with('Z') && parts[0].len() == 30,
            "RFC3339Nano timestamp: {line:?}"
        );
        assert!(parts[1] == "stdout" || parts[1] == "stderr");
        assert!(parts[2] == "F" || parts[2] == "P");
    }
    assert!(
        raw.contains(&format!("stdout F start hello-world host={full} pid=1")),
        "{raw}"
    );
    assert!(raw.contains("stderr F to-stderr"), "{raw}");

    // podhost logs
    let out = d.cli(&["logs", &full]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with(&format!("start hello-world host={full}")),
        "{text}"
    );

    // podhost exec: same namespaces as the container, exit code passed through.
    let out = d.cli(&[
        "exec",
        &full,
        "--",
        "sh",
        "-c",
        "echo exec-ok $(hostname) $(cat /proc/1/cmdline | head -c 2); exit 7",
    ]);
    assert_eq!(
        out.status.code(),
        Some(7),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("exec-ok {full} sh")
    );

    // get pods table and describe
    let out = d.cli(&["get", "pods"]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.starts_with("NAME"), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.starts_with(&full) && l.contains("1/1") && l.contains("Running")),
        "{table}"
    );
    let out = d.cli(&["describe", "pod", &full]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Started container main"), "{text}");

    // The container's cgroups sit under the daemon's cgroup root in every hierarchy.
    let started: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            d.root
                .join(format!("pods/{uid}/containers/main/0/started.json")),
        )
        .unwrap(),
    )
    .unwrap();
    let init_pid = started["init_pid"].as_i64().unwrap();
    let cgroups = std::fs::read_to_string(format!("/proc/{init_pid}/cgroup")).unwrap();
    let expected = format!("{}/kubepods/besteffort/pod{uid}/main", d.cgroup_root);
    // Hybrid hosts: the memory controller's (v1) line; pure cgroup v2: the one "0::" line.
    let memory_line = cgroups
        .lines()
        .find(|l| l.contains(":memory:"))
        .or_else(|| cgroups.lines().find(|l| l.starts_with("0::")))
        .unwrap_or("");
    assert!(memory_line.ends_with(&expected), "{cgroups}");
    let pod_cgroup_dirs = || -> Vec<std::path::PathBuf> {
        cgroup_hierarchies()
            .into_iter()
            .map(|h| {
                h.join(format!(
                    "{}/kubepods/besteffort/pod{uid}",
                    d.cgroup_root.trim_start_matches('/')
                ))
            })
            .filter(|p| p.exists())
            .collect()
    };
    assert!(!pod_cgroup_dirs().is_empty());

    // -o json is kubectl's v1 List of Pods; -o yaml the same in YAML.
    let out = d.cli(&["get", "pods", "-A", "-o", "json"]);
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (list["apiVersion"].as_str(), list["kind"].as_str()),
        (Some("v1"), Some("List"))
    );
    assert_eq!(list["items"][0]["kind"], "Pod");
    let out = d.cli(&["get", "pods", "-o", "yaml"]);
    let yaml: serde_json::Value = serde_yaml_ng::from_slice(&out.stdout).unwrap();
    assert_eq!(yaml, list, "yaml and json show the same list");

    // Removal: graceful stop (the trap runs), then nothing is left behind.
    let shim_pids = TestDaemon::pids_with(&format!("{}/pods/{uid}", d.root.display()));
    assert_eq!(shim_pids.len(), 1, "one shim per container: {shim_pids:?}");
    d.remove_manifest("web.yaml");
    // Not a timed assertion (a slow VM would fail it): the trap's last line below shows
    // that SIGTERM, not the SIGKILL after the grace period, ended the container.
    let took = d.wait_gone("web", 60);
    eprintln!("manifest removed → pod gone: {took:?}");
    let lines = log_lines(&log);
    assert_eq!(lines.last().map(|l| l.2.as_str()), Some("got-term"));
    wait_until(Duration::from_secs(30), "shim gone", || {
        TestDaemon::pids_with(&format!("{}/pods/{uid}", d.root.display()))
            .is_empty()
            .then_some(())
    })
    .expect("shim exited");
    assert!(d.mounts().is_empty(), "mounts left: {:?}", d.mounts());
    let pod_dir = d.root.join("pods").join(&uid);
    assert!(
        !pod_dir.exists(),
        "pod dir removed: {:?}",
        std::process::Command::new("find")
            .arg(&pod_dir)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    );
    wait_until(Duration::from_secs(30), "pod cgroups removed", || {
        pod_cgroup_dirs().is_empty().then_some(())
    })
    .unwrap_or_else(|| panic!("pod cgroups left: {:?}", pod_cgroup_dirs()));
}

#[test]
fn logs_follow_streams_until_the_container_exits() {
    require_root();
    let d = TestDaemon::start();
    d.write_manifest(
        "follow.yaml",
        &busybox_pod(
            "follow",
            "  restartPolicy: Never\n",
            "",
            "for i in 1 2 3 4 5; do echo line $i; sleep 0.4; done",
        ),
    );
    d.wait_pod("follow", "Running", 60, |p| {
        (phase(p) == "Running").then_some(())
    });
    let started = Instant::now();
    let out = d.cli(&["logs", "-f", &d.full_name("follow")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "line 1\nline 2\nline 3\nline 4\nline 5\n"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(800),
        "it followed, not read once"
    );
    let out = d.cli(&[
        "logs",
        "--tail",
        "2",
        "--timestamps",
        &d.full_name("follow"),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[1].ends_with("Z line 5"), "{text}");
}

#[test]
fn unknown_pod_and_container_errors_are_clear() {
    require_root();
    let d = TestDaemon::start();
    let out = d.cli(&["logs", "nosuchpod"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("pod \"nosuchpod\" not found"), "{err}");
    d.write_manifest("one.yaml", &busybox_pod("one", "", "", "sleep 100"));
    d.wait_pod("one", "Running", 60, |p| {
        (phase(p) == "Running").then_some(())
    });
    let out = d.cli(&["exec", &d.full_name("one"), "-c", "nope", "--", "true"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("container nope is not valid") && err.contains("main"),
        "{err}"
    );
    let out = d.cli(&["get", "services"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("podhost knows pods and events"));
}

#[test]
fn host_network_pod_sees_host_interfaces() {
    require_root();
    // Compared with the test's own network below.
    let d = TestDaemon::start_on_machine_network(&[]);
    d.write_manifest(
        "hn.yaml",
        &busybox_pod(
            "hn",
            "  hostNetwork: true\n  restartPolicy: Never\n",
            "",
            "cat /proc/net/dev | wc -l; hostname",
        ),
    );
    let pod = d.wait_pod("hn", "pod Succeeded", 60, |p| {
        (phase(p) == "Succeeded").then(|| p.clone())
    });
    let full = d.full_name("hn");
    let out = d.cli(&["logs", &full]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut lines = text.lines();
    let host_ifaces = std::fs::read_to_string("/proc/net/dev")
        .unwrap()
        .lines()
        .count();
    assert_eq!(
        lines.next().unwrap().trim().parse::<usize>().unwrap(),
        host_ifaces,
        "host netns"
    );
    let host = nix::unistd::gethostname()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert_eq!(lines.next().unwrap(), host, "host UTS namespace");
    assert_eq!(
        container_status(&pod, "main").unwrap()["state"]["terminated"]["reason"],
        "Completed"
    );
}

#[test]
fn pod_network_is_private_with_loopback_up() {
    require_root();
    let d = TestDaemon::start();
    d.write_manifest(
        "net.yaml",
        &busybox_pod("net", "  restartPolicy: Never\n", "", "ip -o link show | cut -d: -f2 | tr -d ' ' | tr '\\n' ,; ping -c1 -W1 127.0.0.1 >/dev/null && echo ping-ok"),
    );
    // 120 s: in the VM guest (check 15-lifecycle) on a loaded host, one shim step took
    // 15 s and 60 s ran out.
    d.wait_pod("net", "pod Succeeded", 120, |p| {
        (phase(p) == "Succeeded").then_some(())
    });
    let out = d.cli(&["logs", &d.full_name("net")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("lo,"), "only loopback: {text}");
    assert!(text.contains("ping-ok"), "loopback is up: {text}");
}

/// A container that exited is released by its monitor at once, while its pod stays:
/// rootfs unmounted, its cgroup (every hierarchy) and libcontainer's state dir gone, and
/// a process it left in its cgroup killed (as runc's delete does).
#[test]
fn an_exited_container_is_released_while_its_pod_stays() {
    require_root();
    let d = TestDaemon::start();
    // The init exits at once and leaves a sleeper in its cgroup (shared pid namespace:
    // the sleeper is reparented to the pod's PID 1 and lives on).
    d.write_manifest(
        "done.yaml",
        &busybox_pod(
            "done",
            "  restartPolicy: Never\n  shareProcessNamespace: true\n",
            "",
            "sleep 3599 & exit 0",
        ),
    );
    let pod = d.wait_pod("done", "pod Succeeded", 60, |p| {
        (phase(p) == "Succeeded").then(|| p.clone())
    });
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
    let bundle = d.root.join("pods").join(&uid).join("containers/main/0");
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bundle.join("config.json")).unwrap()).unwrap();
    let rel = config["linux"]["cgroupsPath"]
        .as_str()
        .unwrap()
        .trim_start_matches('/')
        .to_string();
    let id = format!("{}-main-0", &uid[..12]);
    let state = d.root.join("run/libcontainer").join(&id);
    let rootfs = bundle.join("rootfs");
    let released = wait_until(Duration::from_secs(20), "container released", || {
        let cgroups: Vec<_> = cgroup_hierarchies()
            .into_iter()
            .map(|h| h.join(&rel))
            .filter(|p| p.exists())
            .collect();
        let mounted = d
            .mounts()
            .iter()
            .any(|m| m.ends_with("containers/main/0/rootfs"));
        (cgroups.is_empty() && !state.exists() && !mounted).then_some(())
    });
    assert!(
        released.is_some(),
        "cgroups {rel} in {:?}, state {} exists: {}, rootfs {} mounted: {:?}; daemon log:\n{}",
        cgroup_hierarchies(),
        state.display(),
        state.exists(),
        rootfs.display(),
        d.mounts(),
        d.daemon_log()
    );
    assert!(
        TestDaemon::pids_with("sleep 3599").is_empty(),
        "the sleeper left in the cgroup was killed"
    );
    assert!(d.pod("done").is_some(), "the pod itself stays");
    d.remove_manifest("done.yaml");
    d.wait_gone("done", 30);
}
