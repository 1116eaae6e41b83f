//! The statistics routes, `GET /stats/summary` (the kubelet's Summary API JSON),
//! `GET /metrics/cadvisor` and `GET /metrics/resource` (Prometheus text), as plain
//! functions of the state so the read-only and the kubelet API servers route to the
//! same handlers.

use hyper::Response;

use super::server::{Body, error, ok_json, respond};
use crate::stats::Collector;

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
            crate::model::stats::resource::resource_metrics(&summary).into_bytes(),
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
