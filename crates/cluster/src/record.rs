//! `--kube-record FILE`: every exchange with the API server as one JSON line (method,
//! path and query, request body, status, response body — a watch's events as they
//! arrived), for debugging a node; the live cluster tests read what the node sent from
//! it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use hyper::{Request, Response};
use serde::{Deserialize, Serialize};

use super::ClusterError;

/// One request and its answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Exchange {
    pub method: String,
    pub path: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub query: String,
    /// The request's JSON body, if it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<serde_json::Value>,
    pub status: u16,
    /// The response's body as text (a watch: its event lines).
    pub response: String,
}

/// Where exchanges are written, shared by every request of one client.
#[derive(Clone)]
pub struct Recorder {
    file: Arc<Mutex<std::fs::File>>,
    path: PathBuf,
}

impl Recorder {
    /// Creates (truncates) the record file.
    pub fn create(path: &Path) -> Result<Self, ClusterError> {
        let file = std::fs::File::create(path).map_err(|source| ClusterError::RecordFile {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Self {
            file: Arc::new(Mutex::new(file)),
            path: path.to_path_buf(),
        })
    }

    fn write(&self, exchange: &Exchange) {
        let Ok(mut line) = serde_json::to_vec(exchange) else {
            return;
        };
        line.push(b'\n');
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(error) = file.write_all(&line) {
            tracing::warn!(path = %self.path.display(), %error, "cannot record an API exchange");
        }
    }
}

impl<S> tower::Layer<S> for Recorder {
    type Service = Recording<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Recording {
            inner,
            recorder: self.clone(),
        }
    }
}

/// The client's service with every exchange recorded.
#[derive(Clone)]
pub struct Recording<S> {
    inner: S,
    recorder: Recorder,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<S, B> tower::Service<Request<kube::client::Body>> for Recording<S>
where
    S: tower::Service<Request<kube::client::Body>, Response = Response<B>> + Send,
    S::Future: Send + 'static,
    B: HttpBody<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<TeeBody<B>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<kube::client::Body>) -> Self::Future {
        let uri = request.uri();
        let mut exchange = Exchange {
            method: request.method().to_string(),
            path: uri.path().to_string(),
            query: uri.query().unwrap_or("").to_string(),
            request: None,
            status: 0,
            response: String::new(),
        };
        let body_copy = request.body().try_clone();
        let recorder = self.recorder.clone();
        let answer = self.inner.call(request);
        Box::pin(async move {
            if let Some(copy) = body_copy
                && let Ok(bytes) = copy.collect_bytes().await
            {
                exchange.request = serde_json::from_slice(&bytes).ok();
            }
            let response = answer.await?;
            exchange.status = response.status().as_u16();
            Ok(response.map(|inner| TeeBody {
                inner,
                seen: Vec::new(),
                pending: Some((exchange, recorder)),
            }))
        })
    }
}

/// A response body that keeps a copy of what passed and records the exchange when it
/// ends — or when it is dropped, as a watch is when the client stops.
pub struct TeeBody<B> {
    inner: B,
    seen: Vec<u8>,
    pending: Option<(Exchange, Recorder)>,
}

impl<B> TeeBody<B> {
    fn finish(&mut self) {
        if let Some((mut exchange, recorder)) = self.pending.take() {
            exchange.response = String::from_utf8_lossy(&self.seen).into_owned();
            recorder.write(&exchange);
        }
    }
}

impl<B> Drop for TeeBody<B> {
    fn drop(&mut self) {
        self.finish();
    }
}

impl<B> HttpBody for TeeBody<B>
where
    B: HttpBody<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    let data = data.clone();
                    self.seen.extend_from_slice(&data);
                }
            }
            Poll::Ready(None) => self.finish(),
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
