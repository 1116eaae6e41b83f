//! Network namespaces that stand in for "the host" (a test daemon's) and "the outside",
//! so that network tests never touch the machine's real network and run in parallel.
//! Named (`ip netns add`) so that `ip -n`, `nsenter` and the daemon can all find them;
//! deleted on drop, and stale ones of dead test processes are swept first.

#![allow(dead_code)]

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

static NETNS_SEQ: AtomicU32 = AtomicU32::new(0);

/// Name prefix of every test network namespace (with the test process's pid next).
const PREFIX: &str = "phit-";

/// A named network namespace with loopback up; deleted on drop.
pub struct TestNetns {
    pub name: String,
}

impl TestNetns {
    pub fn new() -> Self {
        Self::with_role("")
    }

    /// A namespace whose name ends with `role` ("host", "pod-a"…), for `ip netns`.
    pub fn with_role(role: &str) -> Self {
        sweep_stale();
        let name = format!(
            "{PREFIX}{}-{}{}{role}",
            std::process::id(),
            NETNS_SEQ.fetch_add(1, Ordering::SeqCst),
            if role.is_empty() { "" } else { "-" }
        );
        run_ok(Command::new("ip").args(["netns", "add", &name]));
        let ns = Self { name };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    /// The namespace's nsfs handle, for nsenter and setns.
    pub fn path(&self) -> PathBuf {
        PathBuf::from("/run/netns").join(&self.name)
    }

    /// `ip -n NAME ARGS…`, failing the test when it fails.
    pub fn ip(&self, args: &[&str]) -> String {
        let out = run_ok(Command::new("ip").arg("-n").arg(&self.name).args(args));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `nsenter --net=… PROGRAM ARGS…`, which must succeed: its stdout.
    pub fn exec(&self, program: &str, args: &[&str]) -> String {
        let out = run_ok(self.command(program).args(args));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The names of the namespace's links.
    pub fn links(&self) -> Vec<String> {
        let v: serde_json::Value =
            serde_json::from_str(&self.ip(&["-j", "link", "show"])).expect("ip -j");
        v.as_array()
            .expect("links")
            .iter()
            .filter_map(|l| l["ifname"].as_str().map(str::to_string))
            .collect()
    }

    /// The global addresses on `dev`.
    pub fn addresses(&self, dev: &str) -> Vec<IpAddr> {
        let v: serde_json::Value =
            serde_json::from_str(&self.ip(&["-j", "addr", "show", "dev", dev])).expect("ip -j");
        v[0]["addr_info"]
            .as_array()
            .expect("addr_info")
            .iter()
            .filter(|a| a["scope"] == "global")
            .filter_map(|a| a["local"].as_str().and_then(|ip| ip.parse().ok()))
            .collect()
    }

    /// Every packet-filter rule of the namespace, iptables (both families) and nft.
    pub fn rules(&self) -> String {
        format!(
            "{}\n{}\n{}",
            self.exec("iptables-save", &[]),
            self.exec("ip6tables-save", &[]),
            self.exec("nft", &["list", "ruleset"])
        )
    }

    /// A command run inside the namespace (only its network: `nsenter --net`).
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("nsenter");
        c.arg(format!("--net={}", self.path().display()))
            .arg("--")
            .arg(program);
        c
    }

    /// Runs `f` on a thread that entered this namespace (sockets it makes stay in it,
    /// children it spawns inherit it).
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        in_netns(&self.path(), f)
    }

    /// Runs the async `body` on a current-thread runtime made on a thread inside this
    /// namespace: every socket, child process and helper thread it starts is in it.
    pub fn block_on<T: Send, F: std::future::Future<Output = T>>(
        &self,
        body: impl FnOnce() -> F + Send,
    ) -> T {
        self.run(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime")
                .block_on(body())
        })
    }

    /// Connects this namespace ("host") to a new one ("outside") by a veth pair:
    /// host 192.0.2.1/24 + 2001:db8:1::1/64, outside .2 / ::2, the outside being the
    /// host's default route (IPv4 and IPv6), as an uplink is.
    pub fn add_outside(&self) -> Outside {
        let outside = TestNetns::new();
        let host_if = format!("up{}", NETNS_SEQ.fetch_add(1, Ordering::SeqCst));
        run_ok(Command::new("ip").args([
            "-n",
            &self.name,
            "link",
            "add",
            &host_if,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            &outside.name,
        ]));
        self.ip(&["addr", "add", "192.0.2.1/24", "dev", &host_if]);
        self.ip(&[
            "-6",
            "addr",
            "add",
            "2001:db8:1::1/64",
            "dev",
            &host_if,
            "nodad",
        ]);
        self.ip(&["link", "set", &host_if, "up"]);
        self.ip(&["route", "add", "default", "via", "192.0.2.2"]);
        self.ip(&["-6", "route", "add", "default", "via", "2001:db8:1::2"]);
        outside.ip(&["addr", "add", "192.0.2.2/24", "dev", "eth0"]);
        outside.ip(&[
            "-6",
            "addr",
            "add",
            "2001:db8:1::2/64",
            "dev",
            "eth0",
            "nodad",
        ]);
        outside.ip(&["link", "set", "eth0", "up"]);
        Outside {
            ns: outside,
            host_v4: "192.0.2.1:0".parse().expect("addr"),
            host_v6: "[2001:db8:1::1]:0".parse().expect("addr"),
        }
    }
}

impl Default for TestNetns {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for TestNetns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// The "outside" of a test host: another namespace behind the host's uplink.
pub struct Outside {
    pub ns: TestNetns,
    /// The host's address on the uplink (port 0).
    pub host_v4: SocketAddr,
    pub host_v6: SocketAddr,
}

/// Deletes the test namespaces of test processes that are gone.
fn sweep_stale() {
    let Ok(entries) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !PathBuf::from(format!("/proc/{pid}")).exists() {
            let _ = Command::new("ip").args(["netns", "del", &name]).output();
        }
    }
}

/// Runs `f` on a fresh thread that has joined the network namespace at `path`.
pub fn in_netns<T: Send>(path: &Path, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            let ns = std::fs::File::open(path).expect("open netns");
            nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
            f()
        })
        .join()
        .expect("netns thread panicked")
    })
}

/// Runs `program args…`, failing the test with its stderr when it fails: its stdout.
pub fn run(program: &str, args: &[&str]) -> String {
    let out = run_ok(Command::new(program).args(args));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("run ip");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
