//! `/portForward/{namespace}/{pod}` over SPDY/3.1 (`portforward.k8s.io`), as the API
//! server asks for `kubectl port-forward`: for every local connection the client opens
//! two streams sharing a `requestID` header — `streamtype: error` (which it closes at
//! once, and reads until this side ends it) and `streamtype: data` with the `port`.
//! The data stream is spliced to a TCP connection to that port on the pod's loopback,
//! made by the same [`PortForwardTarget`] as the local API's `podhost port-forward`;
//! a refused connection is a message on the error stream.

use std::collections::HashMap;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use super::spdy::handshake;
use super::spdy::headers::{self, Headers};
use super::spdy::session::{self, Event, Sender};
use crate::PortForwardTarget;
use crate::server::Body;
use podhost_status::PodRecord;

/// The stream protocols served.
pub const PROTOCOLS: [&str; 1] = ["portforward.k8s.io"];

/// Answers the upgrade for `rec`, then forwards the client's streams.
pub fn port_forward(
    rec: PodRecord,
    target: Arc<dyn PortForwardTarget>,
    mut req: Request<Incoming>,
) -> Response<Body> {
    if !handshake::is_spdy(&req) {
        return super::routes::text(
            400,
            "port-forward needs an upgrade to SPDY/3.1 (portforward.k8s.io)",
        );
    }
    let offered = handshake::offered(&req);
    let Some(protocol) = handshake::choose(&offered, &PROTOCOLS) else {
        return handshake::no_common_protocol(&offered, &PROTOCOLS);
    };
    tracing::info!(pod = rec.name(), "kubelet API: port-forward");
    let on_upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => serve(TokioIo::new(upgraded), rec, target).await,
            Err(e) => tracing::debug!(error = %e, "port-forward: SPDY upgrade failed"),
        }
    });
    handshake::switching_protocols(protocol)
}

/// One forwarded connection's two streams, as they are opened.
#[derive(Default)]
struct Pair {
    error: Option<u32>,
    data: Option<(u32, String)>,
}

fn header(headers: &Headers, name: &str) -> String {
    headers::get(headers, name).unwrap_or_default().to_string()
}

async fn serve<IO>(io: IO, rec: PodRecord, target: Arc<dyn PortForwardTarget>)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
{
    let (tx, mut events) = session::start(io);
    let mut pairs: HashMap<String, Pair> = HashMap::new();
    // What the client sends on each data stream, for its connection's writer; `None`
    // is the client's end (FIN or reset).
    let mut inputs: HashMap<u32, mpsc::UnboundedSender<Option<Vec<u8>>>> = HashMap::new();
    while let Some(event) = events.recv().await {
        match event {
            Event::Opened {
                stream, headers, ..
            } => {
                let request_id = header(&headers, "requestid");
                let pair = pairs.entry(request_id.clone()).or_default();
                match header(&headers, "streamtype").as_str() {
                    "error" => pair.error = Some(stream),
                    "data" => pair.data = Some((stream, header(&headers, "port"))),
                    other => tracing::debug!(kind = other, "port-forward: stream type ignored"),
                }
                if let Pair {
                    error: Some(error),
                    data: Some((data, port)),
                } = pair
                {
                    let (input_tx, input_rx) = mpsc::unbounded_channel();
                    inputs.insert(*data, input_tx);
                    tokio::spawn(forward(
                        rec.clone(),
                        target.clone(),
                        tx.clone(),
                        Streams {
                            error: *error,
                            data: *data,
                        },
                        port.clone(),
                        input_rx,
                    ));
                    pairs.remove(&request_id);
                }
            }
            Event::Data { stream, data, fin } => {
                if let Some(input) = inputs.get(&stream) {
                    if !data.is_empty() {
                        let _ = input.send(Some(data));
                    }
                    if fin {
                        let _ = input.send(None);
                        inputs.remove(&stream);
                    }
                }
            }
            Event::Reset { stream } => {
                if let Some(input) = inputs.remove(&stream) {
                    let _ = input.send(None);
                }
            }
            Event::GoAway | Event::Closed => break,
        }
    }
    // The client is done: every connection's writer sees its end.
    drop(inputs);
    tx.close().await;
}

#[derive(Clone, Copy)]
struct Streams {
    error: u32,
    data: u32,
}

/// Connects to `port` in the pod and splices it with the data stream; the error stream
/// carries a refusal, and ends when the connection does.
async fn forward(
    rec: PodRecord,
    target: Arc<dyn PortForwardTarget>,
    tx: Sender,
    streams: Streams,
    port: String,
    mut input: mpsc::UnboundedReceiver<Option<Vec<u8>>>,
) {
    let refuse = |message: String| {
        let tx = tx.clone();
        async move {
            tx.data(streams.error, message.as_bytes()).await;
            tx.finish(streams.error).await;
            tx.finish(streams.data).await;
        }
    };
    let Ok(port) = port.parse::<u16>() else {
        refuse(format!(
            "invalid port {port:?}: a port-forward needs a port 1-65535"
        ))
        .await;
        return;
    };
    let tcp = match target.connect(&rec, port).await {
        Ok(tcp) => tcp,
        Err(refused) => {
            refuse(refused.message).await;
            return;
        }
    };
    let (mut from_pod, mut to_pod) = tcp.into_split();
    let upstream = async move {
        while let Some(Some(bytes)) = input.recv().await {
            if to_pod.write_all(&bytes).await.is_err() {
                return;
            }
        }
        // The client's end becomes the pod's end of input.
        let _ = to_pod.shutdown().await;
    };
    let downstream = {
        let tx = tx.clone();
        async move {
            let mut buf = vec![0u8; 32 * 1024];
            loop {
                match from_pod.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if !tx.data(streams.data, &buf[..n]).await {
                            return;
                        }
                    }
                }
            }
            tx.finish(streams.data).await;
        }
    };
    tokio::join!(upstream, downstream);
    tx.finish(streams.error).await;
}
