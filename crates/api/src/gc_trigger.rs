//! `POST /gc` runs the daemon's garbage collection; the API only knows this trait, so
//! that it does not depend on `gc` (the daemon wires the real runner in).

use futures::future::BoxFuture;

use podhost_image::gc::GcReport;

/// What one on-demand pass removed: containers first, then images.
#[derive(Debug, Clone, Default)]
pub struct GcOutcome {
    pub containers_removed: usize,
    pub pod_dirs_removed: usize,
    pub log_dirs_removed: usize,
    pub images: GcReport,
}

/// Runs a container GC pass, then an image GC pass (same thresholds as the periodic
/// ones). The error is the image pass's; the container pass only logs its failures.
pub trait GcTrigger: Send + Sync + std::fmt::Debug {
    fn collect_now(
        &self,
    ) -> BoxFuture<'_, Result<GcOutcome, Box<dyn std::error::Error + Send + Sync>>>;
}
