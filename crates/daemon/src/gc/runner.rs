//! The daemon's garbage collection: dead containers every minute, images every five
//! (kubelet periods), and on demand (`podhost gc`). Results become node events.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use super::{ContainerGcPolicy, ContainerGcReport, GcError};
use podhost_disk::Layout;
use podhost_disk::records::IMAGE_REF_FILE;
use podhost_image::ImageStore;
use podhost_image::gc::{GcReport, ImageGcPolicy, ImageLeases, InUse, image_gc};
use podhost_runtime::userns::UsernsAllocator;
use podhost_status::{EventKind, StatusStore};

/// GC settings (daemon flags).
#[derive(Debug, Clone)]
pub struct GcSettings {
    pub image: ImageGcPolicy,
    pub image_period: Duration,
    pub container: ContainerGcPolicy,
    pub container_period: Duration,
}

/// What GC works on: the state dirs, the image store, the images held by starting
/// containers, the pods the daemon knows (and where its results go), the ID blocks.
#[derive(Debug, Clone)]
pub struct GcTargets {
    pub layout: Layout,
    pub images: Arc<ImageStore>,
    pub leases: ImageLeases,
    pub store: Arc<StatusStore>,
    pub userns: Arc<UsernsAllocator>,
}

/// Images in use: every container on disk (running or exited, until container GC
/// removes it) names its image digest, and starting containers hold leases.
struct ContainersOnDisk<'a> {
    ctx: &'a GcTargets,
}

impl InUse for ContainersOnDisk<'_> {
    fn in_use(&self) -> HashSet<String> {
        let mut out = self.ctx.leases.held();
        let pods = self.ctx.layout.pods_dir();
        let dirs = |p: &std::path::Path| {
            std::fs::read_dir(p)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .collect::<Vec<_>>()
        };
        for pod in dirs(&pods) {
            for container in dirs(&pod.join("containers")) {
                for attempt in dirs(&container) {
                    let file = attempt.join(IMAGE_REF_FILE);
                    if let Ok(digest) = std::fs::read_to_string(file) {
                        out.insert(digest.trim().to_string());
                    }
                }
            }
        }
        out
    }
}

/// Runs the passes.
#[derive(Debug)]
pub struct GcRunner {
    ctx: Arc<GcTargets>,
    settings: GcSettings,
    /// The image policy in effect: `settings.image` until a config reload sets another.
    image_policy: std::sync::Mutex<podhost_image::gc::ImageGcPolicy>,
}

/// Frees the ID blocks of pods that are gone (unknown to the daemon, their dir
/// removed), e.g. after a crash between a pod's end and its release, and the chowned
/// snapshot copies no block or snapshot needs any more.
fn release_userns_blocks(ctx: &GcTargets, live: &HashSet<String>) {
    if let Err(e) = ctx
        .userns
        .release_unless(|uid| live.contains(uid) || ctx.layout.pod_dir(uid).exists())
    {
        tracing::warn!(error = %e, "container GC: user namespace blocks not released");
    }
    let held: Vec<_> = ctx
        .userns
        .allocations()
        .into_iter()
        .map(|(_, m)| m)
        .collect();
    let removed = podhost_runtime::userns::chown_copy::prune(
        &ctx.layout.root_dir,
        &held,
        &ctx.layout.root_dir.join("snapshots"),
    );
    if removed > 0 {
        tracing::info!(
            removed,
            "container GC: removed unused chowned snapshot copies"
        );
    }
}

impl GcRunner {
    pub fn new(targets: GcTargets, settings: GcSettings) -> Arc<Self> {
        Arc::new(Self {
            ctx: Arc::new(targets),
            image_policy: std::sync::Mutex::new(settings.image.clone()),
            settings,
        })
    }

    /// The image GC policy of the next passes (a config reload).
    pub fn set_image_policy(&self, policy: podhost_image::gc::ImageGcPolicy) {
        *self
            .image_policy
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = policy;
    }

    /// One image GC pass; reports what was freed and any shortfall as node events.
    pub async fn images(&self) -> Result<GcReport, GcError> {
        self.image_pass(self.current_image_policy(), false).await
    }

    /// The image GC policy in effect (SIGHUP may have changed it).
    fn current_image_policy(&self) -> ImageGcPolicy {
        self.image_policy
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Every unused image past its minimum age, whatever the thresholds: the eviction
    /// manager's node-level reclaim under disk pressure (the kubelet's
    /// `DeleteUnusedImages`).
    pub async fn unused_images(&self) -> Result<GcReport, GcError> {
        let policy = podhost_image::gc::ImageGcPolicy {
            low_threshold_percent: 0,
            ..self.current_image_policy()
        };
        self.image_pass(policy, true).await
    }

    async fn image_pass(&self, policy: ImageGcPolicy, force: bool) -> Result<GcReport, GcError> {
        let ctx = self.ctx.clone();
        let report = tokio::task::spawn_blocking(move || {
            image_gc(
                &ctx.images,
                &policy,
                &ContainersOnDisk { ctx: &ctx },
                chrono::Utc::now(),
                force,
            )
        })
        .await
        .map_err(GcError::ImageTask)?
        .map_err(GcError::Image)?;
        podhost_metrics::image_gc_freed(report.freed_bytes, report.deleted.len());
        if !report.deleted.is_empty() {
            self.ctx.store.node_event(
                EventKind::Normal,
                "ImageGCFreed",
                format!(
                    "freed {} bytes by deleting {} unused image(s): {}",
                    report.freed_bytes,
                    report.deleted.len(),
                    report.deleted.join(", ")
                ),
            );
        }
        // The eviction manager's pass asks for everything unused; what it could not
        // free is no failure (the kubelet's DeleteUnusedImages reports none either).
        if report.shortfall_bytes > 0 && !force {
            self.ctx.store.node_event(
                EventKind::Warning,
                "FreeDiskSpaceFailed",
                format!(
                    "Failed to garbage collect required amount of images. Attempted to free {} bytes, but only found {} bytes eligible to free.",
                    report.target_bytes, report.freed_bytes
                ),
            );
        }
        Ok(report)
    }

    /// One container GC pass over the pods the daemon knows. An evicted pod's dead
    /// containers all go (as the kubelet removes an evicted pod's content): it will not
    /// run again, and under disk pressure its writable layers are what must be freed.
    pub async fn containers(&self) -> ContainerGcReport {
        self.containers_also_evicted(&HashSet::new()).await
    }

    /// [`Self::containers`], with `also_evicted` (pod UIDs) taken as evicted too: the
    /// eviction manager knows what it evicted before the pods' workers have published
    /// their `Failed`/`Evicted` status, and its reclaim must free their layers at once.
    pub async fn containers_also_evicted(
        &self,
        also_evicted: &HashSet<String>,
    ) -> ContainerGcReport {
        let ctx = self.ctx.clone();
        let policy = self.settings.container.clone();
        // Only the UIDs and the evictions, read in place: a copy of every pod's record
        // each minute was most of the idle daemon's GC work.
        let mut live: HashSet<String> = HashSet::new();
        let mut evicted: HashSet<String> = also_evicted.iter().cloned().collect();
        ctx.store.visit(|r| {
            live.insert(r.uid().to_string());
            if r.phase() == Some("Failed") && r.status.reason.as_deref() == Some("Evicted") {
                evicted.insert(r.uid().to_string());
            }
        });
        tokio::task::spawn_blocking(move || {
            let report =
                super::collect_removing(&ctx.layout, &live, &evicted, &policy, chrono::Utc::now());
            release_userns_blocks(&ctx, &live);
            podhost_metrics::containers_collected(report.removed.len());
            report
        })
        .await
        .unwrap_or_default()
    }

    /// The periodic loops (container GC, image GC), named, for the daemon to watch.
    pub fn spawn_loops(self: &Arc<Self>) -> [(&'static str, tokio::task::JoinHandle<()>); 2] {
        let me = self.clone();
        let containers = tokio::spawn(async move {
            let health =
                podhost_metrics::health().periodic("container GC", me.settings.container_period);
            let mut tick = tokio::time::interval(me.settings.container_period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let r = me.containers().await;
                health.beat();
                if !r.removed.is_empty() {
                    tracing::info!(removed = r.removed.len(), "container GC");
                }
            }
        });
        let me = self.clone();
        let images = tokio::spawn(async move {
            let health = podhost_metrics::health().periodic("image GC", me.settings.image_period);
            let mut tick = tokio::time::interval(me.settings.image_period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let pass = me.images().await;
                health.beat();
                if let Err(e) = pass {
                    tracing::warn!(error = %e, "image GC failed");
                }
            }
        });
        [("container GC", containers), ("image GC", images)]
    }
}
