//! Hostile containers against the root daemon's writes into their volumes: a container
//! running as root (the default) swaps entries of a volume it can write for symlinks to
//! a host directory, for the whole test, while the test drives the daemon through
//! content refreshes, restarts and pod edits. The host sentinel (modes, owners, contents
//! and entries of a directory the container cannot see) must come out unchanged, and the
//! daemon's memory bounded. Each test prints how many swaps its container raced.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;

const IMAGE: &str = "localhost/swapper:1";
/// The daemon's peak resident memory above which the attack counts as a blow-up.
const MAX_DAEMON_PEAK_RSS_KIB: u64 = 256 * 1024;

/// A host directory no container sees: one secret file (0600), one private subdir
/// with a file, owned by root.
struct Sentinel {
    _dir: tempfile::TempDir,
    path: PathBuf,
    before: BTreeMap<String, String>,
}

impl Sentinel {
    fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("podhost-sentinel-")
            .tempdir()
            .unwrap();
        let path = dir.path().to_path_buf();
        std::fs::set_permissions(&path, PermissionsExt::from_mode(0o700)).unwrap();
        std::fs::write(path.join("secret"), b"host secret\n").unwrap();
        std::fs::set_permissions(path.join("secret"), PermissionsExt::from_mode(0o600)).unwrap();
        std::fs::create_dir(path.join("sub")).unwrap();
        std::fs::set_permissions(path.join("sub"), PermissionsExt::from_mode(0o700)).unwrap();
        std::fs::write(path.join("sub/inner"), b"inner\n").unwrap();
        std::fs::set_permissions(path.join("sub/inner"), PermissionsExt::from_mode(0o640)).unwrap();
        let before = snapshot(&path);
        Self {
            _dir: dir,
            path,
            before,
        }
    }

    fn host_dir(&self) -> &str {
        self.path.to_str().unwrap()
    }

    fn assert_unchanged(&self, d: &TestDaemon) {
        let after = snapshot(&self.path);
        assert_eq!(
            after,
            self.before,
            "the host sentinel {} changed under a hostile container; daemon log:\n{}",
            self.path.display(),
            d.daemon_log()
        );
    }
}

/// Every entry below `root` (and root itself): type, mode, owner, content.
fn snapshot(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        let m = std::fs::symlink_metadata(&p).unwrap();
        let rel = p.strip_prefix(root).unwrap().display().to_string();
        let what = if m.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                stack.push(e.unwrap().path());
            }
            "dir".to_string()
        } else if m.is_file() {
            format!("file {:?}", std::fs::read(&p).unwrap())
        } else {
            format!("other {:?}", std::fs::read_link(&p).ok())
        };
        out.insert(
            rel,
            format!("{what} mode={:o} uid={} gid={}", m.mode(), m.uid(), m.gid()),
        );
    }
    out
}

/// The swapper image (tests/programs/swapper.c, static) loaded into `d`.
fn load_swapper(d: &TestDaemon) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/swapper.c");
    let work = d.dir.path().join("swapper-image");
    std::fs::create_dir_all(&work).unwrap();
    d.load(&static_program_layout(&src, &work, IMAGE));
}

/// The last `swaps=S refused=R` the swapper printed.
fn raced(d: &TestDaemon, pod: &str) -> (u64, u64) {
    let logs = d.logs_of(pod, "attacker");
    let last = logs
        .lines()
        .rev()
        .find(|l| l.starts_with("swaps="))
        .unwrap_or("swaps=0 refused=0");
    let num = |key: &str| {
        last.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (num("swaps="), num("refused="))
}

fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
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

#[test]
fn content_volume_payload_swaps_never_reach_the_host() {
    assert!(require_root());
    let sentinel = Sentinel::new();
    let mut d = TestDaemon::prepare_with(&[]);
    let config = d.dir.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    put(&config, "cfg.yaml", &config_map(0));
    d.extra_args.push("--config-dir".into());
    d.extra_args.push(config.display().to_string());
    d.spawn_daemon();
    load_swapper(&d);
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
    let mut d = TestDaemon::prepare_with(&[]);
    let config = d.dir.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    put(&config, "cfg.yaml", &config_map(0));
    d.extra_args.push("--config-dir".into());
    d.extra_args.push(config.display().to_string());
    d.spawn_daemon();
    load_swapper(&d);
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
