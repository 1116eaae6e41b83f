//! The HTTP server on the unix socket.

use std::convert::Infallible;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::UnixListener;

use crate::image::ImageStore;
use crate::runtime::paths::Layout;
use crate::status::StatusStore;

/// What the handlers read (and the one thing they change: the image store, via load).
#[derive(Debug)]
pub struct ApiState {
    pub store: Arc<StatusStore>,
    pub images: Arc<ImageStore>,
    pub layout: Layout,
    pub images_changed: tokio::sync::watch::Sender<u64>,
    pub puller: crate::image::pull::Puller,
    pub gc: std::sync::Arc<crate::gc::runner::GcRunner>,
    pub leases: crate::image::gc::ImageLeases,
}

pub type Body = BoxBody<Bytes, Infallible>;

/// Binds the socket (mode 0600, replacing a stale one) and serves until the task ends.
pub async fn serve(
    socket: &Path,
    state: Arc<ApiState>,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    if let Some(dir) = socket.parent() {
        std::fs::create_dir_all(dir)?;
    }
    match std::fs::remove_file(socket) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = UnixListener::bind(socket)?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))?;
    let socket: PathBuf = socket.to_path_buf();
    Ok(tokio::spawn(async move {
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, socket = %socket.display(), "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            let state = state.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<Incoming>| {
                    let state = state.clone();
                    async move { Ok::<_, Infallible>(super::routes::handle(state, req).await) }
                });
                if let Err(e) = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await
                {
                    tracing::debug!(error = %e, "API connection ended");
                }
            });
        }
    }))
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
