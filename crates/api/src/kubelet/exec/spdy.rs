//! `kubectl exec` over SPDY/3.1 (what kubectl sends with websockets off, and what an
//! API server older than 1.30 asks the kubelet for): the `X-Stream-Protocol-Version`
//! handshake, then the client opens one SPDY stream per channel, told apart by their
//! `streamtype` header (error, stdin, stdout, stderr, resize). The command starts once
//! every stream the request asked for is open, as the kubelet's remotecommand server
//! does; its exit ends on the error stream as the same status the websocket path
//! writes (v4), or as plain text on failure only (v2, v3).

use std::collections::HashMap;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::process::{FIRST_SIZE_WAIT, Started, final_status};
use super::request::ExecRequest;
use super::resize::{ResizeDecoder, TerminalSize};
use crate::kubelet::KubeletRequestError;
use crate::kubelet::spdy::session::{self, Event, Sender};
use crate::kubelet::spdy::{handshake, headers};
use crate::server::Body;

/// The channel protocols served over SPDY, most preferred first (v5 is websocket-only).
pub const PROTOCOLS: [&str; 3] = [
    "v4.channel.k8s.io",
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
];
/// How long the client has to open the streams it asked for (the kubelet's default).
const STREAM_CREATION_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the client has to close the connection after the status.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// The stream types an exec waits for before its command starts.
fn expected_streams(request: &ExecRequest, protocol: &str) -> Vec<&'static str> {
    let mut wanted = vec!["error"];
    if request.stdin {
        wanted.push("stdin");
    }
    if request.stdout {
        wanted.push("stdout");
    }
    if request.stderr && !request.tty {
        wanted.push("stderr");
    }
    if request.tty && protocol != "v2.channel.k8s.io" {
        wanted.push("resize");
    }
    wanted
}

/// Answers the handshake (101, or 403 naming the protocols served) and, on success,
/// serves the exec on the upgraded connection; `start` runs the command.
pub fn upgrade<F, Fut>(mut req: Request<Incoming>, request: ExecRequest, start: F) -> Response<Body>
where
    F: FnOnce(Option<TerminalSize>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<Started, KubeletRequestError>> + Send,
{
    let offered = handshake::offered(&req);
    let Some(protocol) = handshake::choose(&offered, &PROTOCOLS) else {
        return handshake::no_common_protocol(&offered, &PROTOCOLS);
    };
    let on_upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => serve(TokioIo::new(upgraded), protocol, request, start).await,
            Err(e) => tracing::debug!(error = %e, "exec: SPDY upgrade failed"),
        }
    });
    handshake::switching_protocols(protocol)
}

/// The client's streams by type, and what came on them before the command started.
#[derive(Default)]
struct Streams {
    ids: HashMap<&'static str, u32>,
    early: Vec<Event>,
}

impl Streams {
    fn id(&self, kind: &str) -> Option<u32> {
        self.ids.get(kind).copied()
    }
}

/// Waits until every expected stream is open; `None` when the client went away or
/// took too long.
async fn collect_streams(
    events: &mut tokio::sync::mpsc::Receiver<Event>,
    expected: &[&'static str],
) -> Result<Streams, Streams> {
    let mut streams = Streams::default();
    let deadline = tokio::time::Instant::now() + STREAM_CREATION_TIMEOUT;
    while expected.iter().any(|k| !streams.ids.contains_key(k)) {
        let event = match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Some(event)) => event,
            Ok(None) | Err(_) => return Err(streams),
        };
        match event {
            Event::Opened {
                stream, headers, ..
            } => {
                let kind = headers::get(&headers, "streamtype").unwrap_or_default();
                match expected.iter().find(|k| **k == kind) {
                    Some(known) => {
                        streams.ids.insert(known, stream);
                    }
                    None => tracing::debug!(kind, "exec: SPDY stream of an unexpected type"),
                }
            }
            Event::Closed => return Err(streams),
            other => streams.early.push(other),
        }
    }
    Ok(streams)
}

/// The client's first terminal size (kubectl sends it as soon as its streams are open),
/// waited for up to [`FIRST_SIZE_WAIT`]; what else comes meanwhile is kept for later.
async fn first_size(
    events: &mut tokio::sync::mpsc::Receiver<Event>,
    streams: &mut Streams,
    resize: u32,
) -> Option<TerminalSize> {
    let mut decoder = ResizeDecoder::default();
    for early in &streams.early {
        if let Event::Data { stream, data, .. } = early
            && *stream == resize
            && let Some(size) = decoder.push(data).pop()
        {
            return Some(size);
        }
    }
    let deadline = tokio::time::Instant::now() + FIRST_SIZE_WAIT;
    while let Ok(Some(event)) = tokio::time::timeout_at(deadline, events.recv()).await {
        let size = match &event {
            Event::Data { stream, data, .. } if *stream == resize => decoder.push(data).pop(),
            _ => None,
        };
        let closed = matches!(event, Event::Closed);
        streams.early.push(event);
        if size.is_some() || closed {
            return size;
        }
    }
    None
}

/// What the client's events do to the running command.
struct Inputs {
    stdin_id: Option<u32>,
    resize_id: Option<u32>,
    stdin: Option<tokio::process::ChildStdin>,
    resize: ResizeDecoder,
    terminal: Option<super::pty::Terminal>,
}

impl Inputs {
    async fn apply(&mut self, event: Event) -> bool {
        match event {
            Event::Data { stream, data, fin } => {
                if Some(stream) == self.stdin_id {
                    if let Some(pipe) = self.stdin.as_mut()
                        && pipe.write_all(&data).await.is_err()
                    {
                        self.stdin = None;
                    }
                    if let Some(t) = self.terminal.as_mut() {
                        t.write_input(&data).await;
                    }
                    if fin {
                        // The command sees stdin's end (a terminal has no end of input:
                        // the client types ^D for that, as runc's exec -t).
                        self.stdin = None;
                    }
                } else if Some(stream) == self.resize_id {
                    for size in self.resize.push(&data) {
                        if let Some(t) = self.terminal.as_ref() {
                            t.resize(size);
                        }
                    }
                }
                true
            }
            Event::Reset { stream } => {
                if Some(stream) == self.stdin_id {
                    self.stdin = None;
                }
                true
            }
            Event::Opened { .. } | Event::GoAway => true,
            Event::Closed => false,
        }
    }
}

/// Copies `source` onto `stream` and ends the stream when the source ends.
fn forward<R: AsyncRead + Unpin + Send + 'static>(
    mut source: R,
    stream: u32,
    tx: Sender,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            match source.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if !tx.data(stream, &buf[..n]).await {
                        return;
                    }
                }
            }
        }
        tx.finish(stream).await;
    })
}

/// The status on the error stream in the protocol's form.
fn status_bytes(protocol: &str, status: &serde_json::Value) -> Vec<u8> {
    if protocol == "v4.channel.k8s.io" {
        return status.to_string().into_bytes();
    }
    // v2/v3: nothing on success, the message on failure.
    if status["status"] == "Success" {
        return Vec::new();
    }
    status["message"]
        .as_str()
        .unwrap_or("command failed")
        .as_bytes()
        .to_vec()
}

async fn end_with_status(tx: &Sender, error_stream: Option<u32>, bytes: &[u8]) {
    if let Some(id) = error_stream {
        if !bytes.is_empty() {
            tx.data(id, bytes).await;
        }
        tx.finish(id).await;
    }
}

async fn serve<IO, F, Fut>(io: IO, protocol: &'static str, request: ExecRequest, start: F)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
    F: FnOnce(Option<TerminalSize>) -> Fut,
    Fut: Future<Output = Result<Started, KubeletRequestError>>,
{
    let (tx, mut events) = session::start(io);
    let expected = expected_streams(&request, protocol);
    let mut streams = match collect_streams(&mut events, &expected).await {
        Ok(streams) => streams,
        Err(partial) => {
            tracing::debug!(?expected, opened = ?partial.ids, "exec: the client did not open its SPDY streams");
            let status =
                super::channel::failure_status("timed out waiting for client to create streams");
            end_with_status(&tx, partial.id("error"), &status_bytes(protocol, &status)).await;
            tx.go_away(0).await;
            finish_connection(tx, &mut events).await;
            return;
        }
    };
    let size = match streams.id("resize") {
        Some(resize) => first_size(&mut events, &mut streams, resize).await,
        None => None,
    };
    let error_stream = streams.id("error");
    let last_stream = streams.ids.values().copied().max().unwrap_or(0);
    let Started {
        mut child,
        request,
        terminal,
    } = match start(size).await {
        Ok(started) => started,
        Err(refused) => {
            let status = super::channel::failure_status(&refused.to_string());
            end_with_status(&tx, error_stream, &status_bytes(protocol, &status)).await;
            tx.go_away(last_stream).await;
            finish_connection(tx, &mut events).await;
            return;
        }
    };
    let mut forwarders = Vec::new();
    if let (Some(stdout), Some(id)) = (child.stdout.take(), streams.id("stdout")) {
        forwarders.push(forward(stdout, id, tx.clone()));
    }
    if let (Some(stderr), Some(id)) = (child.stderr.take(), streams.id("stderr")) {
        forwarders.push(forward(stderr, id, tx.clone()));
    }
    let mut terminal = terminal;
    if let (Some(output), Some(id)) = (
        terminal.as_mut().and_then(|t| t.take_output()),
        streams.id("stdout"),
    ) {
        forwarders.push(forward(output, id, tx.clone()));
    }
    let mut inputs = Inputs {
        stdin_id: streams.id("stdin"),
        resize_id: streams.id("resize"),
        stdin: child.stdin.take(),
        resize: ResizeDecoder::default(),
        terminal,
    };
    // Streams a request did not ask for are never read: the client gets their end now.
    for early in streams.early {
        inputs.apply(early).await;
    }
    let mut input_task = tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            if !inputs.apply(event).await {
                break;
            }
        }
    });
    for f in forwarders {
        let _ = f.await;
    }
    let status = final_status(&mut child, &request.command).await;
    end_with_status(&tx, error_stream, &status_bytes(protocol, &status)).await;
    tx.go_away(last_stream).await;
    tx.close().await;
    drop(tx);
    // The client closes the connection once it has the status (and this side's end);
    // wait for that before dropping it, so that no unread client bytes turn the close
    // into a reset that could discard what the client has not read yet.
    if tokio::time::timeout(CLOSE_WAIT, &mut input_task)
        .await
        .is_err()
    {
        tracing::debug!("exec: the SPDY client did not close the connection in time");
        input_task.abort();
    }
}

/// Shuts this side's writing and waits for the client to close.
async fn finish_connection(tx: Sender, events: &mut tokio::sync::mpsc::Receiver<Event>) {
    tx.close().await;
    drop(tx);
    let _ = tokio::time::timeout(CLOSE_WAIT, async {
        while let Some(event) = events.recv().await {
            if matches!(event, Event::Closed) {
                break;
            }
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_follow_the_request() {
        let all = ExecRequest {
            command: vec!["sh".into()],
            stdin: true,
            stdout: true,
            stderr: true,
            tty: false,
        };
        assert_eq!(
            expected_streams(&all, "v4.channel.k8s.io"),
            vec!["error", "stdin", "stdout", "stderr"]
        );
        let tty = ExecRequest { tty: true, ..all };
        assert_eq!(
            expected_streams(&tty, "v4.channel.k8s.io"),
            vec!["error", "stdin", "stdout", "resize"]
        );
        assert_eq!(
            expected_streams(&tty, "v2.channel.k8s.io"),
            vec!["error", "stdin", "stdout"]
        );
    }

    #[test]
    fn old_protocols_carry_only_a_failures_message() {
        let ok = super::super::channel::exit_status(&[], 0);
        let failed = super::super::channel::exit_status(&["false".into()], 1);
        assert_eq!(status_bytes("v3.channel.k8s.io", &ok), b"");
        assert!(
            String::from_utf8(status_bytes("v3.channel.k8s.io", &failed))
                .unwrap()
                .contains("exit code 1")
        );
        let v4: serde_json::Value =
            serde_json::from_slice(&status_bytes("v4.channel.k8s.io", &failed)).unwrap();
        assert_eq!(v4["reason"], "NonZeroExitCode");
    }
}
