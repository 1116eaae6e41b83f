//! Finds dead containers on disk: `pods/<uid>/containers/<name>/<attempt>/` with an
//! `exit.json` and no live shim (a shim writes the record before its clean-up, so a
//! live one may still be unmounting the rootfs).

use std::path::{Path, PathBuf};

use super::DeadContainer;
use podhost_disk::read_json;
use podhost_disk::records::{EXIT_FILE, ExitRecord, STARTED_FILE, StartedRecord};
use podhost_disk::{Layout, attempts};
use podhost_runtime::shim_client::is_our_shim;

/// Every dead container under the layout's pods dir, in no particular order. The
/// log file is `<log-dir>/<ns>_<pod>_<uid>/<container>/<attempt>.log`, with namespace
/// and name from the pod's `status.json` (or the pod's log dir found by its UID); it is
/// empty when neither exists.
pub fn scan(layout: &Layout) -> Vec<DeadContainer> {
    let mut out = Vec::new();
    let Ok(pods) = std::fs::read_dir(layout.pods_dir()) else {
        return out;
    };
    for pod in pods.flatten() {
        let Some(uid) = pod.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let containers = pod.path().join("containers");
        let Ok(names) = std::fs::read_dir(&containers) else {
            continue;
        };
        let mut log_dir: Option<Option<PathBuf>> = None;
        for name in names.flatten() {
            let Some(container) = name.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if container.starts_with('.') {
                continue;
            }
            for attempt in attempts(&name.path()) {
                let dir = layout.attempt_dir(&uid, &container, attempt);
                let Some(finished_at) = dead_since(&dir) else {
                    continue;
                };
                let pod_logs = log_dir.get_or_insert_with(|| pod_log_dir(layout, &uid));
                let log_file = pod_logs
                    .as_ref()
                    .map(|d| d.join(&container).join(format!("{attempt}.log")))
                    .unwrap_or_default();
                out.push(DeadContainer {
                    pod_uid: uid.clone(),
                    container: container.clone(),
                    attempt,
                    finished_at,
                    attempt_dir: dir,
                    log_file,
                });
            }
        }
    }
    out
}

/// The exit time if the attempt is dead: it has an exit record and its shim is gone.
fn dead_since(dir: &Path) -> Option<chrono::DateTime<chrono::Utc>> {
    let exit = match read_json::<ExitRecord>(&dir.join(EXIT_FILE)) {
        Ok(Some(e)) => e,
        Ok(None) => return None,
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "container GC: unreadable exit record; kept");
            return None;
        }
    };
    if let Ok(Some(started)) = read_json::<StartedRecord>(&dir.join(STARTED_FILE))
        && is_our_shim(started.shim_pid, dir)
    {
        tracing::debug!(dir = %dir.display(), "container GC: shim still cleaning up; kept");
        return None;
    }
    Some(exit.finished_at)
}

/// `<log-dir>/<ns>_<pod>_<uid>`: from `pods/<uid>/status.json`, else the first
/// directory of the log dir whose name ends in `_<uid>`.
pub(crate) fn pod_log_dir(layout: &Layout, uid: &str) -> Option<PathBuf> {
    let status: Option<serde_json::Value> = read_json(&layout.pod_dir(uid).join("status.json"))
        .ok()
        .flatten();
    if let Some(meta) = status.as_ref().map(|s| &s["pod"]["metadata"])
        && let (Some(ns), Some(name)) = (meta["namespace"].as_str(), meta["name"].as_str())
    {
        return Some(layout.pod_log_dir(ns, name, uid));
    }
    let suffix = format!("_{uid}");
    std::fs::read_dir(&layout.log_dir)
        .ok()?
        .flatten()
        .find(|e| {
            e.file_name().to_str().is_some_and(|n| n.ends_with(&suffix))
                && e.file_type().is_ok_and(|t| t.is_dir())
        })
        .map(|e| e.path())
}
