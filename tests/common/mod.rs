//! Test harness: a real podhost daemon (the built binary) on its own temp dirs, socket,
//! node name and cgroup root, with the built-in busybox image loaded. Everything it
//! made (processes, mounts, cgroups, dirs) is removed on drop, even after a failure.

#![allow(dead_code)]

pub mod netns;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_podhost");

/// The busybox OCI layout, built once per test binary.
pub fn busybox_layout() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // Shared by every test binary: built to a temp name, renamed into place.
        let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        let dir = target.join("busybox-layout");
        if dir.join("index.json").exists() {
            return dir;
        }
        let tmp = target.join(format!("busybox-layout.tmp.{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        build_busybox_layout(&tmp, &[]);
        if std::fs::rename(&tmp, &dir).is_err() {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        dir
    })
}

/// Runs `oci/busybox/build.sh [ARGS…] DEST` (e.g. `--ref R --add FILE`); fails the test
/// when it fails.
pub fn build_busybox_layout(dest: &Path, args: &[&std::ffi::OsStr]) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("oci/busybox/build.sh");
    let out = Command::new("bash")
        .arg(&script)
        .args(args)
        .arg(dest)
        .output()
        .expect("run build.sh");
    assert!(
        out.status.success(),
        "build.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Compiles the C program `src` statically into `work` and builds a busybox image
/// `image` with it in /usr/local/bin (a real program of the test's own, offline).
pub fn static_program_layout(src: &Path, work: &Path, image: &str) -> PathBuf {
    let name = src.file_stem().expect("program name");
    let bin = work.join(name);
    let out = Command::new("gcc")
        .args(["-static", "-O2", "-Wall", "-o"])
        .arg(&bin)
        .arg(src)
        .output()
        .expect("run gcc (apt-get install gcc libc6-dev)");
    assert!(
        out.status.success(),
        "gcc -static failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let layout = work.join("layout");
    build_busybox_layout(
        &layout,
        &[
            "--ref".as_ref(),
            image.as_ref(),
            "--add".as_ref(),
            bin.as_os_str(),
        ],
    );
    layout
}

/// Fails the test unless it runs as root: these tests create namespaces, mounts and
/// cgroups, and a skipped test must never look like a passed one. Never returns false
/// (a bool only so that `assert!(require_root())` reads as what it does).
pub fn require_root() -> bool {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root (namespaces, mounts, cgroups): run it as root"
    );
    true
}

/// SIGKILLs a process (a stopped monitor, a daemon that would hang on SIGTERM) when
/// dropped, so a failing test leaves it behind neither.
pub struct KillOnDrop(pub i32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.0),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// Set (by the VM suite's 15-lifecycle, whose guest has no `ip netns` and is itself a
/// throwaway machine): every test daemon runs on the machine's network with
/// `--pod-network none`, as [`TestDaemon::start_on_machine_network`] does.
pub const SHARED_NETWORK_ENV: &str = "PODHOST_TEST_SHARED_NETWORK";

pub struct TestDaemon {
    pub dir: tempfile::TempDir,
    pub manifests: PathBuf,
    pub root: PathBuf,
    pub logs: PathBuf,
    pub socket: PathBuf,
    pub node: String,
    pub cgroup_root: String,
    /// More daemon flags (e.g. `--insecure-registry`).
    pub extra_args: Vec<String>,
    /// The network namespace the daemon runs in, its "host" (pod networks, nftables);
    /// `None`: the machine's own, with `--pod-network none`.
    pub netns: Option<netns::TestNetns>,
    /// Another daemon's network namespace this one runs in instead (`nsenter --net`),
    /// for tests of two daemons on one host ([`TestDaemon::prepare_in_network_of`]).
    pub joined_netns: Option<PathBuf>,
    child: Option<Child>,
}

impl TestDaemon {
    /// Loads the image and starts the daemon with short back-off and rescan.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Like [`start`](Self::start), with more daemon flags.
    pub fn start_with(extra_args: &[&str]) -> Self {
        let mut d = Self::prepare_with(extra_args);
        d.spawn_daemon();
        d
    }

    /// Starts the daemon in the machine's own network namespace with `--pod-network
    /// none`, for tests whose pods must share the test's network (a registry on its
    /// loopback, hostNetwork servers the test connects to).
    pub fn start_on_machine_network(extra_args: &[&str]) -> Self {
        let mut d = Self::prepare_on_machine_network(extra_args);
        d.spawn_daemon();
        d
    }

    /// [`prepare_with`](Self::prepare_with) on the machine's own network.
    pub fn prepare_on_machine_network(extra_args: &[&str]) -> Self {
        let mut d = Self::prepare_with(extra_args);
        d.netns = None;
        let none = "--pod-network=none".to_string();
        if !d.extra_args.contains(&none) {
            d.extra_args.push(none);
        }
        d
    }

    /// [`prepare_with`](Self::prepare_with), the daemon to run in `host`'s network
    /// namespace (beside `host`'s daemon, as a second daemon on the same machine).
    pub fn prepare_in_network_of(host: &TestDaemon, extra_args: &[&str]) -> Self {
        let mut d = Self::prepare_with(extra_args);
        d.netns = None;
        d.joined_netns = Some(
            host.netns
                .as_ref()
                .expect("a daemon in its own netns")
                .path(),
        );
        d
    }

    /// The command line that runs `program` in this daemon's network namespace.
    pub fn command_in_netns(&self, program: &str) -> Command {
        match (&self.netns, &self.joined_netns) {
            (Some(ns), _) => ns.command(program),
            (None, Some(path)) => {
                let mut c = Command::new("nsenter");
                c.arg(format!("--net={}", path.display()))
                    .arg("--")
                    .arg(program);
                c
            }
            (None, None) => Command::new(program),
        }
    }

    /// Dirs made and the image loaded, but no daemon started yet. The daemon will run
    /// in a network namespace of its own (its pods' bridge, addresses and rules there).
    pub fn prepare_with(extra_args: &[&str]) -> Self {
        let seq = SEQ.fetch_add(1, Ordering::SeqCst);
        let dir = tempfile::Builder::new()
            .prefix("podhost-it-")
            .tempdir()
            .expect("tempdir");
        let node = format!("n{}x{}", std::process::id(), seq);
        let (own, _) = podhost::runtime::cgroup_root::own_root();
        let cgroup_root = format!("{}-it-{}", own, node);
        let d = Self {
            manifests: dir.path().join("manifests"),
            root: dir.path().join("root"),
            logs: dir.path().join("logs"),
            socket: dir.path().join("api.sock"),
            node,
            cgroup_root,
            dir,
            extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
            netns: None,
            joined_netns: None,
            child: None,
        };
        let mut d = d;
        if std::env::var_os(SHARED_NETWORK_ENV).is_some() {
            d.extra_args.push("--pod-network=none".into());
        } else {
            d.netns = Some(netns::TestNetns::new());
        }
        std::fs::create_dir_all(&d.manifests).unwrap();
        let out = Command::new(BIN)
            .args(["load", "--socket"])
            .arg(&d.socket)
            .arg("--root-dir")
            .arg(&d.root)
            .arg(busybox_layout())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "load failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        d
    }

    /// Starts the daemon and waits until its API answers.
    pub fn spawn_daemon(&mut self) {
        self.spawn_daemon_with_env(&[]);
        self.wait_api_up();
    }

    /// Waits until the daemon's API answers; fails the test, with the daemon's log, if
    /// the daemon exits first or is not up in a minute. (A debug build in a TCG guest
    /// beside other work has taken more than 10 s to start.)
    pub fn wait_api_up(&mut self) {
        let limit = Duration::from_secs(60);
        let up = wait_until(limit, "daemon socket", || {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok())
                .flatten()
            {
                panic!(
                    "the daemon exited ({status}) before its API answered; its log:\n{}",
                    self.daemon_log()
                );
            }
            self.cli(&["get", "pods", "-A", "-o", "json"])
                .status
                .success()
                .then_some(())
        });
        if up.is_none() {
            panic!(
                "the daemon's API did not answer within {limit:?}; its log:\n{}",
                self.daemon_log()
            );
        }
    }

    /// Starts the daemon with more environment variables, without waiting for it.
    pub fn spawn_daemon_with_env(&mut self, env: &[(&str, &str)]) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("daemon.log"))
            .unwrap();
        let mut command = self.command_in_netns(BIN);
        let child = command
            .arg("daemon")
            .arg("--pod-manifest-path")
            .arg(&self.manifests)
            .arg("--root-dir")
            .arg(&self.root)
            .arg("--log-dir")
            .arg(&self.logs)
            .arg("--socket")
            .arg(&self.socket)
            .arg("--node-name")
            .arg(&self.node)
            .arg("--cgroup-root")
            .arg(&self.cgroup_root)
            .args([
                "--crashloop-initial-backoff",
                "1",
                "--crashloop-max-backoff",
                "4",
            ])
            .args(["--rescan-interval", "2"])
            // The kubelet's default eviction thresholds may be met on a build host (the
            // dev machine's root fs: f_bavail is 9.6% of f_blocks, under
            // nodefs.available<10%): test daemons run without eviction unless the test
            // sets its own thresholds (tests/eviction.rs).
            .args(
                (!self
                    .extra_args
                    .iter()
                    .any(|a| a.starts_with("--eviction-hard")))
                .then_some("--eviction-hard="),
            )
            // `--pod-network auto` picks CNI when the host's /etc/cni/net.d holds a
            // config (installing podman puts one there): test daemons read an empty dir
            // of their own unless the test names its CNI config.
            .args(
                (!self
                    .extra_args
                    .iter()
                    .any(|a| a.starts_with("--cni-conf-dir")))
                .then(|| {
                    let empty = self.dir.path().join("no-cni-config");
                    std::fs::create_dir_all(&empty).unwrap();
                    ["--cni-conf-dir".into(), empty.into_os_string()]
                })
                .into_iter()
                .flatten(),
            )
            .args(&self.extra_args)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawn daemon");
        self.child = Some(child);
    }

    /// Waits up to `limit` for the daemon to exit on its own and returns its status;
    /// fails the test if it is still running then.
    pub fn wait_daemon_exit(&mut self, limit: Duration) -> std::process::ExitStatus {
        let child = self.child.as_mut().expect("no daemon was started");
        let status = wait_until(limit, "the daemon to exit", || child.try_wait().unwrap())
            .unwrap_or_else(|| panic!("the daemon still runs after {limit:?}"));
        self.child = None;
        status
    }

    /// Kills the daemon with SIGKILL (containers must survive).
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn daemon_pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    pub fn daemon_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("daemon.log")).unwrap_or_default()
    }

    pub fn cli(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .arg("--socket")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("run podhost")
    }

    /// Writes a manifest atomically (temp + rename, as editors and config tools do).
    pub fn write_manifest(&self, file: &str, yaml: &str) {
        let tmp = self.manifests.join(format!(".{file}.tmp"));
        std::fs::write(&tmp, yaml).unwrap();
        std::fs::rename(&tmp, self.manifests.join(file)).unwrap();
    }

    pub fn remove_manifest(&self, file: &str) {
        std::fs::remove_file(self.manifests.join(file)).unwrap();
    }

    pub fn full_name(&self, name: &str) -> String {
        format!("{name}-{}", self.node)
    }

    pub fn pods(&self) -> Vec<Value> {
        let out = self.cli(&["get", "pods", "-A", "-o", "json"]);
        assert!(
            out.status.success(),
            "get pods: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["items"].as_array().cloned().unwrap_or_default()
    }

    pub fn pod(&self, name: &str) -> Option<Value> {
        let full = self.full_name(name);
        self.pods()
            .into_iter()
            .find(|p| p["metadata"]["name"] == full.as_str())
    }

    /// Waits until `f` finds what it wants in the named pod.
    pub fn wait_pod<T>(
        &self,
        name: &str,
        what: &str,
        secs: u64,
        f: impl Fn(&Value) -> Option<T>,
    ) -> T {
        wait_until(Duration::from_secs(secs), what, || {
            self.pod(name).as_ref().and_then(&f)
        })
        .unwrap_or_else(|| panic!("{what}; daemon log:\n{}", self.daemon_log()))
    }

    pub fn wait_gone(&self, name: &str, secs: u64) -> Duration {
        let start = Instant::now();
        wait_until(Duration::from_secs(secs), "pod gone", || {
            self.pod(name).is_none().then_some(())
        })
        .unwrap_or_else(|| panic!("pod {name} still there; daemon log:\n{}", self.daemon_log()));
        start.elapsed()
    }

    pub fn node_events(&self) -> Vec<Value> {
        let c = podhost::api::client::Client::new(&self.socket);
        c.get_json("/events").unwrap()
    }

    /// The pod's events; empty once the pod is gone.
    pub fn pod_events(&self, name: &str) -> Vec<Value> {
        let c = podhost::api::client::Client::new(&self.socket);
        c.get_json(&format!("/pods/{}/events", self.full_name(name)))
            .unwrap_or_default()
    }

    /// Pids of processes whose command line contains `needle`.
    pub fn pids_with(needle: &str) -> Vec<i32> {
        Self::pids_matching(|cmd| cmd.contains(needle))
    }

    /// Processes whose command line holds `command` as whole words: `sleep 100` finds
    /// `sleep 100` and `sh -c sleep 100 &`, not another test's `sleep 1000`.
    pub fn pids_running(command: &str) -> Vec<i32> {
        Self::pids_matching(|cmd| {
            cmd.match_indices(command).any(|(at, _)| {
                let before = cmd[..at].chars().next_back();
                let after = cmd[at + command.len()..].chars().next();
                before.is_none_or(char::is_whitespace) && after.is_none_or(char::is_whitespace)
            })
        })
    }

    fn pids_matching(matches: impl Fn(&str) -> bool) -> Vec<i32> {
        let mut out = Vec::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            if pid == std::process::id() as i32 {
                continue;
            }
            if let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) {
                let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
                if matches(&cmd) {
                    out.push(pid);
                }
            }
        }
        out
    }

    /// Mount points under this test's dir.
    pub fn mounts(&self) -> Vec<String> {
        let root = self.dir.path().display().to_string();
        std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split(' ').nth(4).map(String::from))
            .filter(|m| m.starts_with(&root))
            .collect()
    }

    fn cleanup(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(c.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let _ = c.wait();
        }
        // Kill every container init this test started, then its shims.
        let pods = self.root.join("pods");
        for started in glob_started(&pods) {
            if let Ok(text) = std::fs::read_to_string(&started)
                && let Ok(v) = serde_json::from_str::<Value>(&text)
            {
                for key in ["init_pid", "shim_pid"] {
                    // A pid that is not a positive i32 is not one of ours (0 or -1
                    // would signal whole process groups).
                    let pid = v[key].as_i64().and_then(|p| i32::try_from(p).ok());
                    if let Some(pid) = pid.filter(|p| *p > 0) {
                        let _ = nix::sys::signal::kill(
                            nix::unistd::Pid::from_raw(pid),
                            nix::sys::signal::Signal::SIGKILL,
                        );
                    }
                }
            }
        }
        let root = self.dir.path().display().to_string();
        for pid in Self::pids_with(&root) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        std::thread::sleep(Duration::from_millis(200));
        let mut mounts = self.mounts();
        mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
        for m in mounts {
            let _ = nix::mount::umount2(m.as_str(), nix::mount::MntFlags::MNT_DETACH);
        }
        remove_cgroup_tree(&self.cgroup_root);
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        // A failed test shows what its daemon said: its temp dir (and log) goes next.
        if std::thread::panicking() {
            let log = std::fs::read_to_string(self.dir.path().join("daemon.log"))
                .unwrap_or_else(|e| format!("(no daemon log: {e})"));
            let lines: Vec<&str> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(60)..];
            eprintln!(
                "---- the test daemon's log (last {} lines) ----\n{}\n----",
                tail.len(),
                tail.join("\n")
            );
        }
        self.cleanup();
    }
}

fn glob_started(pods: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let walk = |p: &Path| {
        std::fs::read_dir(p)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect::<Vec<_>>()
    };
    for pod in walk(pods) {
        for c in walk(&pod.join("containers")) {
            for a in walk(&c) {
                let s = a.join("started.json");
                if s.exists() {
                    out.push(s);
                }
            }
        }
    }
    out
}

/// Removes a cgroup subtree (deepest first) in every mounted hierarchy.
pub fn remove_cgroup_tree(rel: &str) {
    fn rm(dir: &Path) {
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.flatten() {
                if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    rm(&e.path());
                }
            }
        }
        let _ = std::fs::remove_dir(dir);
    }
    for h in cgroup_hierarchies() {
        let d = h.join(rel.trim_start_matches('/'));
        if d.exists() {
            rm(&d);
        }
    }
}

/// Every mounted cgroup hierarchy's root: /sys/fs/cgroup itself on a pure cgroup v2
/// host, its subdirectories (the v1 controllers and `unified`) on a hybrid one.
pub fn cgroup_hierarchies() -> Vec<PathBuf> {
    let root = PathBuf::from("/sys/fs/cgroup");
    if root.join("cgroup.procs").exists() {
        return vec![root];
    }
    std::fs::read_dir(&root)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect()
}

/// Polls `f` every 50 ms until it returns Some or the timeout passes.
pub fn wait_until<T>(
    timeout: Duration,
    _what: &str,
    mut f: impl FnMut() -> Option<T>,
) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if start.elapsed() > timeout {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The container status of `container` in a pod JSON.
pub fn container_status<'a>(pod: &'a Value, container: &str) -> Option<&'a Value> {
    pod["status"]["containerStatuses"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == container)
}

pub fn phase(pod: &Value) -> &str {
    pod["status"]["phase"].as_str().unwrap_or("")
}

/// Parses RFC 3339 into a chrono time.
pub fn ts(v: &Value) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap_or_default())
        .unwrap_or_else(|e| panic!("bad time {v}: {e}"))
        .with_timezone(&chrono::Utc)
}

/// Reads a CRI log file's messages with their timestamps.
pub fn log_lines(path: &Path) -> Vec<(chrono::DateTime<chrono::Utc>, String, String)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut it = l.splitn(4, ' ');
            let t = it.next()?;
            let stream = it.next()?.to_string();
            let _tag = it.next()?;
            let msg = it.next().unwrap_or("").to_string();
            let t = chrono::DateTime::parse_from_rfc3339(t)
                .ok()?
                .with_timezone(&chrono::Utc);
            Some((t, stream, msg))
        })
        .collect()
}

pub fn busybox_pod(name: &str, extra_spec: &str, container_extra: &str, command: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n{extra_spec}  containers:\n  - name: main\n    image: localhost/busybox:latest\n    imagePullPolicy: Never\n    command: [\"sh\", \"-c\", {cmd}]\n{container_extra}",
        cmd = serde_json::to_string(command).unwrap()
    )
}

/// A JSON blob of an OCI layout, by digest.
pub fn read_blob_json(layout: &Path, digest: &str) -> Value {
    let path = layout
        .join("blobs/sha256")
        .join(digest.trim_start_matches("sha256:"));
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Stores `bytes` as a blob of an OCI layout; returns (digest, size).
pub fn write_blob(layout: &Path, bytes: &[u8]) -> (String, usize) {
    use sha2::Digest;
    let hex = hex::encode(sha2::Sha256::digest(bytes));
    std::fs::write(layout.join("blobs/sha256").join(&hex), bytes).unwrap();
    (format!("sha256:{hex}"), bytes.len())
}

/// Rewrites the layout's (only) image: `edit` changes its manifest and config, and the
/// new blobs are stored and referenced from index.json.
pub fn edit_image(layout: &Path, edit: impl FnOnce(&mut Value, &mut Value)) {
    let mut index: Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    let mut manifest = read_blob_json(layout, index["manifests"][0]["digest"].as_str().unwrap());
    let mut config = read_blob_json(layout, manifest["config"]["digest"].as_str().unwrap());
    edit(&mut manifest, &mut config);
    let (cd, cs) = write_blob(layout, &serde_json::to_vec(&config).unwrap());
    manifest["config"]["digest"] = cd.into();
    manifest["config"]["size"] = cs.into();
    let (md, ms) = write_blob(layout, &serde_json::to_vec(&manifest).unwrap());
    index["manifests"][0]["digest"] = md.into();
    index["manifests"][0]["size"] = ms.into();
    std::fs::write(
        layout.join("index.json"),
        serde_json::to_vec(&index).unwrap(),
    )
    .unwrap();
}

/// Writes a copy of the busybox layout whose image config carries `config_patch` (merged
/// into its `config` object) under the reference `name`; returns the layout dir.
pub fn image_variant(dest: &Path, name: &str, config_patch: Value) -> PathBuf {
    let status = Command::new("cp")
        .arg("-a")
        .arg(busybox_layout())
        .arg(dest)
        .status()
        .unwrap();
    assert!(status.success());
    edit_image(dest, |_, config| {
        for (k, v) in config_patch.as_object().unwrap() {
            config["config"][k] = v.clone();
        }
    });
    let mut index: Value =
        serde_json::from_slice(&std::fs::read(dest.join("index.json")).unwrap()).unwrap();
    index["manifests"][0]["annotations"] = serde_json::json!({
        "org.opencontainers.image.ref.name": name,
        "io.containerd.image.name": name,
    });
    std::fs::write(dest.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
    dest.to_path_buf()
}

/// Adds an uncompressed tar layer on top of the layout's image.
pub fn append_layer(layout: &Path, tar: &[u8]) {
    let (digest, size) = write_blob(layout, tar);
    edit_image(layout, |manifest, config| {
        config["rootfs"]["diff_ids"]
            .as_array_mut()
            .unwrap()
            .push(digest.clone().into());
        manifest["layers"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({
                "mediaType": "application/vnd.oci.image.layer.v1.tar",
                "digest": digest,
                "size": size,
            }));
    });
}

impl TestDaemon {
    /// Loads a layout through the daemon.
    pub fn load(&self, layout: &Path) {
        let out = self.cli(&["load", layout.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "load: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// All of a container's log messages (current instance).
    pub fn logs_of(&self, pod: &str, container: &str) -> String {
        let out = self.cli(&["logs", &self.full_name(pod), "-c", container]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

/// The value of the `key=value` line a probe printed (panics, showing the logs, when
/// there is none).
pub fn field(logs: &str, key: &str) -> String {
    logs.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in:\n{logs}"))
        .trim()
        .to_string()
}
