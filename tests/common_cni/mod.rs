//! Helpers of the CNI tests: network namespaces made per test (deleted on drop, even
//! when the test fails), running code inside one of them, a config list over Debian's
//! plugins, and what is left in a namespace (links, iptables/nft rules, IPAM files).

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::Path;
use std::time::Duration;

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

use crate::common::netns;
mod plugins;
pub use netns::{TestNetns as Netns, in_netns};
pub use plugins::{DEBIAN_CNI_BIN, conflist, ipam_entries};

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
