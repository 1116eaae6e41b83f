//! Helpers of the CNI tests: network namespaces made per test (deleted on drop, even
//! when the test fails), running code inside one of them, a config list over Debian's
//! plugins, and what is left in a namespace (links, iptables/nft rules, IPAM files).

#![allow(dead_code)]

use std::fs::File;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use nix::sched::{CloneFlags, setns};

/// Debian's containernetworking-plugins.
pub const DEBIAN_CNI_BIN: &str = "/usr/lib/cni";

pub fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root (network namespaces, iptables): run it as root"
    );
    assert!(
        Path::new(DEBIAN_CNI_BIN).join("bridge").is_file(),
        "this test needs Debian's CNI plugins in {DEBIAN_CNI_BIN}: scripts/install-deps.sh installs them"
    );
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A named network namespace (`ip netns add`), deleted on drop.
pub struct Netns {
    pub name: String,
}

impl Netns {
    pub fn new(tag: &str) -> Self {
        let name = format!(
            "phcni{}-{}-{tag}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        run("ip", &["netns", "add", &name]);
        let ns = Self { name };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    pub fn path(&self) -> PathBuf {
        Path::new("/run/netns").join(&self.name)
    }

    /// `ip -n <ns> args…`, which must succeed.
    pub fn ip(&self, args: &[&str]) -> String {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// `ip netns exec <ns> cmd args…`, which must succeed.
    pub fn exec(&self, cmd: &str, args: &[&str]) -> String {
        let mut all = vec!["netns", "exec", self.name.as_str(), cmd];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// The names of the namespace's links.
    pub fn links(&self) -> Vec<String> {
        let v: serde_json::Value = serde_json::from_str(&self.ip(&["-j", "link", "show"])).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|l| l["ifname"].as_str().unwrap().to_string())
            .collect()
    }

    /// The global addresses on `dev`.
    pub fn addresses(&self, dev: &str) -> Vec<IpAddr> {
        let v: serde_json::Value =
            serde_json::from_str(&self.ip(&["-j", "addr", "show", "dev", dev])).unwrap();
        v[0]["addr_info"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["scope"] == "global")
            .map(|a| a["local"].as_str().unwrap().parse().unwrap())
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

    /// Runs `f` on a thread inside this namespace (children it spawns inherit it).
    pub fn run_in<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        in_netns(&self.path(), f)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// Runs `f` on a fresh thread that has joined the network namespace at `path`.
pub fn in_netns<T: Send>(path: &Path, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            let fd = File::open(path).unwrap();
            setns(&fd, CloneFlags::CLONE_NEWNET).unwrap();
            f()
        })
        .join()
        .unwrap()
    })
}

/// Runs `cmd args…`, panicking with its stderr when it fails; its stdout.
pub fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{cmd} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A config list over Debian's plugins: loopback, bridge `bridge` with dual-stack
/// host-local IPAM keeping its files in `ipam_dir`, portmap, firewall.
pub fn conflist(bridge: &str, ipam_dir: &Path, v4: &str, v6: &str) -> serde_json::Value {
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "podhost-test",
        "plugins": [
            {"type": "loopback"},
            {
                "type": "bridge",
                "bridge": bridge,
                "isGateway": true,
                "ipMasq": true,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "dataDir": ipam_dir,
                    "ranges": [[{"subnet": v4}], [{"subnet": v6}]],
                    "routes": [{"dst": "0.0.0.0/0"}, {"dst": "::/0"}]
                }
            },
            {"type": "portmap", "capabilities": {"portMappings": true}},
            {"type": "firewall"}
        ]
    })
}

/// The addresses host-local holds under `ipam_dir` (one file per address).
pub fn ipam_entries(ipam_dir: &Path) -> Vec<String> {
    let Ok(nets) = std::fs::read_dir(ipam_dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for net in nets {
        for f in std::fs::read_dir(net.unwrap().path()).unwrap() {
            let name = f.unwrap().file_name().into_string().unwrap();
            if name.parse::<IpAddr>().is_ok() {
                out.push(name);
            }
        }
    }
    out.sort();
    out
}

const IO_LIMIT: Option<Duration> = Some(Duration::from_secs(10));

/// A TCP listener made inside the namespace at `ns` (a socket stays in the namespace
/// it was made in, whichever thread uses it later).
pub fn tcp_listener(ns: &Path, addr: SocketAddr) -> TcpListener {
    in_netns(ns, || TcpListener::bind(addr).unwrap())
}

/// Serves one connection on `listener` on a thread: answers `pong <peer>` to what it
/// reads. The thread returns the peer's address.
pub fn serve_once(listener: TcpListener) -> std::thread::JoinHandle<SocketAddr> {
    std::thread::spawn(move || {
        let (mut conn, peer) = listener.accept().unwrap();
        conn.set_read_timeout(IO_LIMIT).unwrap();
        let mut buf = [0u8; 64];
        let n = conn.read(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"ping");
        conn.write_all(format!("pong {}", peer.ip()).as_bytes())
            .unwrap();
        peer
    })
}

/// From inside `ns`, connects to `to`, sends `ping` and returns the answer.
pub fn tcp_ping(ns: &Path, to: SocketAddr) -> String {
    in_netns(ns, || {
        let mut s = TcpStream::connect_timeout(&to, Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("connect to {to}: {e}"));
        s.set_read_timeout(IO_LIMIT).unwrap();
        s.write_all(b"ping").unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        answer
    })
}

/// A UDP socket made inside `ns`, answering one datagram with `pong` on a thread.
pub fn udp_echo_once(ns: &Path, addr: SocketAddr) -> std::thread::JoinHandle<()> {
    let sock = in_netns(ns, || UdpSocket::bind(addr).unwrap());
    std::thread::spawn(move || {
        sock.set_read_timeout(IO_LIMIT).unwrap();
        let mut buf = [0u8; 64];
        let (n, peer) = sock.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"ping");
        sock.send_to(b"pong", peer).unwrap();
    })
}

/// From inside `ns`, sends `ping` to `to` over UDP and returns the answer.
pub fn udp_ping(ns: &Path, to: SocketAddr) -> String {
    in_netns(ns, || {
        let any: SocketAddr = if to.is_ipv4() {
            "0.0.0.0:0".parse().unwrap()
        } else {
            "[::]:0".parse().unwrap()
        };
        let s = UdpSocket::bind(any).unwrap();
        s.set_read_timeout(IO_LIMIT).unwrap();
        s.send_to(b"ping", to).unwrap();
        let mut buf = [0u8; 64];
        let (n, _) = s
            .recv_from(&mut buf)
            .unwrap_or_else(|e| panic!("udp from {to}: {e}"));
        String::from_utf8_lossy(&buf[..n]).into_owned()
    })
}
