//! Hostile containers against the root daemon's writes into their volumes: a container
//! running as root (the default) swaps entries of a volume it can write for symlinks to
//! a host directory, for the whole test, while the test drives the daemon through
//! content refreshes, restarts and pod edits. The host sentinel (modes, owners, contents
//! and entries of a directory the container cannot see) must come out unchanged, and the
//! daemon's memory bounded. Each test prints how many swaps its container raced.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::common_hostile;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use common_hostile::*;

/// The last `swaps=S refused=R` the attacker of `pod` printed.
fn raced(d: &TestDaemon, pod: &str) -> (u64, u64) {
    tally(&d.logs_of(pod, "attacker"))
}

fn attacker_running(d: &TestDaemon, pod: &str) {
    d.wait_pod(pod, "the attacker running", 60, |p| {
        (container_status(p, "attacker")?["state"]["running"].is_object()
            && d.logs_of(pod, "attacker").contains("ready"))
        .then_some(())
    });
}

/// Restarts the daemon (SIGKILL, as a crash or an upgrade would) and waits for its API.
fn restart(d: &mut TestDaemon) {
    d.kill9();
    d.spawn_daemon();
}

fn config_map(value: usize) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cfg}}\ndata:\n  k: \"{value}\"\n")
}

/// Writes a config file whole (temp + rename), as a config tool would.
fn put(dir: &Path, name: &str, text: &str) {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

/// A daemon whose `--config-dir` holds the ConfigMap `cfg`, with the swapper loaded.
fn daemon_with_config_map() -> (TestDaemon, PathBuf) {
    let mut d = TestDaemon::prepare_with(&[]);
    let config = d.dir.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    put(&config, "cfg.yaml", &config_map(0));
    d.extra_args.push("--config-dir".into());
    d.extra_args.push(config.display().to_string());
    d.spawn_daemon();
    load_swapper(&d);
    (d, config)
}

#[test]
fn content_volume_payload_swaps_never_reach_the_host() {
    assert!(require_root());
    let sentinel = Sentinel::new();
    let (mut d, config) = daemon_with_config_map();
    let pod = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: payload}}\nspec:\n  securityContext: {{fsGroup: 4321}}\n  volumes:\n  - name: cfg\n    configMap: {{name: cfg}}\n  containers:\n  - name: attacker\n    image: {IMAGE}\n    imagePullPolicy: Never\n    command: [swapper, payload, /cfg, {host}]\n    volumeMounts:\n    - {{name: cfg, mountPath: /cfg, readOnly: false}}\n",
        host = sentinel.host_dir()
    );
    d.write_manifest("payload.yaml", &pod);
    attacker_running(&d, "payload");
    // Refreshes: every edit of the ConfigMap makes the daemon write a new payload.
    let start = Instant::now();
    let mut edits = 0;
    while start.elapsed() < Duration::from_secs(40) {
        edits += 1;
        put(&config, "cfg.yaml", &config_map(edits));
        std::thread::sleep(Duration::from_millis(100));
        if edits % 150 == 0 {
            restart(&mut d);
        }
    }
    let (swaps, refused) = raced(&d, "payload");
    println!(
        "content volume: {edits} ConfigMap edits, 2 daemon restarts; the container raced {swaps} swaps ({refused} refused by the kernel)"
    );
    sentinel.assert_unchanged(&d);
    let peak = peak_rss_kib(d.daemon_pid().unwrap());
    assert!(peak < MAX_DAEMON_PEAK_RSS_KIB, "daemon peak RSS {peak} KiB");
}

#[test]
fn empty_dir_swaps_during_restarts_never_reach_the_host() {
    assert!(require_root());
    let sentinel = Sentinel::new();
    let mut d = TestDaemon::start();
    load_swapper(&d);
    let pod = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: tree}}\nspec:\n  securityContext: {{fsGroup: 4321}}\n  volumes:\n  - name: data\n    emptyDir: {{}}\n  containers:\n  - name: attacker\n    image: {IMAGE}\n    imagePullPolicy: Never\n    command: [swapper, tree, /data, {host}, '3000']\n    volumeMounts:\n    - {{name: data, mountPath: /data}}\n",
        host = sentinel.host_dir()
    );
    d.write_manifest("tree.yaml", &pod);
    attacker_running(&d, "tree");
    let restarts = 12;
    for _ in 0..restarts {
        restart(&mut d);
        // Let the restarted daemon adopt the pod (and do whatever it does to its volumes).
        d.wait_pod("tree", "the pod adopted and Running", 60, |p| {
            (phase(p) == "Running").then_some(())
        });
        std::thread::sleep(Duration::from_millis(1500));
    }
    // A pod edit: the container is replaced, the volume kept.
    d.write_manifest("tree.yaml", &pod.replace("'3000'", "'2999'"));
    std::thread::sleep(Duration::from_secs(5));
    attacker_running(&d, "tree");
    let (swaps, refused) = raced(&d, "tree");
    println!(
        "emptyDir with fsGroup: {restarts} daemon restarts and a pod edit; the container raced {swaps} swaps ({refused} refused)"
    );
    sentinel.assert_unchanged(&d);
    let peak = peak_rss_kib(d.daemon_pid().unwrap());
    assert!(peak < MAX_DAEMON_PEAK_RSS_KIB, "daemon peak RSS {peak} KiB");
}

/// The pod's own container cannot write its content volume (read-only), but another pod
/// can if the host dir is handed to it (a hostPath an administrator gave too widely):
/// then the daemon's writer itself must stand, on every refresh and restart.
#[test]
fn a_content_volume_written_by_another_pod_never_leads_the_writer_to_the_host() {
    assert!(require_root());
    let sentinel = Sentinel::new();
    let (mut d, config) = daemon_with_config_map();
    d.write_manifest(
        "victim.yaml",
        &busybox_pod(
            "victim",
            "  securityContext: {fsGroup: 4321}\n  volumes:\n  - name: cfg\n    configMap: {name: cfg}\n",
            "    volumeMounts:\n    - {name: cfg, mountPath: /cfg}\n",
            "exec sleep 1000",
        ),
    );
    let uid = d.wait_pod("victim", "the victim running", 60, |p| {
        container_status(p, "main")?["state"]["running"]
            .is_object()
            .then(|| p["metadata"]["uid"].as_str().unwrap().to_string())
    });
    let volume = d.root.join("pods").join(&uid).join("volumes/content/cfg");
    assert!(
        volume.join("..data").exists(),
        "no payload in {}",
        volume.display()
    );
    let attacker = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: attacker}}\nspec:\n  volumes:\n  - name: victims\n    hostPath: {{path: {vol}, type: Directory}}\n  containers:\n  - name: attacker\n    image: {IMAGE}\n    imagePullPolicy: Never\n    command: [swapper, payload, /victims, {host}]\n    volumeMounts:\n    - {{name: victims, mountPath: /victims}}\n",
        vol = volume.display(),
        host = sentinel.host_dir()
    );
    d.write_manifest("attacker.yaml", &attacker);
    attacker_running(&d, "attacker");
    let start = Instant::now();
    let mut edits = 0;
    while start.elapsed() < Duration::from_secs(30) {
        edits += 1;
        put(&config, "cfg.yaml", &config_map(edits));
        std::thread::sleep(Duration::from_millis(100));
        if edits % 100 == 0 {
            restart(&mut d);
        }
    }
    let (swaps, refused) = raced(&d, "attacker");
    println!(
        "content volume written by another pod: {edits} ConfigMap edits, 2 daemon restarts; the attacker raced {swaps} swaps ({refused} refused)"
    );
    assert!(
        swaps > 0,
        "the attacker never got to swap anything: the test proves nothing"
    );
    sentinel.assert_unchanged(&d);
    let peak = peak_rss_kib(d.daemon_pid().unwrap());
    assert!(peak < MAX_DAEMON_PEAK_RSS_KIB, "daemon peak RSS {peak} KiB");
}
