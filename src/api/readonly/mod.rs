//! The read-only HTTP endpoint on TCP (the kubelet's `--read-only-port`): `/healthz`,
//! `/pods`, `/metrics`, and the stats paths. No authentication, so nothing here
//! changes anything or reads a container's output: exec, logs, port-forward and image
//! operations stay on the root-only unix socket. Off unless a flag turns it on; bound
//! to 127.0.0.1 by default.

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

use crate::status::StatusStore;

/// The port the kubelet's read-only endpoint uses, when only `--address` is given.
pub const DEFAULT_READ_ONLY_PORT: u16 = 10255;

/// The read-only endpoint cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ReadOnlyError {
    #[error(
        "--read-only-port/--address: cannot listen on {addr}: {source}; choose a free port \
         with --read-only-port, an address of this host with --address, or leave both out"
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
    pub health: crate::metrics::HealthRegistry,
    /// The same statistics the unix API serves (/stats/summary, /metrics/cadvisor).
    pub stats: Arc<crate::stats::Collector>,
}

/// The address to serve on from `--address` and `--read-only-port`: `None` (off) when
/// neither is given or the port is 0 (the kubelet's "disabled").
pub fn read_only_addr(address: Option<std::net::IpAddr>, port: Option<u16>) -> Option<SocketAddr> {
    if address.is_none() && port.is_none() {
        return None;
    }
    let port = port.unwrap_or(DEFAULT_READ_ONLY_PORT);
    let ip = address.unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
    (port != 0).then_some(SocketAddr::new(ip, port))
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
    fn off_unless_a_flag_is_given_and_the_kubelets_defaults_otherwise() {
        assert_eq!(read_only_addr(None, None), None);
        assert_eq!(read_only_addr(None, Some(0)), None);
        assert_eq!(
            read_only_addr(None, Some(8080)),
            Some("127.0.0.1:8080".parse().unwrap())
        );
        let any: IpAddr = "0.0.0.0".parse().unwrap();
        assert_eq!(
            read_only_addr(Some(any), None),
            Some("0.0.0.0:10255".parse().unwrap())
        );
    }
}
