//! The daemon's Prometheus metrics and its health registry, process-wide.
//!
//! Other modules report what happened with one call each (`crate::
//! container_started(..)`); the read-only HTTP server renders the registry on
//! `/metrics` and asks [`health`] for `/healthz`. Names are the kubelet's where it has
//! one (`pkg/kubelet/metrics`), `podhost_*` otherwise. Counters, histograms and their
//! label sets live in [`registry`]; the gauges of pods and containers by state are
//! computed from the pods at each scrape ([`pod_counts`]), so they can never drift from
//! the status the API shows.
//!
//! In the workspace (docs/architecture.md, "Crates"): uses no crate of the workspace. It
//! may not: any I/O: the read-only server (api) renders the registry.

pub mod health;
mod labels;
mod pod_counts;
mod registry;
mod render;

use std::time::Duration;

pub use health::{HealthRegistry, Heartbeat, Stuck, health};
pub use labels::{ContainerType, ProbeSeries};
pub use pod_counts::PodCounts;
pub use render::{Format, to_prometheus_text};

/// Rendering the registry failed.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The encoder refused a value (a bug in a metric's label set).
    #[error("cannot encode the metrics registry: {0}")]
    Encode(#[from] std::fmt::Error),
}

/// The kubelet saw the pod (its worker started): the pod start latency runs from now.
pub fn pod_seen(uid: &str) {
    registry::get().pod_seen(uid);
}

/// The pod reached Running for the first time: observes its start latency once.
pub fn pod_running(uid: &str) {
    registry::get().pod_running(uid);
}

/// The pod's worker ended: a pod that never ran is not measured.
pub fn pod_forgotten(uid: &str) {
    registry::get().pod_forgotten(uid);
}

/// A container's shim started it (`kubelet_started_containers_total`).
pub fn container_started(container_type: ContainerType) {
    registry::get().container_started(container_type);
}

/// A container could not be started; `code` is the waiting reason the pod shows
/// (`ErrImagePull`, `CreateContainerConfigError`, `StartError`, …).
pub fn container_start_failed(container_type: ContainerType, code: &str) {
    registry::get().container_start_failed(container_type, code);
}

/// A container was started again after an earlier instance ran.
pub fn container_restarted(namespace: &str, pod: &str, container: &str) {
    registry::get().container_restarted(namespace, pod, container);
}

/// The kernel OOM killer killed a process: `in_pod` when it was in one of podhost's
/// pods, `system` when the whole machine ran out of memory.
pub fn oom_kill(system: bool, in_pod: bool) {
    registry::get().oom_kill(system, in_pod);
}

/// A probe ran (every run, as `prober_probe_total` counts them).
pub fn probe_ran(series: &ProbeSeries, probe_type: &'static str, result: &'static str) {
    registry::get().probe_ran(series, probe_type, result);
}

/// An image pull finished: how long it took, the image's size (its layers) and what
/// was downloaded (layers not already stored).
pub fn image_pulled(elapsed: Duration, image_bytes: u64, downloaded_bytes: u64) {
    registry::get().image_pulled(elapsed, image_bytes, downloaded_bytes);
}

/// An image GC pass deleted `images` images and freed `bytes`.
pub fn image_gc_freed(bytes: u64, images: usize) {
    registry::get().image_gc_freed(bytes, images);
}

/// A container GC pass removed `count` dead containers.
pub fn containers_collected(count: usize) {
    registry::get().containers_collected(count);
}

/// A pod was evicted for `signal` (`memory.available`, `nodefs.available`, …).
pub fn eviction(signal: &str) {
    registry::get().eviction(signal);
}

/// One pass of a pod worker's sync loop (decide and act) took `elapsed`.
pub fn pod_sync(elapsed: Duration) {
    registry::get().pod_sync(elapsed);
}

/// The registry as text in `format`, with the pod and container gauges set from
/// `counts` first. Returns the body and its content type.
pub fn render(counts: &PodCounts, format: Format) -> Result<(String, &'static str), MetricsError> {
    registry::get().render(counts, format)
}
