//! Serves recorded exchanges (`record`) back to a kube client, for tests of the node
//! logic against what a real API server answered. Requests are matched by method and
//! path, in the order they were recorded for that pair (the lease and status loops run
//! concurrently, so only each pair's own order is fixed). What was asked is kept, so a
//! test checks what the node sent as well as what it did with the answers.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame};
use hyper::{Request, Response};

use super::ClusterError;
use super::record::Exchange;

/// The recorded exchanges still to serve, and what was asked.
#[derive(Clone, Default)]
pub struct Replay {
    state: Arc<Mutex<ReplayState>>,
}

#[derive(Default)]
struct ReplayState {
    queues: HashMap<(String, String), VecDeque<Exchange>>,
    asked: Vec<Exchange>,
    unexpected: Vec<String>,
}

impl Replay {
    /// Loads a record file (`--kube-record`'s JSON lines).
    pub fn load(path: &Path) -> Result<Self, ClusterError> {
        let bad = |reason: String| ClusterError::Fixture {
            path: path.to_path_buf(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let mut exchanges = Vec::new();
        for (n, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let exchange: Exchange =
                serde_json::from_str(line).map_err(|e| bad(format!("line {}: {e}", n + 1)))?;
            exchanges.push(exchange);
        }
        Ok(Self::from_exchanges(exchanges))
    }

    pub fn from_exchanges(exchanges: Vec<Exchange>) -> Self {
        let mut state = ReplayState::default();
        for exchange in exchanges {
            state
                .queues
                .entry((exchange.method.clone(), exchange.path.clone()))
                .or_default()
                .push_back(exchange);
        }
        Self {
            state: Arc::new(Mutex::new(state)),
        }
    }

    /// A kube client served by this replay.
    pub fn client(&self) -> kube::Client {
        kube::Client::new(self.clone(), "default")
    }

    /// Every request served so far, with its body, in arrival order.
    pub fn asked(&self) -> Vec<Exchange> {
        self.lock().asked.clone()
    }

    /// Requests that had no recorded answer left (method and path).
    pub fn unexpected(&self) -> Vec<String> {
        self.lock().unexpected.clone()
    }

    /// How many recorded exchanges were not asked for.
    pub fn left(&self) -> usize {
        self.lock().queues.values().map(VecDeque::len).sum()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ReplayState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn answer(
        &self,
        method: String,
        path: String,
        query: String,
        body: Bytes,
    ) -> Response<ReplayBody> {
        let mut state = self.lock();
        let next = state
            .queues
            .get_mut(&(method.clone(), path.clone()))
            .and_then(VecDeque::pop_front);
        let watch = query.split('&').any(|p| p == "watch=true");
        state.asked.push(Exchange {
            method: method.clone(),
            path: path.clone(),
            query,
            request: serde_json::from_slice(&body).ok(),
            status: next.as_ref().map_or(0, |e| e.status),
            response: String::new(),
        });
        let (status, body) = match next {
            Some(exchange) => (
                exchange.status,
                ReplayBody::Once(Some(exchange.response.into())),
            ),
            // A watch with nothing more recorded stays open and quiet, as a real one
            // with no events does.
            None if watch => (200, ReplayBody::Quiet),
            None => {
                state.unexpected.push(format!("{method} {path}"));
                let status = serde_json::json!({
                    "kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "message": format!("no recorded answer for {method} {path}"),
                    "reason": "InternalError", "code": 500
                });
                (500, ReplayBody::Once(Some(status.to_string().into())))
            }
        };
        let mut response = Response::new(body);
        *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or_default();
        response.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("application/json"),
        );
        response
    }
}

impl tower::Service<Request<kube::client::Body>> for Replay {
    type Response = Response<ReplayBody>;
    type Error = std::convert::Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<kube::client::Body>) -> Self::Future {
        let replay = self.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let body = body.collect_bytes().await.unwrap_or_default();
            Ok(replay.answer(
                parts.method.to_string(),
                parts.uri.path().to_string(),
                parts.uri.query().unwrap_or("").to_string(),
                body,
            ))
        })
    }
}

/// A recorded body, or a watch that stays open with nothing to say.
pub enum ReplayBody {
    Once(Option<Bytes>),
    Quiet,
}

impl HttpBody for ReplayBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.get_mut() {
            ReplayBody::Once(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            ReplayBody::Quiet => Poll::Pending,
        }
    }
}
