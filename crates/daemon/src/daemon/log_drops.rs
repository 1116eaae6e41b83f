//! Turns the shims' log drop records (`log-drops.json` in each attempt dir) into pod
//! events: `LogWriteFailed` (Warning) when a container's output starts being dropped,
//! `LogWriteResumed` (Normal, with the count) when its log is written again.
//!
//! The shim cannot reach the daemon reliably (the daemon may be down, its report pipe
//! gone), and the record is its only channel that survives a daemon restart. The daemon
//! holds an inotify watch on the record of each pod's current container (one instance
//! for all, see `log_drops_watch`) and reads a record when it is first watched and
//! whenever the shim rewrites it. Every [`CHECK_EVERY`] the set of watched records is
//! brought in line with the pods' current containers, from memory, if the pods changed
//! since the last check: at rest a check costs nothing (it used to be a stat(2) of every
//! record, then the record paths of every pod built and hashed again: with 250 pods
//! still the largest share of an idle daemon's CPU). A record that does not exist yet,
//! or where inotify cannot be used, is looked at (stat, then read if changed) at each
//! check.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::log_drops_watch::{Change, RecordWatch};
use podhost_disk::Layout;
use podhost_logs::{LOG_DROPS_FILE, LogDrops, read_drops};
use podhost_status::{EventKind, StatusStore};

/// How often the watched set follows the pods' containers (and unwatched records are
/// looked at).
pub const CHECK_EVERY: Duration = Duration::from_secs(2);

/// One container instance's record, with where to report it.
#[derive(Clone)]
struct Watched {
    uid: String,
    object: String,
    container: String,
    record: PathBuf,
}

/// Starts the task (it runs until aborted).
pub fn start(store: Arc<StatusStore>, layout: Layout) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut watch = RecordWatch::new();
        // What each record said when last read, for the events of its next change.
        let mut seen: HashMap<PathBuf, LogDrops> = HashMap::new();
        let mut current: HashMap<PathBuf, Watched> = HashMap::new();
        let mut ticker = tokio::time::interval(CHECK_EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Every change of a pod's record bumps it: restart counts (and so the records'
        // paths) only move with one.
        let mut pod_changes = store.follow_changes();
        loop {
            let to_read = tokio::select! {
                _ = ticker.tick() => None,
                changes = watch.changed() => Some(changes),
            };
            let to_read = match to_read {
                Some(changes) => changes,
                None => {
                    if !pod_changes.take() && watch.at_rest() {
                        continue;
                    }
                    current = current_containers(&store, &layout);
                    seen.retain(|path, _| current.contains_key(path));
                    let paths: Vec<PathBuf> = current.keys().cloned().collect();
                    // Inline: at rest every record is watched and this makes no system
                    // call; a new container costs one inotify_add_watch on a path
                    // whose dentries were just created.
                    watch.follow(&paths)
                }
            };
            read_and_report(&store, &current, &mut seen, to_read).await;
        }
    })
}

/// Reads the records in `paths` that belong to a current container and reports what
/// changed since `seen`.
async fn read_and_report(
    store: &StatusStore,
    current: &HashMap<PathBuf, Watched>,
    seen: &mut HashMap<PathBuf, LogDrops>,
    paths: Vec<Change>,
) {
    let wanted: Vec<Watched> = paths
        .into_iter()
        .filter_map(|c| current.get(&c.path).cloned())
        .collect();
    if wanted.is_empty() {
        return;
    }
    let Ok(read) = tokio::task::spawn_blocking(move || read_records(wanted)).await else {
        return; // the read panicked (a bug, logged by tokio): read again at its next change
    };
    for (w, drops) in read {
        let previous = seen.insert(w.record.clone(), drops.clone());
        if previous.as_ref() != Some(&drops) {
            report(store, &w, previous.as_ref(), &drops);
        }
    }
}

/// Reads each record; one missing or torn (being rewritten: its next write is seen
/// again) is left out.
fn read_records(wanted: Vec<Watched>) -> Vec<(Watched, LogDrops)> {
    let mut out = Vec::new();
    for w in wanted {
        match read_drops(&w.record) {
            Ok(Some(drops)) => out.push((w, drops)),
            Ok(None) => {}
            Err(e) => {
                tracing::debug!(path = %w.record.display(), error = %e, "cannot read log drop record");
            }
        }
    }
    out
}

/// Every pod's containers at their current restart count.
fn current_containers(store: &StatusStore, layout: &Layout) -> HashMap<PathBuf, Watched> {
    let mut out = HashMap::new();
    store.visit(|rec| {
        for cs in rec.status.container_statuses.iter().flatten() {
            let attempt = podhost_model::convert::non_negative_u32(cs.restart_count);
            let record = layout
                .attempt_dir(rec.uid(), &cs.name, attempt)
                .join(LOG_DROPS_FILE);
            let w = Watched {
                uid: rec.uid().to_string(),
                object: format!("pod/{}/{}", rec.name(), cs.name),
                record: record.clone(),
                container: cs.name.clone(),
            };
            out.insert(record, w);
        }
    });
    out
}

/// The words that identify one failure in its event (also across daemon restarts).
fn failure_tag(d: &LogDrops) -> String {
    let since = d
        .failing_since
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default();
    format!("failure #{} since {since}", d.failures)
}

/// Emits the events for what changed between `before` (the last look, `None` on the
/// first) and `now`.
fn report(store: &StatusStore, w: &Watched, before: Option<&LogDrops>, now: &LogDrops) {
    if now.failures == 0 {
        return;
    }
    let new_failure = before.is_none_or(|b| b.failures < now.failures);
    let tag = failure_tag(now);
    let already_told = || {
        store.get(&w.uid).is_some_and(|r| {
            r.events
                .iter()
                .any(|e| e.object == w.object && e.message.contains(&tag))
        })
    };
    if new_failure && !already_told() {
        store.pod_event(
            &w.uid,
            EventKind::Warning,
            "LogWriteFailed",
            &w.object,
            format!(
                "cannot write the log of container {} to {}: {}; its output is dropped until writes succeed again ({tag}, {} lines dropped so far); the container keeps running",
                w.container,
                now.log_path.display(),
                now.error.as_deref().unwrap_or("unknown error"),
                now.dropped_lines,
            ),
        );
    }
    let was_failing = before.is_none_or(|b| b.failing || b.failures < now.failures);
    if !now.failing && was_failing {
        let resumed = format!("resumed after {tag}");
        let told = store.get(&w.uid).is_some_and(|r| {
            r.events
                .iter()
                .any(|e| e.object == w.object && e.message.contains(&resumed))
        });
        if !told {
            store.pod_event(
                &w.uid,
                EventKind::Normal,
                "LogWriteResumed",
                &w.object,
                format!(
                    "the log of container {} is written again ({resumed}); {} lines ({} bytes) of its output were dropped in all",
                    w.container, now.dropped_lines, now.dropped_bytes,
                ),
            );
        }
    }
}
