//! The read-only endpoint's paths. GET and HEAD only.

use hyper::body::Incoming;
use hyper::{Method, Request, Response};

use super::ReadOnlyState;
use crate::server::{Body, respond};

/// The kubelet's debugging handlers (exec, attach, logs, port-forward, profiling…):
/// never served here; they answer as the kubelet's do when they are disabled.
const DEBUG_PATHS: [&str; 11] = [
    "run",
    "exec",
    "attach",
    "portForward",
    "containerLogs",
    "runningpods",
    "logs",
    "debug",
    "configz",
    "checkpoint",
    "cri",
];

const TEXT: &str = "text/plain; charset=utf-8";

pub async fn handle(state: &ReadOnlyState, req: &Request<Incoming>) -> Response<Body> {
    let path = req.uri().path();
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let first = parts.first().copied().unwrap_or_default();
    if DEBUG_PATHS.contains(&first) {
        return text(405, "Debug endpoints are disabled.\n");
    }
    let known = matches!(
        parts.as_slice(),
        ["healthz"]
            | ["pods"]
            | ["metrics"]
            | ["metrics", "cadvisor"]
            | ["metrics", "resource"]
            | ["stats", "summary"]
    );
    if !known {
        return text(404, &format!("404 page not found: {path}\n"));
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut resp = text(
            405,
            &format!(
                "{} is not allowed: this endpoint is read-only (GET, HEAD)\n",
                req.method()
            ),
        );
        resp.headers_mut().insert(
            hyper::header::ALLOW,
            hyper::header::HeaderValue::from_static("GET, HEAD"),
        );
        return resp;
    }
    match parts.as_slice() {
        ["healthz"] => healthz(state),
        ["pods"] => pods(state),
        ["metrics"] => metrics(state, req),
        ["stats", "summary"] => crate::stats_routes::stats_summary(&state.stats).await,
        ["metrics", "cadvisor"] => crate::stats_routes::metrics_cadvisor(&state.stats).await,
        ["metrics", "resource"] => crate::stats_routes::metrics_resource(&state.stats).await,
        _ => text(404, &format!("404 page not found: {path}\n")),
    }
}

fn text(code: u16, body: &str) -> Response<Body> {
    respond(code, TEXT, body.as_bytes().to_vec())
}

/// 200 `ok`, or 500 with one line per stuck component.
fn healthz(state: &ReadOnlyState) -> Response<Body> {
    let stuck = state.health.check();
    if stuck.is_empty() {
        return text(200, "ok");
    }
    let mut body: String = stuck.iter().map(|s| format!("{s}\n")).collect();
    body.push_str("healthz check failed\n");
    text(500, &body)
}

/// A `v1.PodList`, as the unix API's `/pods`.
fn pods(state: &ReadOnlyState) -> Response<Body> {
    let list = state.store.pod_list();
    match serde_json::to_vec(&list) {
        Ok(body) => respond(200, "application/json", body),
        Err(e) => text(500, &format!("cannot encode the pod list: {e}\n")),
    }
}

fn metrics(state: &ReadOnlyState, req: &Request<Incoming>) -> Response<Body> {
    let accept = req
        .headers()
        .get(hyper::header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    crate::stats_routes::daemon_metrics(&state.store, accept)
}
