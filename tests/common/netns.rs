//! Network namespaces that stand in for "the host" (a test daemon's) and "the outside",
//! so that network tests never touch the machine's real network and run in parallel.
//! Named (`ip netns add`) so that `ip -n`, `nsenter` and the daemon can all find them;
//! deleted on drop, and stale ones of dead test processes are swept first.

use std::net::SocketAddr;
use std::path::PathBuf;
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
        sweep_stale();
        let name = format!(
            "{PREFIX}{}-{}",
            std::process::id(),
            NETNS_SEQ.fetch_add(1, Ordering::SeqCst)
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

    /// A command run inside the namespace (only its network: `nsenter --net`).
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("nsenter");
        c.arg(format!("--net={}", self.path().display()))
            .arg("--")
            .arg(program);
        c
    }

    /// Runs `f` on a thread that entered this namespace (sockets it makes stay in it).
    pub fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = self.path();
        std::thread::spawn(move || {
            let ns = std::fs::File::open(&path).expect("open netns");
            nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
            f()
        })
        .join()
        .expect("netns thread panicked")
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

fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("run ip");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
