//! Helpers of the bridge network tests: network namespaces made per test (deleted by a
//! guard even when the test fails), async bodies run on a thread inside the "host"
//! namespace, and TCP/UDP servers and clients inside any namespace. The `ip` and `nft`
//! tools are used here only to build the test's world and to look at it.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use nix::sched::{CloneFlags, setns};

const TIMEOUT: Duration = Duration::from_secs(5);

pub fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "the bridge network tests need root (network namespaces): run them as root"
    );
}

/// Runs `ip` (or another tool) and fails the test with its output when it fails.
pub fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} {args:?}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A network namespace pinned at /run/netns/<name>, deleted on drop.
pub struct NetNs {
    pub name: String,
}

static SEQ: AtomicU32 = AtomicU32::new(0);

impl NetNs {
    pub fn new(role: &str) -> Self {
        let name = format!(
            "phb{}-{}-{role}",
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

    /// `ip -n <ns> args…`
    pub fn ip(&self, args: &[&str]) -> String {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// `ip netns exec <ns> program args…`
    pub fn exec(&self, program: &str, args: &[&str]) -> String {
        let mut all = vec!["netns", "exec", self.name.as_str(), program];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// Runs `f` on a thread inside this namespace and returns its result.
    pub fn within<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = self.path();
        std::thread::spawn(move || {
            let ns = std::fs::File::open(&path).unwrap();
            setns(ns, CloneFlags::CLONE_NEWNET).unwrap();
            f()
        })
        .join()
        .unwrap()
    }

    /// Runs the async `body` on a current-thread runtime made on a thread inside this
    /// namespace: every socket, child process (nft) and helper thread it starts is in
    /// this namespace, the test's stand-in for the host.
    pub fn block_on<T: Send + 'static, F: std::future::Future<Output = T>>(
        &self,
        body: impl FnOnce() -> F + Send + 'static,
    ) -> T {
        self.within(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(body())
        })
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// A TCP server in `ns` on `addr` (e.g. `[::]:80`, both families) answering every
/// connection with the address it came from; it lives as long as the test process.
pub fn tcp_who_am_i(ns: &NetNs, addr: &str) {
    let addr: SocketAddr = addr.parse().unwrap();
    let listener = ns.within(move || TcpListener::bind(addr).unwrap());
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let peer = stream
                .peer_addr()
                .map(|p| p.ip().to_canonical().to_string());
            let _ = stream.write_all(peer.unwrap_or_default().as_bytes());
        }
    });
}

/// The same over UDP: every datagram is answered with its source address.
pub fn udp_who_am_i(ns: &NetNs, addr: &str) {
    let addr: SocketAddr = addr.parse().unwrap();
    let socket = ns.within(move || UdpSocket::bind(addr).unwrap());
    std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        while let Ok((_, peer)) = socket.recv_from(&mut buf) {
            let _ = socket.send_to(peer.ip().to_canonical().to_string().as_bytes(), peer);
        }
    });
}

/// Connects from `ns` to `addr` over TCP; the server's answer (who it saw), or the error.
pub fn tcp_ask(ns: &NetNs, addr: SocketAddr) -> Result<String, String> {
    ns.within(move || {
        let mut s = TcpStream::connect_timeout(&addr, TIMEOUT)
            .map_err(|e| format!("connect {addr}: {e}"))?;
        s.set_read_timeout(Some(TIMEOUT))
            .map_err(|e| e.to_string())?;
        let mut answer = String::new();
        s.read_to_string(&mut answer)
            .map_err(|e| format!("read from {addr}: {e}"))?;
        Ok(answer)
    })
}

/// Sends a datagram from `ns` to `addr`; the server's answer, or the error.
pub fn udp_ask(ns: &NetNs, addr: SocketAddr) -> Result<String, String> {
    ns.within(move || {
        let any: SocketAddr = if addr.is_ipv4() {
            "0.0.0.0:0"
        } else {
            "[::]:0"
        }
        .parse()
        .unwrap();
        let s = UdpSocket::bind(any).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(TIMEOUT))
            .map_err(|e| e.to_string())?;
        s.send_to(b"hi", addr)
            .map_err(|e| format!("send to {addr}: {e}"))?;
        let mut buf = [0u8; 64];
        let (n, _) = s
            .recv_from(&mut buf)
            .map_err(|e| format!("receive from {addr}: {e}"))?;
        Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
    })
}

/// The "outside": a namespace veth'd to `host` with 192.0.2.2/24 and 2001:db8:1::2/64
/// (the host side gets .1/::1 and default routes through it), as another machine on
/// the host's network.
pub fn outside_of(host: &NetNs) -> NetNs {
    let outside = NetNs::new("out");
    host.ip(&[
        "link",
        "add",
        "uplink",
        "type",
        "veth",
        "peer",
        "name",
        "downlink",
        "netns",
        &outside.name,
    ]);
    host.ip(&["addr", "add", "192.0.2.1/24", "dev", "uplink"]);
    host.ip(&["addr", "add", "2001:db8:1::1/64", "dev", "uplink", "nodad"]);
    host.ip(&["link", "set", "uplink", "up"]);
    outside.ip(&["addr", "add", "192.0.2.2/24", "dev", "downlink"]);
    outside.ip(&[
        "addr",
        "add",
        "2001:db8:1::2/64",
        "dev",
        "downlink",
        "nodad",
    ]);
    outside.ip(&["link", "set", "downlink", "up"]);
    host.ip(&["route", "add", "default", "via", "192.0.2.2"]);
    host.ip(&["-6", "route", "add", "default", "via", "2001:db8:1::2"]);
    outside
}

/// What is left of pod networks in `host` and `state_dir`: veths on the bridge, DNAT
/// rules in podhost's table, routes to pod addresses, IPAM entries and records.
pub fn leftovers(host: &NetNs, bridge: &str, state_dir: &Path) -> Vec<String> {
    let mut left = Vec::new();
    for line in host.ip(&["-o", "link", "show", "master", bridge]).lines() {
        left.push(format!("link: {line}"));
    }
    let table = host.exec("nft", &["list", "table", "inet", "podhost"]);
    for line in table.lines().filter(|l| l.contains("dnat ip")) {
        left.push(format!("nft: {}", line.trim()));
    }
    for family in ["-4", "-6"] {
        for line in host
            .ip(&[family, "route", "show"])
            .lines()
            .filter(|l| l.contains("veth") && !l.starts_with("fe80::"))
        {
            left.push(format!("route: {line}"));
        }
    }
    for sub in ["ipam", "pods"] {
        let dir = state_dir.join(sub);
        let Ok(ranges) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in ranges.flatten() {
            let p = entry.path();
            if p.is_dir() {
                for f in std::fs::read_dir(&p).unwrap().flatten() {
                    let name = f.file_name().to_string_lossy().into_owned();
                    if name.parse::<std::net::IpAddr>().is_ok() {
                        left.push(format!("ipam: {}", f.path().display()));
                    }
                }
            } else {
                left.push(format!("record: {}", p.display()));
            }
        }
    }
    left
}
