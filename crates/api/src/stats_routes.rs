//! The statistics routes, `GET /stats/summary` (the kubelet's Summary API JSON),
//! `GET /metrics/cadvisor`, `GET /metrics/resource` and the daemon's own `GET /metrics`
//! (Prometheus text), as plain functions of the state so the read-only and the kubelet
//! API servers route to the same handlers.

use hyper::Response;

use super::server::{Body, error, ok_json, respond};
use podhost_stats::Collector;
use podhost_status::StatusStore;

/// The Prometheus text exposition format's content type.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `GET /stats/summary`: the node and every pod, at most a second old.
pub async fn stats_summary(stats: &Collector) -> Response<Body> {
    match stats.summary().await {
        Ok(summary) => ok_json(&summary),
        Err(e) => error(500, e.to_string()),
    }
}

/// `GET /metrics/resource`: the kubelet's resource metrics, what metrics-server reads.
pub async fn metrics_resource(stats: &Collector) -> Response<Body> {
    match stats.summary().await {
        Ok(summary) => respond(
            200,
            PROMETHEUS_TEXT,
            podhost_model::stats::resource::resource_metrics(&summary).into_bytes(),
        ),
        Err(e) => error(500, e.to_string()),
    }
}

/// `GET /metrics/cadvisor`: per-container and per-pod cpu, memory, io, network and
/// pressure with cadvisor's names and labels.
pub async fn metrics_cadvisor(stats: &Collector) -> Response<Body> {
    match stats.cadvisor_text().await {
        Ok(text) => respond(200, PROMETHEUS_TEXT, text.into_bytes()),
        Err(e) => error(500, e.to_string()),
    }
}

/// `GET /metrics`: the daemon's own metrics (the kubelet's names where it has one), in
/// the format the `Accept` header asks for.
pub fn daemon_metrics(store: &StatusStore, accept: Option<&str>) -> Response<Body> {
    let format = podhost_metrics::Format::from_accept(accept);
    let pods: Vec<k8s_openapi::api::core::v1::Pod> =
        store.pods().into_iter().map(|r| r.into_pod()).collect();
    let counts = podhost_metrics::PodCounts::of(&pods);
    match podhost_metrics::render(&counts, format) {
        Ok((body, content_type)) => respond(200, content_type, body.into_bytes()),
        Err(e) => error(500, e.to_string()),
    }
}
