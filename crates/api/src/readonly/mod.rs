//! The read-only HTTP endpoint on TCP (the kubelet's `--read-only-port`): `/healthz`,
//! `/pods`, `/metrics`, and the stats paths. No authentication, so nothing here
//! changes anything or reads a container's output: exec, logs, port-forward and image
//! operations stay on the root-only unix socket. Off unless `--read-only-port` (or
//! `readOnlyPort`) turns it on — `--address` alone never does, since it is the kubelet
//! API's address too; bound to 127.0.0.1 unless `--address` says otherwise, with a
//! warning at start when that address reaches beyond this host.

mod routes;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use hyper::Request;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use podhost_status::StatusStore;

/// The read-only endpoint cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ReadOnlyError {
    #[error(
        "--read-only-port/--address: cannot listen on {addr}: {source}; choose a free port \
         with --read-only-port, an address of this host with --address, or leave \
         --read-only-port out"
    )]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// What the read-only handlers read.
#[derive(Debug, Clone)]
pub struct ReadOnlyState {
    pub store: Arc<StatusStore>,
    pub health: podhost_metrics::HealthRegistry,
    /// The same statistics the unix API serves (/stats/summary, /metrics/cadvisor).
    pub stats: Arc<podhost_stats::Collector>,
}

/// The address to serve on from `--address` and `--read-only-port`: `None` (off)
/// unless the port is given and not 0 (the kubelet's "disabled"). `--address` only
/// moves an endpoint the port opened (default 127.0.0.1): it is also the kubelet API's
/// address, and asking for that must not publish pod specs (env values included)
/// without authentication.
pub fn read_only_addr(address: Option<std::net::IpAddr>, port: Option<u16>) -> Option<SocketAddr> {
    let port = port.filter(|p| *p != 0)?;
    let ip = address.unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
    Some(SocketAddr::new(ip, port))
}

/// True when `addr` is reachable from other hosts: anything but a loopback address
/// (an unspecified one such as 0.0.0.0 listens on every interface). An IPv4 address
/// written as IPv6 (`::ffff:127.0.0.1`) counts as the IPv4 one.
pub fn reaches_the_network(addr: &SocketAddr) -> bool {
    !addr.ip().to_canonical().is_loopback()
}

/// Binds `addr` now (so that a taken port fails the daemon's start-up) and serves on it
/// in the returned task until it is aborted.
pub async fn serve(
    addr: SocketAddr,
    state: ReadOnlyState,
) -> Result<tokio::task::JoinHandle<()>, ReadOnlyError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ReadOnlyError::Bind { addr, source })?;
    tracing::info!(%addr, "read-only HTTP endpoint listening (/healthz /pods /metrics)");
    if reaches_the_network(&addr) {
        tracing::warn!(
            %addr,
            "the read-only HTTP endpoint is not on a loopback address: it serves every \
             pod's spec (env values included) and statistics to the network without \
             authentication; bind it to 127.0.0.1 with --address, or leave --read-only-port \
             out"
        );
    }
    let state = Arc::new(state);
    Ok(tokio::spawn(async move {
        loop {
            let stream = match listener.accept().await {
                Ok((s, _)) => s,
                Err(e) => {
                    // Out of fds, mostly: wait instead of spinning.
                    tracing::warn!(error = %e, %addr, "read-only endpoint: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            let state = state.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<Incoming>| {
                    let state = state.clone();
                    async move { Ok::<_, Infallible>(routes::handle(&state, &req).await) }
                });
                if let Err(e) = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await
                {
                    tracing::debug!(error = %e, "read-only connection ended");
                }
            });
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    #[test]
    fn only_the_port_opens_it_and_address_alone_never_does() {
        let any: IpAddr = "0.0.0.0".parse().unwrap();
        assert_eq!(read_only_addr(None, None), None);
        assert_eq!(read_only_addr(None, Some(0)), None);
        assert_eq!(read_only_addr(Some(any), None), None, "--address alone");
        assert_eq!(read_only_addr(Some(any), Some(0)), None, "port 0 is off");
        assert_eq!(
            read_only_addr(None, Some(8080)),
            Some("127.0.0.1:8080".parse().unwrap())
        );
        assert_eq!(
            read_only_addr(Some(any), Some(10255)),
            Some("0.0.0.0:10255".parse().unwrap())
        );
    }

    #[test]
    fn only_loopback_addresses_stay_on_the_host() {
        for local in [
            "127.0.0.1:10255",
            "127.8.9.10:1",
            "[::1]:10255",
            "[::ffff:127.0.0.1]:1",
        ] {
            assert!(!reaches_the_network(&local.parse().unwrap()), "{local}");
        }
        for exposed in [
            "0.0.0.0:10255",
            "[::]:10255",
            "192.0.2.7:10255",
            "[2001:db8::1]:1",
        ] {
            assert!(reaches_the_network(&exposed.parse().unwrap()), "{exposed}");
        }
    }
}
