//! emptyDir `sizeLimit` on disk: the kubelet's eviction manager checks local storage
//! every 10 s (`evictionMonitoringPeriod`) and evicts a pod whose emptyDir grew past its
//! limit. (A `medium: Memory` emptyDir is a tmpfs of that size: the kernel enforces it.)

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;

use super::context::{Ctx, PodInfo};
use super::report::{Report, ReportSender};

/// The kubelet's `evictionMonitoringPeriod`.
const CHECK_EVERY: Duration = Duration::from_secs(10);

/// Whether some disk emptyDir of the pod has a sizeLimit.
fn has_disk_size_limit(pod: &PodInfo) -> bool {
    pod.pod
        .spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| v.empty_dir.as_ref())
        .any(|e| e.size_limit.is_some() && e.medium.as_deref() != Some("Memory"))
}

/// Checks the pod's emptyDirs every 10 s until the pod's tasks are aborted; asks for the
/// eviction once a limit is exceeded.
pub fn spawn_watch(
    ctx: &Arc<Ctx>,
    pod: &Arc<PodInfo>,
    tasks: &mut JoinSet<()>,
    reports: &ReportSender,
) {
    if !has_disk_size_limit(pod) {
        return;
    }
    let dir = ctx.layout.pod_volumes_dir(&pod.uid);
    let (pod, reports) = (pod.clone(), reports.clone());
    tasks.spawn(async move {
        loop {
            tokio::time::sleep(CHECK_EVERY).await;
            let (spec, dir) = (pod.pod.clone(), dir.clone());
            let exceeded = tokio::task::spawn_blocking(move || {
                podhost_volume::empty_dir_usage_exceeded(&spec, &dir)
            })
            .await;
            if let Ok(Some(message)) = exceeded {
                let _ = reports.send(Report::Evict {
                    message,
                    grace: podhost_model::podsync::EVICTION_GRACE,
                });
                return;
            }
        }
    });
}
