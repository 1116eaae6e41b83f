//! Helpers of the bridge network tests: network namespaces made per test (deleted by a
//! guard even when the test fails), async bodies run on a thread inside the "host"
//! namespace, and TCP/UDP servers and clients inside any namespace. The `ip` and `nft`
//! tools are used here only to build the test's world and to look at it.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::Path;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(5);

pub fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "the bridge network tests need root (network namespaces): run them as root"
    );
}

use crate::common::netns;
pub use netns::TestNetns as NetNs;

/// A TCP server in `ns` on `addr` (e.g. `[::]:80`, both families) answering every
/// connection with the address it came from; it lives as long as the test process.
pub fn tcp_who_am_i(ns: &NetNs, addr: &str) {
    let addr: SocketAddr = addr.parse().unwrap();
    let listener = ns.run(move || TcpListener::bind(addr).unwrap());
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
    let socket = ns.run(move || UdpSocket::bind(addr).unwrap());
    std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        while let Ok((_, peer)) = socket.recv_from(&mut buf) {
            let _ = socket.send_to(peer.ip().to_canonical().to_string().as_bytes(), peer);
        }
    });
}

/// Connects from `ns` to `addr` over TCP; the server's answer (who it saw), or the error.
/// "No route to host" right after a pod's network was set up is IPv6 neighbour
/// discovery that has not completed yet (the pod's veth and its bridge port come up
/// asynchronously in the kernel): that one error is retried for up to 5 s, any other
/// is the answer.
pub fn tcp_ask(ns: &NetNs, addr: SocketAddr) -> Result<String, String> {
    ns.run(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let connect = || loop {
            match TcpStream::connect_timeout(&addr, TIMEOUT) {
                Err(e)
                    if e.raw_os_error() == Some(libc::EHOSTUNREACH)
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(100));
                }
                other => return other,
            }
        };
        let mut s = connect().map_err(|e| format!("connect {addr}: {e}"))?;
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
    ns.run(move || {
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
    let outside = NetNs::with_role("out");
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
