//! Connections to a pod: inside its network namespace, or on the host for hostNetwork.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use tokio::net::TcpStream;

use super::{HandlerTarget, PodNetwork, ProbeError};
use podhost_model::probe::Outcome;

/// The address of a pod without an IP: its loopback (the host's with hostNetwork).
pub const POD_LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// A long enough connect timeout for handlers run without one (hooks).
const NO_TIMEOUT_CONNECT: Duration = Duration::from_secs(3600);

/// `host` (the target's pod address when `None`) and `port` as a socket address; a
/// name is resolved by the host's resolver.
pub async fn address(
    target: &HandlerTarget,
    host: Option<&str>,
    port: u16,
) -> Result<SocketAddr, ProbeError> {
    let Some(host) = host else {
        return Ok(SocketAddr::new(target.pod_address(), port));
    };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    let resolve = |source| ProbeError::Resolve {
        host: host.to_string(),
        source,
    };
    tokio::net::lookup_host((host, port))
        .await
        .map_err(resolve)?
        .next()
        .ok_or_else(|| resolve(io::Error::new(io::ErrorKind::NotFound, "no address")))
}

/// Connects to `addr` in the target's network. Outer error: podhost's; inner: the
/// connection's.
pub async fn connect(
    target: &HandlerTarget,
    addr: SocketAddr,
    timeout: Option<Duration>,
) -> Result<io::Result<TcpStream>, ProbeError> {
    let timeout = timeout.unwrap_or(NO_TIMEOUT_CONNECT);
    match &target.network {
        PodNetwork::Host => Ok(
            match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
                Ok(r) => r,
                Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out")),
            },
        ),
        PodNetwork::Namespace(ns) => {
            Ok(podhost_runtime::netns_connect::connect_in_netns(ns, addr, timeout).await?)
        }
    }
}

/// Connects to `host:port` as [`connect`] does, folding both errors into an outcome:
/// the connection's is the probe's failure, podhost's is unknown.
pub async fn open(
    target: &HandlerTarget,
    host: Option<&str>,
    port: u16,
    timeout: Option<Duration>,
) -> Result<TcpStream, Outcome> {
    let addr = address(target, host, port)
        .await
        .map_err(|e| Outcome::Failure(e.to_string()))?;
    match connect(target, addr, timeout).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(Outcome::Failure(format!("dial tcp {addr}: {e}"))),
        Err(e) => Err(Outcome::Unknown(e.to_string())),
    }
}

/// tcpSocket: a connection is success.
pub async fn tcp_probe(
    target: &HandlerTarget,
    host: Option<&str>,
    port: u16,
    timeout: Option<Duration>,
) -> Outcome {
    match open(target, host, port, timeout).await {
        Ok(_) => Outcome::Success,
        Err(o) => o,
    }
}
