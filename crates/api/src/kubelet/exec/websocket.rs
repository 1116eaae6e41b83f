//! `kubectl exec` over a websocket (`v5.channel.k8s.io`, `v4.channel.k8s.io`, or the
//! first protocol, `channel.k8s.io`, which older clients and Kubernetes' own e2e tests
//! speak): the handshake's answer, then one task pumping the client's stdin into the
//! command and the command's output back, and the exit status last.

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
use super::process::FIRST_SIZE_WAIT;
use super::process::{Started as Session, final_status};
use super::resize::{ResizeDecoder, TerminalSize};
use crate::kubelet::KubeletRequestError;
use crate::server::Body;
use tokio_tungstenite::tungstenite::Error as WsError;

/// How long the client has to answer the closing handshake.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The channel protocols served, most preferred first.
pub const PROTOCOLS: [&str; 3] = ["v5.channel.k8s.io", "v4.channel.k8s.io", "channel.k8s.io"];

/// The first protocol: its error stream carries a failure's text only, and a success
/// nothing (the kubelet's remotecommand v1).
const V1: &str = "channel.k8s.io";

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

/// Answers the handshake (101, or 400 naming what is missing) and, on success, runs
/// `start` after the upgrade and pumps its streams.
pub fn upgrade<F, Fut>(mut req: Request<Incoming>, tty: bool, start: F) -> Response<Body>
where
    F: FnOnce(Option<TerminalSize>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<Session, KubeletRequestError>> + Send,
{
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
        return crate::server::respond(
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
        let (sink, mut stream) = ws.split();
        let (size, early) = if tty {
            first_size(&mut stream).await
        } else {
            (None, Vec::new())
        };
        let stream = futures::stream::iter(early.into_iter().map(Ok)).chain(stream);
        pump(sink, stream, protocol, start(size).await).await;
    });
    let mut resp = crate::server::respond(101, "text/plain", Vec::new());
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

/// The client's first terminal size (kubectl sends it right after connecting), waited
/// for up to [`FIRST_SIZE_WAIT`]; the messages that came first, to be read again.
async fn first_size<S>(stream: &mut S) -> (Option<TerminalSize>, Vec<Message>)
where
    S: futures::Stream<Item = Result<Message, WsError>> + Unpin,
{
    let mut early = Vec::new();
    let mut decoder = ResizeDecoder::default();
    let deadline = tokio::time::Instant::now() + FIRST_SIZE_WAIT;
    while let Ok(Some(Ok(message))) = tokio::time::timeout_at(deadline, stream.next()).await {
        let size = match &message {
            Message::Binary(b) => match channel::parse(b) {
                ClientMessage::Resize(json) => decoder.push(json).pop(),
                _ => None,
            },
            _ => None,
        };
        let closed = matches!(message, Message::Close(_));
        early.push(message);
        if size.is_some() || closed {
            return (size, early);
        }
    }
    (None, early)
}

async fn pump<K, S>(
    mut sink: K,
    mut stream: S,
    protocol: &str,
    session: Result<Session, KubeletRequestError>,
) where
    K: futures::Sink<Message> + Unpin,
    S: futures::Stream<Item = Result<Message, WsError>> + Unpin + Send + 'static,
{
    let Session {
        mut child,
        request,
        mut terminal,
    } = match session {
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
        forwarders.push(forward(stderr, channel::STDERR, out_tx.clone()));
    }
    // On a terminal, stdout and stderr are both the terminal's output.
    if let Some(output) = terminal.as_mut().and_then(|t| t.take_output()) {
        forwarders.push(forward(output, channel::STDOUT, out_tx.clone()));
    }
    drop(out_tx);
    let stdin = Arc::new(tokio::sync::Mutex::new(child.stdin.take()));
    let v5 = protocol.starts_with("v5");
    // The client's messages: stdin until it closes it (v5), or the socket closes.
    let mut reader = {
        let stdin = stdin.clone();
        let mut resize = ResizeDecoder::default();
        tokio::spawn(async move {
            while let Some(Ok(message)) = stream.next().await {
                let data = match &message {
                    Message::Binary(b) => b.to_vec(),
                    Message::Text(t) => t.as_bytes().to_vec(),
                    Message::Close(_) => break,
                    _ => continue,
                };
                match channel::parse(&data) {
                    ClientMessage::Stdin(bytes) if terminal.is_some() => {
                        if let Some(t) = terminal.as_mut() {
                            t.write_input(bytes).await;
                        }
                    }
                    ClientMessage::Resize(bytes) => {
                        for size in resize.push(bytes) {
                            if let Some(t) = terminal.as_ref() {
                                t.resize(size);
                            }
                        }
                    }
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
    let status = final_status(&mut child, &request.command).await;
    let error = if protocol == V1 {
        // v1 has no status object: the failure's message as text, nothing on success.
        status["message"].as_str().map(|m| m.as_bytes().to_vec())
    } else {
        Some(status.to_string().into_bytes())
    };
    if let Some(error) = error {
        let _ = sink
            .send(Message::binary(channel::frame(channel::ERROR, &error)))
            .await;
    }
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
    fn v5_is_preferred_then_v4_then_the_first_protocol_and_base64_is_refused() {
        assert_eq!(
            choose_protocol("channel.k8s.io, v4.channel.k8s.io, v5.channel.k8s.io"),
            Some("v5.channel.k8s.io")
        );
        assert_eq!(
            choose_protocol("channel.k8s.io, v4.channel.k8s.io"),
            Some("v4.channel.k8s.io")
        );
        assert_eq!(
            choose_protocol("channel.k8s.io,base64.channel.k8s.io"),
            Some("channel.k8s.io")
        );
        assert_eq!(choose_protocol("base64.channel.k8s.io"), None);
    }
}
