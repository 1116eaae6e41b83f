//! The kubelet API on `--address`:`--port` (10250) in cluster mode, over TLS: what the
//! API server calls for `kubectl logs` and `kubectl exec` (`/containerLogs`, `/exec`),
//! `/portForward` (`kubectl port-forward`), and `/healthz`, `/pods`. Unlike the read-only endpoint, every request is
//! authenticated (a client certificate of `--client-ca-file`, or a bearer token
//! reviewed by the API server) and authorized by a SubjectAccessReview, so it may run
//! commands and read output. The API server comes with its `--kubelet-client-certificate`.

mod exec;
mod gate;
pub mod identity;
mod port_forward;
pub mod review_cache;
pub mod reviewer;
mod routes;
pub mod spdy;
pub mod tls;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use hyper::Request;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

pub use review_cache::CachingReviewer;
pub use reviewer::{AccessReviewer, ReviewError};
pub use tls::ServingCert;

use podhost_disk::Layout;
use podhost_model::kubelet_auth::UserInfo;
use podhost_status::StatusStore;

/// The kubelet API cannot start.
#[derive(Debug, thiserror::Error)]
pub enum KubeletApiError {
    #[error(
        "--port/--address: cannot listen on {addr} for the kubelet API: {source}; choose a free \
         port with --port"
    )]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// A PEM file has no usable content.
    #[error("cannot read the {what} in {path}: {reason}")]
    Pem {
        path: PathBuf,
        what: &'static str,
        reason: String,
    },
    #[error("cannot make a self-signed serving certificate in {dir}: {reason}")]
    SelfSigned { dir: PathBuf, reason: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("--client-ca-file {path}: {reason}")]
    ClientCa { path: PathBuf, reason: String },
    #[error("TLS settings of the kubelet API: {0}")]
    Tls(String),
}

/// A request the kubelet API cannot serve; its message is the answer's body.
#[derive(Debug, thiserror::Error)]
pub enum KubeletRequestError {
    #[error("pod \"{namespace}/{pod}\" does not exist")]
    NoSuchPod { namespace: String, pod: String },
    /// The container is not one of the pod's.
    #[error(transparent)]
    Container(#[from] crate::request_error::RequestError),
    /// The exec helper could not be started.
    #[error("cannot start podhost exec-helper ({exe}): {source}")]
    ExecHelper {
        exe: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What the kubelet API's handlers read.
#[derive(Debug, Clone)]
pub struct KubeletApiState {
    pub store: Arc<StatusStore>,
    pub layout: Layout,
    /// This node's name: what requests are authorized against (`nodes/<name>`).
    pub node_name: String,
    pub reviewer: Arc<dyn AccessReviewer>,
    /// The podhost binary, whose `exec-helper` runs an exec's command in the container.
    pub podhost_exe: PathBuf,
    /// Opens `/portForward`'s connections into pods.
    pub port_forward: Arc<dyn crate::PortForwardTarget>,
    /// `/stats/summary`, `/metrics/cadvisor` and `/metrics/resource` (the daemon's
    /// collector); `None` where a server is built for its other paths only, which then
    /// answers 503 there.
    pub stats: Option<Arc<podhost_stats::Collector>>,
}

/// Binds `addr` now (a taken port fails the daemon's start) and serves on it until the
/// returned task is aborted.
pub async fn serve(
    addr: SocketAddr,
    tls: Arc<ServerConfig>,
    state: KubeletApiState,
) -> Result<tokio::task::JoinHandle<()>, KubeletApiError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| KubeletApiError::Bind { addr, source })?;
    Ok(serve_listener(listener, tls, state))
}

/// Serves on an already bound `listener` until the returned task is aborted (tests bind
/// port 0 and read the port from the listener: no window for another to take it).
pub fn serve_listener(
    listener: TcpListener,
    tls: Arc<ServerConfig>,
    state: KubeletApiState,
) -> tokio::task::JoinHandle<()> {
    let addr = listener
        .local_addr()
        .map_or_else(|_| "unknown".to_string(), |a| a.to_string());
    tracing::info!(%addr, "kubelet API listening (TLS; /containerLogs /exec /portForward /healthz /pods)");
    let acceptor = TlsAcceptor::from(tls);
    let state = Arc::new(state);
    tokio::spawn(async move {
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, %addr, "kubelet API: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            // Exec and port-forward answer in small frames (a SYN_REPLY per stream the
            // client waits for): Nagle would hold each behind the peer's delayed ACK.
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!(error = %e, %peer, "kubelet API: cannot set TCP_NODELAY");
            }
            let acceptor = acceptor.clone();
            let state = state.clone();
            tokio::spawn(async move {
                let stream = match acceptor.accept(stream).await {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::debug!(error = %e, %peer, "kubelet API: TLS handshake failed");
                        return;
                    }
                };
                // rustls verified the chain against the client CA before this point.
                let certificate_user: Option<UserInfo> = stream
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|chain| chain.first())
                    .and_then(|leaf| identity::user_of_certificate(leaf));
                let service = service_fn(move |req: Request<Incoming>| {
                    let state = state.clone();
                    let user = certificate_user.clone();
                    async move { Ok::<_, Infallible>(routes::handle(state, user, req).await) }
                });
                if let Err(e) = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .with_upgrades()
                    .await
                {
                    tracing::debug!(error = %e, %peer, "kubelet API connection ended");
                }
            });
        }
    })
}
