//! The HTTP server on the unix socket.

use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::{UnixListener, UnixStream};

use super::access::{AccessError, SocketAccess};
use super::socket::ClaimedSocket;
use podhost_disk::Layout;
use podhost_image::ImageStore;
use podhost_runtime::peer_cred::peer_cred;
use podhost_status::StatusStore;

/// What the handlers read (and the one thing they change: the image store, via load).
#[derive(Debug)]
pub struct ApiState {
    pub store: Arc<StatusStore>,
    /// The node as it would register (`/node`), without its conditions (the store's).
    pub node: Arc<k8s_openapi::api::core::v1::Node>,
    pub images: Arc<ImageStore>,
    pub layout: Layout,
    pub images_changed: tokio::sync::watch::Sender<u64>,
    pub puller: podhost_image::pull::Puller,
    pub gc: Arc<dyn super::GcTrigger>,
    /// Adds ephemeral containers (`podhost debug`).
    pub ephemeral: Arc<dyn super::EphemeralTarget>,
    /// Connects into pods (`podhost port-forward`).
    pub port_forward: Arc<dyn super::PortForwardTarget>,
    pub leases: podhost_image::gc::ImageLeases,
    /// Node, pod and container statistics (`/stats/summary`, `/metrics/cadvisor`).
    pub stats: Arc<podhost_stats::Collector>,
}

pub type Body = BoxBody<Bytes, Infallible>;

/// The running API server; [`ApiServer::stop`] ends it and removes its socket.
#[derive(Debug)]
pub struct ApiServer {
    task: Option<tokio::task::JoinHandle<()>>,
    abort: tokio::task::AbortHandle,
    path: PathBuf,
    identity: (u64, u64),
}

impl ApiServer {
    /// The accept loop's task, for the daemon to watch (once; later `None`). It runs
    /// until [`ApiServer::stop`]; its ending earlier means the API is gone.
    pub fn take_task(&mut self) -> Option<tokio::task::JoinHandle<()>> {
        self.task.take()
    }

    /// Stops accepting and removes the socket, unless someone replaced it meanwhile.
    pub fn stop(self) {
        self.abort.abort();
        super::socket::remove_if_ours(&self.path, self.identity);
    }
}

/// Serves on a claimed socket until stopped. Every connection's peer (as the kernel
/// recorded it at connect time) is checked first; one that may not use the API gets a
/// 403 and the connection is closed.
pub fn serve(socket: ClaimedSocket, state: Arc<ApiState>) -> std::io::Result<ApiServer> {
    let path = socket.path.clone();
    let identity = socket.identity;
    let access = Arc::new(socket.access);
    let listener = UnixListener::from_std(socket.listener)?;
    // The lock keeps other daemons off the socket for as long as this task runs.
    let lock = socket.lock;
    let socket_path = path.clone();
    let task = tokio::spawn(async move {
        let _lock = lock;
        loop {
            let stream = match listener.accept().await {
                Ok((s, _)) => s,
                Err(e) => {
                    tracing::warn!(error = %e, socket = %socket_path.display(), "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            let state = state.clone();
            let access = access.clone();
            tokio::spawn(async move { serve_connection(stream, state, &access).await });
        }
    });
    Ok(ApiServer {
        abort: task.abort_handle(),
        task: Some(task),
        path,
        identity,
    })
}

async fn serve_connection(stream: UnixStream, state: Arc<ApiState>, access: &SocketAccess) {
    let verdict = match peer_cred(&stream) {
        Ok(peer) => access.check(&peer).map_err(|why| {
            tracing::warn!(
                pid = peer.pid,
                uid = peer.uid,
                gid = peer.gid,
                "API connection refused: {why}"
            );
            why
        }),
        Err(e) => {
            tracing::warn!(error = %e, "API connection refused: cannot read the peer's credentials");
            Err(AccessError::NoCredentials(e))
        }
    };
    let io = TokioIo::new(stream);
    let result = match verdict {
        Ok(()) => {
            let service = service_fn(move |req: Request<Incoming>| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(super::routes::handle(state, req).await) }
            });
            // Upgrades: a port-forward request turns its connection into a raw stream.
            http1::Builder::new()
                .serve_connection(io, service)
                .with_upgrades()
                .await
        }
        Err(why) => {
            let why = why.to_string();
            // One answer, then the connection is closed.
            let service = service_fn(move |_req: Request<Incoming>| {
                let why = why.clone();
                async move { Ok::<_, Infallible>(error(403, why)) }
            });
            http1::Builder::new()
                .keep_alive(false)
                .serve_connection(io, service)
                .await
        }
    };
    if let Err(e) = result {
        tracing::debug!(error = %e, "API connection ended");
    }
}

/// A streaming `application/x-ndjson` response of the lines sent on `rx` (each one
/// JSON value and its newline); it ends when every sender is gone.
pub fn ndjson_response(rx: tokio::sync::mpsc::Receiver<Vec<u8>>) -> Response<Body> {
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| {
            (
                Ok::<_, Infallible>(hyper::body::Frame::data(Bytes::from(chunk))),
                rx,
            )
        })
    });
    let mut resp = Response::new(http_body_util::BodyExt::boxed(
        http_body_util::StreamBody::new(stream),
    ));
    if let Ok(v) = "application/x-ndjson".parse() {
        resp.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    resp
}

pub fn ok_json<T: serde::Serialize>(value: &T) -> Response<Body> {
    let body = serde_json::to_vec_pretty(value).unwrap_or_default();
    respond(200, "application/json", body)
}

pub fn error(code: u16, message: impl Into<String>) -> Response<Body> {
    let body = serde_json::to_vec_pretty(&super::types::ApiStatus::failure(code, message))
        .unwrap_or_default();
    respond(code, "application/json", body)
}

pub fn respond(code: u16, content_type: &str, body: Vec<u8>) -> Response<Body> {
    use http_body_util::BodyExt;
    let mut resp = Response::new(http_body_util::Full::new(Bytes::from(body)).boxed());
    *resp.status_mut() = hyper::StatusCode::from_u16(code).unwrap_or(hyper::StatusCode::OK);
    if let Ok(v) = content_type.parse() {
        resp.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    resp
}
