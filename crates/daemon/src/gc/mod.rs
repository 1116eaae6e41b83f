//! Container garbage collection (kubelet `kuberuntime_gc.go`, reference
//! kubelet-semantics.md §9): dead containers' attempt dirs and logs, and the dirs and
//! logs of pods that no longer exist.
//!
//! Removing dead containers is also what lets image GC collect their images: a
//! container keeps its image in use, running or exited, until it is removed here
//! (the kubelet's dead containers pinned images forever: kubernetes#27169).
//!
//! [`collect`] is one pass: [`scan`] → [`plan`] → [`remove`] → [`remove_orphans`] →
//! [`remove_stale_states`].
//! Blocking file I/O: call it from `spawn_blocking`.

mod error;
mod mounts;
mod orphans;
mod plan;
mod remove;
pub mod runner;
mod scan;
mod states;

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};

use podhost_disk::Layout;

pub use error::GcError;
pub use orphans::{ORPHAN_GRACE, OrphanReport, remove_orphans, remove_orphans_older_than};
pub use plan::plan;
pub use remove::remove;
pub use scan::scan;
pub use states::remove_stale_states;

/// Container GC settings; defaults are the kubelet's (`MinimumGCAge=0`,
/// `MaxPerPodContainerCount=1`, `MaxContainerCount=-1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerGcPolicy {
    /// Dead containers that finished less than this long ago are kept.
    pub min_age: Duration,
    /// Dead containers kept per (pod, container name), newest first.
    pub max_per_pod_container: usize,
    /// Dead containers kept on the node in all (`None`: no limit).
    pub max_containers: Option<usize>,
}

impl Default for ContainerGcPolicy {
    fn default() -> Self {
        ContainerGcPolicy {
            min_age: Duration::ZERO,
            max_per_pod_container: 1,
            max_containers: None,
        }
    }
}

/// An exited container whose shim is gone: one attempt dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadContainer {
    /// The pod's UID.
    pub pod_uid: String,
    /// The container's name.
    pub container: String,
    /// The attempt (restart) number.
    pub attempt: u32,
    /// When it exited (`exit.json`).
    pub finished_at: DateTime<Utc>,
    /// `pods/<uid>/containers/<name>/<attempt>`.
    pub attempt_dir: PathBuf,
    /// `<log-dir>/<ns>_<pod>_<uid>/<name>/<attempt>.log` (empty if unknown).
    pub log_file: PathBuf,
}

/// What a [`collect`] pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerGcReport {
    /// Dead containers removed.
    pub removed: Vec<DeadContainer>,
    /// Dead containers that could not be removed (logged; retried next pass).
    pub failed: usize,
    /// Pod and log dirs of pods that are gone.
    pub orphans: OrphanReport,
    /// libcontainer state dirs of containers that are over (ids).
    pub stale_states: Vec<String>,
}

/// One container GC pass. `live_pods` holds the UIDs of every pod the daemon knows
/// (running, pending or terminating).
pub fn collect(
    layout: &Layout,
    live_pods: &HashSet<String>,
    policy: &ContainerGcPolicy,
    now: DateTime<Utc>,
) -> ContainerGcReport {
    collect_removing(layout, live_pods, &HashSet::new(), policy, now)
}

/// [`collect`], where the dead containers of the pods in `content_removable` (live
/// pods that will not run again, e.g. evicted ones: the kubelet's
/// `ShouldPodContentBeRemoved`) all go, their newest attempt too; their pod dirs stay.
pub fn collect_removing(
    layout: &Layout,
    live_pods: &HashSet<String>,
    content_removable: &HashSet<String>,
    policy: &ContainerGcPolicy,
    now: DateTime<Utc>,
) -> ContainerGcReport {
    sweep_all_trash(layout);
    let dead = scan(layout);
    let keeping: HashSet<String> = live_pods.difference(content_removable).cloned().collect();
    let doomed = plan(&dead, &keeping, policy, now);
    let mut report = ContainerGcReport::default();
    for d in doomed {
        match remove(&d) {
            Ok(()) => report.removed.push(d),
            Err(e) => {
                tracing::warn!(pod_uid = %d.pod_uid, container = %d.container, attempt = d.attempt,
                    error = %e, "container GC: cannot remove dead container");
                report.failed += 1;
            }
        }
    }
    report.orphans = remove_orphans(layout, live_pods);
    report.stale_states = remove_stale_states(layout);
    if !report.removed.is_empty() || !report.orphans.pod_dirs.is_empty() {
        tracing::info!(
            dead = dead.len(),
            removed = report.removed.len(),
            failed = report.failed,
            pod_dirs = report.orphans.pod_dirs.len(),
            log_dirs = report.orphans.log_dirs.len(),
            "container GC: done"
        );
    }
    report
}

/// Leftovers of removals a crash interrupted: in the pods dir, every container dir and
/// the log dir.
fn sweep_all_trash(layout: &Layout) {
    remove::sweep_trash(&layout.pods_dir());
    remove::sweep_trash(&layout.log_dir);
    let Ok(pods) = std::fs::read_dir(layout.pods_dir()) else {
        return;
    };
    for pod in pods.flatten() {
        if let Ok(names) = std::fs::read_dir(pod.path().join("containers")) {
            for name in names.flatten() {
                remove::sweep_trash(&name.path());
            }
        }
    }
}
