//! Node, pod and container statistics: a [`Collector`] the daemon creates once samples
//! cgroups (v2 or v1), /proc, the pods' network namespaces and their disk usage when a
//! request finds the last sample older than a second ([`MAX_SAMPLE_AGE`]): every value
//! is then at most that old. In the background, as cadvisor's housekeeping (every
//! ~10 s), only the CPU counters are read, so that a request's CPU rates come from two
//! readings at most [`HOUSEKEEPING_INTERVAL`] (and at least a second) apart; the rest
//! (disk usage walks, a setns per pod, a dozen files per cgroup) is read only when
//! asked for, which was most of an idle daemon's work with many pods. The API serves
//! the samples as the kubelet's Summary and as cadvisor Prometheus text.
//!
//! In the workspace (docs/architecture.md, "Crates"): uses model, disk, runtime, status,
//! volume. It may not: change anything it samples.

pub mod cgroup;
pub mod cpu_readings;
pub mod fs;
pub mod netns;
pub mod node;
pub mod sample;

use std::sync::Arc;
use std::time::Duration;

pub use cgroup::{CgroupLayout, CgroupReader};
pub use sample::{Sampler, Snapshot};

use podhost_disk::Layout;
use podhost_runtime::node_cgroups::NodeCgroups;
use podhost_status::StatusStore;

/// How often the background sampling runs (cadvisor's housekeeping interval).
pub const HOUSEKEEPING_INTERVAL: Duration = Duration::from_secs(10);

/// A request gets a new sample when the last one is older than this.
pub const MAX_SAMPLE_AGE: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum StatsError {
    #[error("sampling the node's statistics failed (a bug: see the daemon's log): {0}")]
    Sampling(#[from] tokio::task::JoinError),
}

/// The statistics of this node, sampled in the background and on demand.
#[derive(Debug)]
pub struct Collector {
    sampler: Arc<Sampler>,
    /// The last sample; the lock also keeps two samplings from running at once.
    latest: tokio::sync::Mutex<Option<Arc<Snapshot>>>,
}

impl Collector {
    /// A collector of the pods in `store`, whose cgroups `cgroups` places, with their
    /// files under `layout`.
    pub fn new(
        node_name: String,
        layout: Layout,
        cgroups: Arc<NodeCgroups>,
        store: Arc<StatusStore>,
    ) -> Self {
        let reader = CgroupReader::new(CgroupLayout::detect());
        Self {
            sampler: Arc::new(Sampler::new(node_name, layout, cgroups, store, reader)),
            latest: tokio::sync::Mutex::new(None),
        }
    }

    /// Reads the CPU counters now and then every `every`, until the task is aborted.
    pub fn spawn_housekeeping(self: &Arc<Self>, every: Duration) -> tokio::task::JoinHandle<()> {
        let me = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                // The lock keeps a full sample from running at the same time.
                let _sampling = me.latest.lock().await;
                let sampler = me.sampler.clone();
                if let Err(e) = tokio::task::spawn_blocking(move || sampler.sample_cpu()).await {
                    tracing::warn!(error = %e, "statistics housekeeping");
                }
            }
        })
    }

    /// A sample at most [`MAX_SAMPLE_AGE`] old.
    pub async fn fresh(&self) -> Result<Arc<Snapshot>, StatsError> {
        self.refresh(MAX_SAMPLE_AGE).await
    }

    /// The last sample, if one exists (never samples).
    pub async fn latest(&self) -> Option<Arc<Snapshot>> {
        self.latest.lock().await.clone()
    }

    async fn refresh(&self, max_age: Duration) -> Result<Arc<Snapshot>, StatsError> {
        let mut latest = self.latest.lock().await;
        if let Some(s) = latest.as_ref().filter(|s| s.taken.elapsed() < max_age) {
            return Ok(s.clone());
        }
        let sampler = self.sampler.clone();
        let started = std::time::Instant::now();
        let snapshot = Arc::new(tokio::task::spawn_blocking(move || sampler.sample()).await?);
        tracing::debug!(
            pods = snapshot.summary.pods.len(),
            took_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "statistics sampled"
        );
        *latest = Some(snapshot.clone());
        Ok(snapshot)
    }

    /// `/stats/summary`'s body.
    pub async fn summary(&self) -> Result<podhost_model::stats::summary::Summary, StatsError> {
        Ok(self.fresh().await?.summary.clone())
    }

    /// `/metrics/cadvisor`'s body.
    pub async fn cadvisor_text(&self) -> Result<String, StatsError> {
        Ok(podhost_model::stats::cadvisor::render(
            &self.fresh().await?.series,
        ))
    }
}
