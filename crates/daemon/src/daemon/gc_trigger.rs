//! The API's `POST /gc` runs the daemon's GC runner: the one place that knows both.

use futures::future::BoxFuture;

use crate::gc::runner::GcRunner;
use podhost_api::{GcOutcome, GcTrigger};

impl GcTrigger for GcRunner {
    fn collect_now(
        &self,
    ) -> BoxFuture<'_, Result<GcOutcome, Box<dyn std::error::Error + Send + Sync>>> {
        Box::pin(async move {
            let containers = self.containers().await;
            let images = self.images().await?;
            Ok(GcOutcome {
                containers_removed: containers.removed.len(),
                pod_dirs_removed: containers.orphans.pod_dirs.len(),
                log_dirs_removed: containers.orphans.log_dirs.len(),
                images,
            })
        })
    }
}
