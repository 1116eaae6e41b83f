//! `kubectl exec` over a websocket (`v5.channel.k8s.io`, or `v4.channel.k8s.io`): the
//! handshake's answer, then one task pumping the client's stdin into the command and the
//! command's output back, and the exit status last.

use std::sync::Arc;

use futures::{SinkExt, StreamExt};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role};

use super::channel::{self, Incoming as ClientMessage};
use super::request::ExecRequest;
use crate::api::kubelet::KubeletRequestError;
use crate::api::server::Body;

/// How long the client has to answer the closing handshake.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The channel protocols served, most preferred first.
pub const PROTOCOLS: [&str; 2] = ["v5.channel.k8s.io", "v4.channel.k8s.io"];

/// A websocket upgrade request?
pub fn is_websocket(req: &Request<Incoming>) -> bool {
    req.headers()
        .get(hyper::header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// The first of our protocols the client offers.
pub fn choose_protocol(offered: &str) -> Option<&'static str> {
    let offered: Vec<&str> = offered.split(',').map(str::trim).collect();
    PROTOCOLS.into_iter().find(|p| offered.contains(p))
}

/// What the command to run is, once the upgrade is done.
pub struct Session {
    pub child: tokio::process::Child,
    pub request: ExecRequest,
}

/// Answers the handshake (101, or 400 naming what is missing) and, on success, runs
/// `start` after the upgrade and pumps its streams.
pub fn upgrade(
    mut req: Request<Incoming>,
    start: impl FnOnce() -> Result<Session, KubeletRequestError> + Send + 'static,
) -> Response<Body> {
    let key = req
        .headers()
        .get("sec-websocket-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let offered = req
        .headers()
        .get("sec-websocket-protocol")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let (Some(key), Some(protocol)) = (key, choose_protocol(&offered)) else {
        return crate::api::server::respond(
            400,
            "text/plain; charset=utf-8",
            format!(
                "a websocket exec needs Sec-WebSocket-Key and one of the protocols {PROTOCOLS:?} (offered: {offered:?})\n"
            )
            .into_bytes(),
        );
    };
    let on_upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let upgraded = match on_upgrade.await {
            Ok(u) => u,
            Err(e) => {
                tracing::debug!(error = %e, "exec: websocket upgrade failed");
                return;
            }
        };
        let ws = WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
        pump(ws, protocol, start()).await;
    });
    let mut resp = crate::api::server::respond(101, "text/plain", Vec::new());
    let headers = resp.headers_mut();
    headers.remove(hyper::header::CONTENT_TYPE);
    for (name, value) in [
        ("connection", "Upgrade".to_string()),
        ("upgrade", "websocket".to_string()),
        ("sec-websocket-accept", derive_accept_key(key.as_bytes())),
        ("sec-websocket-protocol", protocol.to_string()),
    ] {
        if let Ok(v) = value.parse() {
            headers.insert(name, v);
        }
    }
    resp
}

/// Reads `source` into messages of `stream` until its end.
fn forward<R: AsyncRead + Unpin + Send + 'static>(
    mut source: R,
    stream: u8,
    out: tokio::sync::mpsc::Sender<Vec<u8>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            match source.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if out.send(channel::frame(stream, &buf[..n])).await.is_err() {
                        break;
                    }
                }
            }
        }
    })
}

/// A normal closure (1000): kubectl takes it as every stream's end; a close frame
/// without a code (1005) is an error to it, even after the status.
async fn close_normally<K>(sink: &mut K)
where
    K: futures::Sink<Message> + Unpin,
{
    let normal = CloseFrame {
        code: CloseCode::Normal,
        reason: "".into(),
    };
    let _ = sink.send(Message::Close(Some(normal))).await;
}

async fn pump<S>(
    ws: WebSocketStream<S>,
    protocol: &str,
    session: Result<Session, KubeletRequestError>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sink, mut stream) = ws.split();
    let Session { mut child, request } = match session {
        Ok(s) => s,
        Err(refused) => {
            let status = channel::failure_status(&refused.to_string()).to_string();
            let _ = sink
                .send(Message::binary(channel::frame(
                    channel::ERROR,
                    status.as_bytes(),
                )))
                .await;
            close_normally(&mut sink).await;
            return;
        }
    };
    let (out_tx, mut out_rx) = tokio::sync::mpsc::channel::<Vec<u8>>(16);
    let mut forwarders = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        forwarders.push(forward(stdout, channel::STDOUT, out_tx.clone()));
    }
    if let Some(stderr) = child.stderr.take() {
        let stream = if request.tty {
            channel::STDOUT
        } else {
            channel::STDERR
        };
        forwarders.push(forward(stderr, stream, out_tx.clone()));
    }
    drop(out_tx);
    let stdin = Arc::new(tokio::sync::Mutex::new(child.stdin.take()));
    let v5 = protocol.starts_with("v5");
    // The client's messages: stdin until it closes it (v5), or the socket closes.
    let mut reader = {
        let stdin = stdin.clone();
        tokio::spawn(async move {
            while let Some(Ok(message)) = stream.next().await {
                let data = match &message {
                    Message::Binary(b) => b.to_vec(),
                    Message::Text(t) => t.as_bytes().to_vec(),
                    Message::Close(_) => break,
                    _ => continue,
                };
                match channel::parse(&data) {
                    ClientMessage::Stdin(bytes) => {
                        let mut guard = stdin.lock().await;
                        if let Some(pipe) = guard.as_mut()
                            && pipe.write_all(bytes).await.is_err()
                        {
                            *guard = None;
                        }
                    }
                    ClientMessage::Closed(channel::STDIN) if v5 => {
                        stdin.lock().await.take();
                    }
                    _ => {}
                }
            }
            // The client is gone or done writing: the command sees stdin's end.
            stdin.lock().await.take();
        })
    };
    // The command's output, in order per stream, until both pipes end.
    while let Some(message) = out_rx.recv().await {
        if sink.send(Message::binary(message)).await.is_err() {
            break;
        }
    }
    for f in forwarders {
        let _ = f.await;
    }
    let status = match child.wait().await {
        Ok(exit) => {
            let code = exit
                .code()
                .or_else(|| std::os::unix::process::ExitStatusExt::signal(&exit).map(|s| 128 + s))
                .unwrap_or(1);
            channel::exit_status(&request.command, code)
        }
        Err(e) => channel::failure_status(&format!("waiting for the command: {e}")),
    };
    let _ = sink
        .send(Message::binary(channel::frame(
            channel::ERROR,
            status.to_string().as_bytes(),
        )))
        .await;
    close_normally(&mut sink).await;
    // Wait for the client's close frame before the socket is dropped: closing it with
    // the client's bytes unread sends a reset, and a reset makes the peer throw away
    // what it has received but not yet read (the output's last messages, the status).
    if tokio::time::timeout(CLOSE_WAIT, &mut reader).await.is_err() {
        tracing::debug!("exec: the client did not answer the websocket close in time");
        reader.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v5_is_preferred_and_old_protocols_are_refused() {
        assert_eq!(
            choose_protocol("v4.channel.k8s.io, v5.channel.k8s.io"),
            Some("v5.channel.k8s.io")
        );
        assert_eq!(
            choose_protocol("v4.channel.k8s.io"),
            Some("v4.channel.k8s.io")
        );
        assert_eq!(
            choose_protocol("channel.k8s.io,base64.channel.k8s.io"),
            None
        );
    }
}
