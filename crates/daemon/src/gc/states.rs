//! libcontainer's state directories (`<root>/run/libcontainer/<id>/state.json`) of
//! containers that are over. A shim deletes its container's state when the init
//! exits; one that was SIGKILLed, or died with the host, leaves it behind, and
//! nothing else would ever remove it.
//!
//! A state dir is stale when the bundle it names (the attempt dir) is gone, or
//! holds an exit record and no live shim. One without a readable state.json is
//! left alone unless it is older than [`ORPHAN_GRACE`] (libcontainer may be
//! writing it right now).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Deserialize;

use super::orphans::ORPHAN_GRACE;
use podhost_disk::Layout;
use podhost_disk::read_json;
use podhost_disk::records::{EXIT_FILE, STARTED_FILE, StartedRecord};
use podhost_runtime::shim_client::is_our_shim;

/// The part of libcontainer's `state.json` this needs.
#[derive(Debug, Deserialize)]
struct StateFile {
    bundle: PathBuf,
}

/// Removes the stale state dirs under the layout's libcontainer root; returns the
/// container ids removed.
pub fn remove_stale_states(layout: &Layout) -> Vec<String> {
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(layout.libcontainer_root()) else {
        return removed;
    };
    for entry in entries.flatten() {
        let dir = entry.path();
        let Some(id) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if !dir.is_dir() || !is_stale(&dir) {
            continue;
        }
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {
                tracing::info!(container_id = %id, "container GC: removed a stale libcontainer state dir");
                removed.push(id);
            }
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e,
                    "container GC: cannot remove a stale libcontainer state dir");
            }
        }
    }
    removed
}

fn is_stale(dir: &Path) -> bool {
    let bundle = match read_json::<StateFile>(&dir.join("state.json")) {
        Ok(Some(state)) => state.bundle,
        // Missing or unreadable: a container being created, or debris.
        _ => return older_than_grace(dir),
    };
    if !bundle.is_dir() {
        return true;
    }
    if !bundle.join(EXIT_FILE).is_file() {
        // Running, or starting.
        return false;
    }
    match read_json::<StartedRecord>(&bundle.join(STARTED_FILE)) {
        Ok(Some(started)) => !is_our_shim(started.shim_pid, &bundle),
        _ => true,
    }
}

fn older_than_grace(dir: &Path) -> bool {
    let modified = std::fs::metadata(dir)
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH);
    modified.elapsed().is_ok_and(|age| age > ORPHAN_GRACE)
}
