//! Wires the /dev/kmsg OOM watcher to the status store: system OOMs become node events,
//! container OOM victims are kept for the containers' exit messages.

use std::path::Path;
use std::sync::Arc;

use crate::oom::{OomEvent, OomVictim, OomVictims, attribute, spawn_kmsg_watcher};
use podhost_status::{EventKind, StatusStore};

/// Starts the watcher; without /dev/kmsg, says what is lost and goes on (`None`).
/// The returned task ends when the kernel log watcher stops (its channel closes).
pub fn start(
    root_dir: &Path,
    cgroup_root: String,
    store: Arc<StatusStore>,
    victims: Arc<OomVictims>,
) -> Option<tokio::task::JoinHandle<()>> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<OomEvent>(64);
    if let Err(e) = spawn_kmsg_watcher("/dev/kmsg".into(), root_dir.join("oom-cursor.json"), tx) {
        tracing::warn!(error = %e, "cannot read /dev/kmsg: OOM victims will not be named and system OOMs not reported");
        return None;
    }
    Some(tokio::spawn(async move {
        while let Some(ev) = rx.recv().await {
            podhost_metrics::oom_kill(
                ev.system,
                !ev.system && attribute(&ev, &cgroup_root).is_some(),
            );
            if ev.system {
                store.node_event(
                    EventKind::Warning,
                    "SystemOOM",
                    format!(
                        "System OOM encountered, victim process: {}, pid: {}",
                        ev.victim_comm, ev.victim_pid
                    ),
                );
                continue;
            }
            match attribute(&ev, &cgroup_root) {
                Some((uid, container)) => tracing::info!(
                    pod_uid = %uid,
                    container = container.as_deref().unwrap_or("-"),
                    victim = %ev.victim_comm,
                    pid = ev.victim_pid,
                    memcg = %ev.task_memcg,
                    "kernel OOM kill in a pod"
                ),
                None => {
                    tracing::info!(victim = %ev.victim_comm, pid = ev.victim_pid, memcg = %ev.task_memcg, "kernel OOM kill outside podhost's pods")
                }
            }
            victims.record(OomVictim {
                task_memcg: ev.task_memcg.clone(),
                comm: ev.victim_comm.clone(),
                pid: ev.victim_pid,
            });
        }
    }))
}
