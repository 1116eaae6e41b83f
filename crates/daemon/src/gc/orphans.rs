//! Pod directories and pod log directories of pods that no longer exist (the kubelet
//! leaves `/var/log/pods` dirs behind: kubernetes#125079).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::remove::remove_tree;
use super::scan::pod_log_dir;
use podhost_disk::read_json;
use podhost_disk::records::{STARTED_FILE, StartedRecord};
use podhost_disk::{Layout, attempts};
use podhost_runtime::log_owner::is_ours;
use podhost_runtime::shim_client::is_our_shim;

/// Directories modified more recently than this are left for the next pass: the live
/// set the caller gave may predate a pod admitted a moment ago.
pub const ORPHAN_GRACE: Duration = Duration::from_secs(60);

/// What [`remove_orphans`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OrphanReport {
    /// UIDs whose `pods/<uid>` dir was removed.
    pub pod_dirs: Vec<String>,
    /// Pod log dirs removed.
    pub log_dirs: Vec<PathBuf>,
}

/// Removes `pods/<uid>` and `<log-dir>/<ns>_<pod>_<uid>` of every UID not in
/// `live_pods` (which must hold every pod the daemon knows, terminating ones too), but
/// not those modified in the last [`ORPHAN_GRACE`] nor a pod with a live shim. A log
/// dir whose pod dir is gone is removed only when it carries this podhost's mark
/// (`runtime::log_owner`): the log dir may be shared with a kubelet or another podhost.
pub fn remove_orphans(layout: &Layout, live_pods: &HashSet<String>) -> OrphanReport {
    remove_orphans_older_than(layout, live_pods, ORPHAN_GRACE)
}

/// [`remove_orphans`] with another grace period.
pub fn remove_orphans_older_than(
    layout: &Layout,
    live_pods: &HashSet<String>,
    grace: Duration,
) -> OrphanReport {
    let mut report = OrphanReport::default();
    let cutoff = SystemTime::now()
        .checked_sub(grace)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let mut kept_pods = HashSet::new();
    for (uid, dir) in entries(&layout.pods_dir()) {
        if live_pods.contains(&uid) {
            continue;
        }
        if newest_mtime(&dir, 1) > cutoff || has_live_shim(layout, &uid) {
            kept_pods.insert(uid);
            continue;
        }
        let logs = pod_log_dir(layout, &uid);
        // A shared pid namespace's PID 1 would outlive the directory otherwise.
        podhost_runtime::pause::stop(&layout.pod_ns_dir(&uid));
        match remove_tree(&dir) {
            Ok(()) => {
                tracing::info!(pod_uid = %uid, "container GC: removed the dir of a pod that is gone");
                report.pod_dirs.push(uid.clone());
            }
            Err(e) => {
                tracing::warn!(pod_uid = %uid, error = %e, "container GC: cannot remove pod dir");
                kept_pods.insert(uid);
                continue;
            }
        }
        if let Some(logs) = logs.filter(|l| l.exists()) {
            remove_log_dir(&logs, &mut report);
        }
    }
    for (name, dir) in entries(&layout.log_dir) {
        let Some((_, uid)) = name.rsplit_once('_') else {
            continue;
        };
        if live_pods.contains(uid) || kept_pods.contains(uid) || !dir.is_dir() {
            continue;
        }
        if layout.pod_dir(uid).exists() || newest_mtime(&dir, 2) > cutoff {
            continue;
        }
        if !is_ours(layout, &dir) {
            tracing::debug!(dir = %dir.display(), "container GC: log dir not marked by this podhost; kept");
            continue;
        }
        remove_log_dir(&dir, &mut report);
    }
    report
}

fn remove_log_dir(dir: &Path, report: &mut OrphanReport) {
    match remove_tree(dir) {
        Ok(()) => {
            tracing::info!(dir = %dir.display(), "container GC: removed the logs of a pod that is gone");
            report.log_dirs.push(dir.to_path_buf());
        }
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "container GC: cannot remove log dir")
        }
    }
}

/// `(name, path)` of the entries of `dir`, skipping dot-names (trash).
fn entries(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            (!name.starts_with('.')).then(|| (name, e.path()))
        })
        .collect()
}

/// The newest mtime of `path` and what lies up to `depth` levels below it.
fn newest_mtime(path: &Path, depth: usize) -> SystemTime {
    let mut newest = std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH);
    if depth > 0
        && path.is_dir()
        && let Ok(rd) = std::fs::read_dir(path)
    {
        for e in rd.flatten() {
            newest = newest.max(newest_mtime(&e.path(), depth - 1));
        }
    }
    newest
}

/// Whether any attempt of the pod still has its shim.
fn has_live_shim(layout: &Layout, uid: &str) -> bool {
    let Ok(names) = std::fs::read_dir(layout.pod_dir(uid).join("containers")) else {
        return false;
    };
    for name in names.flatten() {
        for attempt in attempts(&name.path()) {
            let dir = name.path().join(attempt.to_string());
            if let Ok(Some(s)) = read_json::<StartedRecord>(&dir.join(STARTED_FILE))
                && is_our_shim(s.shim_pid, &dir)
            {
                tracing::warn!(pod_uid = %uid, dir = %dir.display(),
                        "container GC: a pod that is gone still has a running shim; kept");
                return true;
            }
        }
    }
    false
}
