//! Two daemons on one host (one network namespace, two root dirs), as a user runs a
//! `--runonce` CI job beside the node's daemon: with its own `--bridge-name` and
//! `--pod-cidr` the second runs its pods, adopts them again and stops them, while the
//! first's pods keep their veths, addresses, routes and hostPorts — watched every
//! 100 ms throughout; without them it refuses the first's bridge (and an overlapping
//! CIDR) with a message naming the first's root and the flags, touching nothing.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{BIN, TestDaemon, phase, require_root, static_program_layout, wait_until};
use serde_json::Value;

const IMAGE: &str = "localhost/netcheck:latest";
const PORT: u16 = 7000;
/// The flags that separate the second daemon's network from the first's.
const SEPARATE: [&str; 4] = [
    "--bridge-name",
    "podhost1",
    "--pod-cidr",
    "10.87.0.0/16,fd70:6f64:6801::/64",
];

/// The netcheck image (tests/programs/netcheck.c), built once per test binary.
fn netcheck_layout() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("netcheck-two-{}", std::process::id()));
        std::fs::create_dir_all(&work).unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/netcheck.c");
        static_program_layout(&src, &work, IMAGE)
    })
}

/// Loads the netcheck image into `d`'s root without a daemon (a `--runonce` run serves
/// no socket).
fn load_offline(d: &TestDaemon) {
    let out = Command::new(BIN)
        .args(["load", "--socket"])
        .arg(&d.socket)
        .arg("--root-dir")
        .arg(&d.root)
        .arg(netcheck_layout())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A pod serving TCP on [`PORT`], published on the host at `host_port`.
fn server_pod(name: &str, host_port: u16) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {IMAGE}\n    imagePullPolicy: Never\n    command: [netcheck, serve, \"{PORT}\"]\n    ports: [{{containerPort: {PORT}, hostPort: {host_port}}}]\n"
    )
}

fn running(d: &TestDaemon, name: &str) -> Value {
    d.wait_pod(name, &format!("{name} Running"), 60, |p| {
        (phase(p) == "Running").then(|| p.clone())
    })
}

fn pod_ips(pod: &Value) -> Vec<IpAddr> {
    pod["status"]["podIPs"]
        .as_array()
        .unwrap_or_else(|| panic!("no podIPs in {}", pod["status"]))
        .iter()
        .map(|ip| ip["ip"].as_str().unwrap().parse().unwrap())
        .collect()
}

/// `podhost daemon --runonce` on `d`'s dirs, in `d`'s network namespace.
fn run_once(d: &TestDaemon, extra: &[&str]) -> Output {
    // No CNI config (as TestDaemon's daemons): the built-in bridge.
    let no_cni = d.dir.path().join("no-cni-config");
    std::fs::create_dir_all(&no_cni).unwrap();
    d.command_in_netns(BIN)
        .arg("daemon")
        .arg("--pod-manifest-path")
        .arg(&d.manifests)
        .arg("--root-dir")
        .arg(&d.root)
        .arg("--log-dir")
        .arg(&d.logs)
        .arg("--socket")
        .arg(&d.socket)
        .arg("--node-name")
        .arg(&d.node)
        .arg("--cgroup-root")
        .arg(&d.cgroup_root)
        .arg("--eviction-hard=")
        .arg("--cni-conf-dir")
        .arg(&no_cni)
        .args(&d.extra_args)
        .arg("--runonce")
        .args(extra)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .output()
        .expect("run podhost daemon --runonce")
}

/// One TCP request to `addr` from the calling thread's namespace.
fn tcp_ask(addr: SocketAddr) -> Result<String, String> {
    let mut s =
        TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    s.write_all(b"ping").map_err(|e| e.to_string())?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).map_err(|e| e.to_string())?;
    Ok(answer)
}

/// The first daemon's network as the host and its pods see it.
struct FirstDaemonView {
    host: String,
    /// Its pods' network namespaces (`<root>/pods/<uid>/ns/net`) and addresses.
    pods: Vec<(PathBuf, Vec<IpAddr>)>,
    veths: BTreeSet<String>,
    host_ports: Vec<u16>,
}

impl FirstDaemonView {
    fn veths_on(&self, bridge: &str) -> BTreeSet<String> {
        let out = ip(&self.host, &["-o", "link", "show", "master", bridge]);
        out.lines()
            .filter_map(|l| l.split(": ").nth(1))
            .map(|n| n.split('@').next().unwrap().to_string())
            .collect()
    }

    /// What is wrong with the first daemon's network now; empty when it is whole.
    fn problems(&self) -> Vec<String> {
        let mut wrong = Vec::new();
        let veths = self.veths_on("podhost0");
        if !self.veths.is_subset(&veths) {
            wrong.push(format!("veths {:?}, had {:?}", veths, self.veths));
        }
        let routes = ip(&self.host, &["route", "show", "10.86.0.0/16"]);
        if !routes.contains("dev podhost0") {
            wrong.push(format!("route to 10.86.0.0/16: {routes:?}"));
        }
        let table = nsenter(
            &self.host_path(),
            "nft",
            &["list", "table", "inet", "podhost"],
        );
        for port in &self.host_ports {
            if !table.contains(&format!("dport {port}")) {
                wrong.push(format!("no DNAT of {port} in inet podhost: {table}"));
            }
        }
        for (netns, ips) in &self.pods {
            let addrs = nsenter(netns, "ip", &["-o", "addr", "show", "dev", "eth0"]);
            for ip in ips {
                if !addrs.contains(&format!(" {ip}/")) {
                    wrong.push(format!(
                        "{ip} gone from eth0 of {}: {addrs}",
                        netns.display()
                    ));
                }
            }
            let route = nsenter(netns, "ip", &["route", "show", "default"]);
            if !route.contains("via 10.86.0.1 dev eth0") {
                wrong.push(format!("default route of {}: {route:?}", netns.display()));
            }
        }
        wrong
    }

    fn host_path(&self) -> PathBuf {
        PathBuf::from("/run/netns").join(&self.host)
    }
}

fn ip(ns: &str, args: &[&str]) -> String {
    let out = Command::new("ip")
        .arg("-n")
        .arg(ns)
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `program args` in the namespace at `netns`: its stdout, or its stderr on failure.
fn nsenter(netns: &Path, program: &str, args: &[&str]) -> String {
    let out = Command::new("nsenter")
        .arg(format!("--net={}", netns.display()))
        .arg("--")
        .arg(program)
        .args(args)
        .output()
        .unwrap();
    if out.status.success() {
        String::from_utf8_lossy(&out.stdout).into_owned()
    } else {
        format!("FAILED: {}", String::from_utf8_lossy(&out.stderr))
    }
}

/// Daemon A with two pods publishing hostPorts 18090 and 18091, and what it made.
fn first_daemon() -> (TestDaemon, FirstDaemonView) {
    require_root();
    let mut a = TestDaemon::prepare_with(&[]);
    a.spawn_daemon();
    a.load(netcheck_layout());
    a.write_manifest("a1.yaml", &server_pod("a1", 18090));
    a.write_manifest("a2.yaml", &server_pod("a2", 18091));
    let pods: Vec<Value> = ["a1", "a2"].iter().map(|n| running(&a, n)).collect();
    let host = a.netns.as_ref().unwrap().name.clone();
    let view = FirstDaemonView {
        host: host.clone(),
        pods: pods
            .iter()
            .map(|p| {
                let uid = p["metadata"]["uid"].as_str().unwrap();
                (a.root.join("pods").join(uid).join("ns/net"), pod_ips(p))
            })
            .collect(),
        veths: BTreeSet::new(),
        host_ports: vec![18090, 18091],
    };
    let veths = view.veths_on("podhost0");
    assert_eq!(veths.len(), 2, "{veths:?}");
    let view = FirstDaemonView { veths, ..view };
    assert_eq!(view.problems(), Vec::<String>::new());
    (a, view)
}

struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Runs `during` while a thread in A's namespace checks A's network every 100 ms
/// (its hostPorts answering, its veths, routes, table and pods' addresses); returns
/// `during`'s result and the checks' count, failing the test on any problem seen.
fn watching<T>(a: &TestDaemon, view: &FirstDaemonView, during: impl FnOnce() -> T) -> (T, usize) {
    let stop = AtomicBool::new(false);
    let host = a.netns.as_ref().unwrap();
    std::thread::scope(|s| {
        let watcher = s.spawn(|| {
            host.run(|| {
                let mut seen = Vec::new();
                let mut checks = 0;
                while !stop.load(Ordering::SeqCst) {
                    for port in &view.host_ports {
                        let addr = SocketAddr::from(([127, 0, 0, 1], *port));
                        match tcp_ask(addr) {
                            Ok(answer) if answer.ends_with(" ping") => {}
                            other => seen.push(format!("hostPort {port}: {other:?}")),
                        }
                    }
                    seen.extend(view.problems());
                    checks += 1;
                    std::thread::sleep(Duration::from_millis(100));
                }
                (seen, checks)
            })
        });
        // Stopped also when `during` panics, or the scope would wait for it forever.
        let stopper = StopOnDrop(&stop);
        let result = during();
        drop(stopper);
        let (seen, checks) = watcher.join().unwrap();
        assert_eq!(seen, Vec::<String>::new(), "A's network was touched");
        (result, checks)
    })
}

#[test]
fn a_second_daemon_with_its_own_bridge_and_cidr_runs_pods_beside_the_first_and_touches_none_of_its()
{
    let (a, view) = first_daemon();
    let a_ips: BTreeSet<IpAddr> = view.pods.iter().flat_map(|(_, ips)| ips.clone()).collect();

    let mut b = TestDaemon::prepare_in_network_of(&a, &SEPARATE);
    load_offline(&b);
    b.write_manifest("b1.yaml", &server_pod("b1", 18092));
    b.write_manifest("b2.yaml", &server_pod("b2", 18093));
    let (b_ips, checks) = watching(&a, &view, || {
        // The CI run: its pods come up, the run exits 0 and leaves them running.
        let out = run_once(&b, &[]);
        assert!(
            out.status.success(),
            "runonce failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // Then a daemon on B's root adopts them, reports their addresses, and stops
        // them once their manifests are gone (teardown and reconcile on B's side).
        b.spawn_daemon();
        let ips: Vec<IpAddr> = ["b1", "b2"]
            .iter()
            .flat_map(|n| pod_ips(&running(&b, n)))
            .collect();
        let host = a.netns.as_ref().unwrap();
        let answer = host.run(|| {
            wait_until(Duration::from_secs(10), "B's hostPort", || {
                tcp_ask(SocketAddr::from(([127, 0, 0, 1], 18092))).ok()
            })
        });
        assert!(answer.is_some_and(|a| a.ends_with(" ping")), "B's hostPort");
        b.remove_manifest("b1.yaml");
        b.remove_manifest("b2.yaml");
        b.wait_gone("b1", 30);
        b.wait_gone("b2", 30);
        b.kill9();
        ips
    });
    assert!(checks >= 10, "A was checked only {checks} times");
    // B's addresses are its own CIDR's, none of them A's.
    assert_eq!(b_ips.len(), 4, "{b_ips:?}");
    assert!(
        b_ips.iter().all(|ip| ip.to_string().starts_with("10.87.")
            || ip.to_string().starts_with("fd70:6f64:6801:")),
        "{b_ips:?}"
    );
    let all: BTreeSet<IpAddr> = a_ips.iter().chain(&b_ips).copied().collect();
    assert_eq!(
        all.len(),
        a_ips.len() + b_ips.len(),
        "an address handed out twice"
    );
    // A never noticed: its pods still report the same addresses, and B left nothing.
    for (name, (_, ips)) in ["a1", "a2"].iter().zip(&view.pods) {
        assert_eq!(&pod_ips(&a.pod(name).unwrap()), ips);
    }
    assert_eq!(view.veths_on("podhost1"), BTreeSet::new());
    let logs = a.daemon_log();
    assert!(!logs.contains("deleting a veth"), "{logs}");
}

#[test]
fn a_second_daemon_on_the_first_ones_bridge_or_cidr_refuses_naming_its_root_and_the_flags() {
    let (a, view) = first_daemon();
    let a_root = a.root.canonicalize().unwrap().display().to_string();
    let ((), _) = watching(&a, &view, || {
        for (extra, wanted) in [
            (
                &[][..],
                "bridge podhost0 belongs to the podhost daemon with root dir",
            ),
            (
                &["--bridge-name", "podhost2"][..],
                "pod CIDR 10.86.0.0/16 overlaps address 10.86.0.1/16 on podhost0",
            ),
        ] {
            let mut c = TestDaemon::prepare_in_network_of(&a, extra);
            c.spawn_daemon();
            c.load(netcheck_layout());
            c.write_manifest("c.yaml", &server_pod("c", 18094));
            let message = c.wait_pod("c", "FailedCreatePodSandBox", 30, |_| {
                c.pod_events("c")
                    .iter()
                    .find(|e| e["reason"] == "FailedCreatePodSandBox")
                    .map(|e| e["message"].as_str().unwrap_or_default().to_string())
            });
            for part in [wanted, a_root.as_str(), "--bridge-name", "--pod-cidr"] {
                assert!(message.contains(part), "{part:?} not in {message:?}");
            }
            let node = c.node_events();
            assert!(
                node.iter().any(|e| e["reason"] == "NetworkNotReady"
                    && e["message"].as_str().unwrap_or_default().contains(wanted)),
                "{node:?}"
            );
            assert!(c.daemon_log().contains(wanted), "{}", c.daemon_log());
            assert_ne!(phase(&c.pod("c").unwrap()), "Running");
        }
    });
    assert_eq!(view.veths_on("podhost2"), BTreeSet::new());
    let host_links = ip(&view.host, &["-o", "link", "show"]);
    assert!(!host_links.contains("podhost2"), "{host_links}");
}
