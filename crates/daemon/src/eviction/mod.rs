//! The eviction manager (reference kubelet-semantics.md §10): every
//! `--eviction-monitoring-period` it reads the node's signals, raises and clears the
//! node conditions (MemoryPressure, DiskPressure, PIDPressure), and when a threshold is
//! met (hard at once, soft after its grace period) first reclaims node-level resources
//! for disk signals (dead containers, unused images), then evicts at most one pod,
//! ranked as the kubelet ranks them.
//!
//! Unlike the kubelet, which never evicts static pods, podhost evicts them (all its
//! pods are static); a pod annotated `podhost.io/critical: "true"` is never evicted.
//! An evicted pod stays Failed (reason Evicted) until its manifest changes.
//!
//! The pure parts (thresholds, grace periods, conditions, ranking, message) are in
//! `podhost_model::eviction`; this module reads and acts.

mod manager;
pub mod pod_usage;
pub mod signals;

use std::sync::Arc;
use std::time::Duration;

pub use podhost_model::eviction::EvictionConfigError;
use podhost_model::eviction::{Threshold, parse_thresholds};

/// The eviction manager's settings (the `--eviction-*` flags).
#[derive(Debug, Clone, PartialEq)]
pub struct EvictionSettings {
    pub thresholds: Vec<Threshold>,
    /// `--eviction-max-pod-grace-period` (seconds; ≤ 0: the pod's own grace).
    pub max_pod_grace_period: i64,
    /// `--eviction-pressure-transition-period`.
    pub pressure_transition_period: Duration,
    /// `--eviction-monitoring-period`.
    pub monitoring_period: Duration,
}

impl EvictionSettings {
    /// From the flags' text (`--eviction-hard` replaces every default when given).
    pub fn from_flags(
        hard: &str,
        soft: &str,
        soft_grace: &str,
        min_reclaim: &str,
        max_pod_grace_period: i64,
        pressure_transition_period: Duration,
        monitoring_period: Duration,
    ) -> Result<Self, EvictionConfigError> {
        Ok(Self {
            thresholds: parse_thresholds(hard, soft, soft_grace, min_reclaim)?,
            max_pod_grace_period,
            pressure_transition_period,
            monitoring_period,
        })
    }
}

/// An eviction for the daemon to deliver to the pod's worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvictionOrder {
    pub uid: String,
    pub name: String,
    /// The pod's status message (the kubelet's).
    pub message: String,
    /// How long its containers get to stop.
    pub grace: Duration,
}

/// What the manager reads and acts through.
#[derive(Debug, Clone)]
pub struct EvictionTargets {
    pub layout: podhost_disk::Layout,
    pub store: Arc<podhost_status::StatusStore>,
    pub cgroups: Arc<podhost_runtime::node_cgroups::NodeCgroups>,
    /// Node-level reclaim under disk pressure.
    pub gc: Arc<crate::gc::runner::GcRunner>,
    pub sources: signals::SignalSources,
}

/// Starts the manager; `orders` carries its evictions to the pod workers. Ends only if
/// the receiving side is gone. `settings` may change while it runs (SIGHUP).
pub fn spawn(
    settings: tokio::sync::watch::Receiver<EvictionSettings>,
    targets: EvictionTargets,
    orders: tokio::sync::mpsc::UnboundedSender<EvictionOrder>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(manager::run(settings, targets, orders))
}
