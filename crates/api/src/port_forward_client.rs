//! The CLI's side of `POST /pods/NAME/portforward`: one upgraded unix-socket connection
//! per forwarded TCP connection. Async (tokio), unlike the blocking [`super::client`]:
//! `podhost port-forward` serves many connections at once and never calls libcontainer.

use std::path::Path;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1;
use hyper::header::{CONNECTION, HOST, UPGRADE};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;

use super::client::ClientError;
use super::port_forward::PORT_FORWARD_UPGRADE;
use super::types::ApiStatus;

/// A byte stream to a port inside a pod (tokio `AsyncRead + AsyncWrite`); shutting down
/// its write side is a half-close the pod's side sees as end of input.
pub type PodStream = TokioIo<Upgraded>;

/// Connects through the daemon at `socket` to `port` of the pod at `pod_path` (its API
/// path, `/namespaces/NS/pods/NAME`; only while its UID is `uid`, when given). A refusal is [`ClientError::Status`] with the daemon's
/// message (it names the pod, the port and why).
pub async fn open_port_forward(
    socket: &Path,
    pod_path: &str,
    uid: Option<&str>,
    port: u16,
) -> Result<PodStream, ClientError> {
    let io_error = |source| ClientError::Io {
        socket: socket.to_path_buf(),
        source,
    };
    let stream = tokio::net::UnixStream::connect(socket)
        .await
        .map_err(|source| ClientError::Connect {
            socket: socket.to_path_buf(),
            source,
        })?;
    let (mut sender, connection) = http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| io_error(std::io::Error::other(e)))?;
    // Drives the connection until the answer, then hands its socket to the upgrade.
    tokio::spawn(async move {
        if let Err(e) = connection.with_upgrades().await {
            tracing::debug!(error = %e, "port-forward API connection ended");
        }
    });
    let mut path = format!("{pod_path}/portforward?port={port}");
    if let Some(uid) = uid {
        path.push_str(&format!("&uid={}", super::percent_encode(uid)));
    }
    let request = hyper::Request::post(path)
        .header(HOST, "podhost")
        .header(CONNECTION, "Upgrade")
        .header(UPGRADE, PORT_FORWARD_UPGRADE)
        .body(Empty::<Bytes>::new())
        .map_err(|e| ClientError::Protocol(e.to_string()))?;
    let answer = sender
        .send_request(request)
        .await
        .map_err(|e| io_error(std::io::Error::other(e)))?;
    let code = answer.status().as_u16();
    if code == 101 {
        let upgraded = hyper::upgrade::on(answer)
            .await
            .map_err(|e| io_error(std::io::Error::other(e)))?;
        return Ok(TokioIo::new(upgraded));
    }
    let body = answer
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let message = serde_json::from_slice::<ApiStatus>(&body)
        .map(|s| s.message)
        .unwrap_or_else(|_| String::from_utf8_lossy(&body).into_owned());
    Err(ClientError::Status { code, message })
}
