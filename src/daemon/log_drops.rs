//! Turns the shims' log drop records (`log-drops.json` in each attempt dir) into pod
//! events: `LogWriteFailed` (Warning) when a container's output starts being dropped,
//! `LogWriteResumed` (Normal, with the count) when its log is written again.
//!
//! The shim cannot reach the daemon reliably (the daemon may be down, its report pipe
//! gone), and the record is its only channel that survives a daemon restart, so the
//! daemon looks at the records of the pods' current containers every
//! [`CHECK_EVERY`]. That is one stat(2) per container (a record is read only when its
//! size or modification time changed; most containers never have one), and the one
//! place where a disk-full episode becomes visible in `podhost describe`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::disk::Layout;
use crate::logs::{LOG_DROPS_FILE, LogDrops, read_drops};
use crate::status::{EventKind, StatusStore};

/// How often the records are read.
pub const CHECK_EVERY: Duration = Duration::from_secs(2);

/// One container instance's record, with where to report it.
struct Watched {
    uid: String,
    object: String,
    container: String,
    record: PathBuf,
}

/// Starts the task (it runs until aborted).
pub fn start(store: Arc<StatusStore>, layout: Layout) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut seen: HashMap<PathBuf, Seen> = HashMap::new();
        let mut ticker = tokio::time::interval(CHECK_EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let watched = current_containers(&store, &layout);
            let before = std::mem::take(&mut seen);
            let looked = tokio::task::spawn_blocking(move || look_at(watched, before)).await;
            let Ok((now, changed)) = looked else {
                continue; // the look panicked (a bug, logged by tokio): look again next time
            };
            for (w, previous) in changed {
                if let Some(record) = now.get(&w.record) {
                    report(&store, &w, previous.as_ref(), &record.drops);
                }
            }
            seen = now;
        }
    })
}

/// A record as last read, with the file's identity then.
struct Seen {
    stamp: Stamp,
    drops: LogDrops,
}

/// What tells a rewritten record: it is written to a temp file and renamed over the old
/// one, so its inode changes (size and modification time as well, in case).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    inode: u64,
    len: u64,
    modified: Option<SystemTime>,
}

fn stamp(path: &Path) -> std::io::Result<Option<Stamp>> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(Some(Stamp {
            inode: std::os::unix::fs::MetadataExt::ino(&m),
            len: m.len(),
            modified: m.modified().ok(),
        })),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Stats each watched record and reads those that are new or changed since `before`.
/// Returns every existing record (for the next look) and the containers whose record
/// changed, with what it said before.
#[allow(clippy::type_complexity)]
fn look_at(
    watched: Vec<Watched>,
    mut before: HashMap<PathBuf, Seen>,
) -> (HashMap<PathBuf, Seen>, Vec<(Watched, Option<LogDrops>)>) {
    let mut now = HashMap::new();
    let mut changed = Vec::new();
    for w in watched {
        let stamp = match stamp(&w.record) {
            Ok(Some(s)) => s,
            Ok(None) => continue,
            Err(e) => {
                tracing::debug!(path = %w.record.display(), error = %e, "cannot stat log drop record");
                continue;
            }
        };
        let previous = before.remove(&w.record);
        if let Some(p) = previous.as_ref().filter(|p| p.stamp == stamp) {
            now.insert(
                w.record.clone(),
                Seen {
                    stamp,
                    drops: p.drops.clone(),
                },
            );
            continue;
        }
        match read_drops(&w.record) {
            Ok(Some(drops)) => {
                now.insert(w.record.clone(), Seen { stamp, drops });
                changed.push((w, previous.map(|p| p.drops)));
            }
            Ok(None) => {}
            Err(e) => {
                // A record being rewritten reads torn; the next look is whole (its stamp
                // is not kept, so it is read again).
                tracing::debug!(path = %w.record.display(), error = %e, "cannot read log drop record");
            }
        }
    }
    (now, changed)
}

/// Every pod's containers at their current restart count.
fn current_containers(store: &StatusStore, layout: &Layout) -> Vec<Watched> {
    let mut out = Vec::new();
    store.visit(|rec| {
        let statuses = rec
            .pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref());
        for cs in statuses.into_iter().flatten() {
            let attempt = crate::model::convert::non_negative_u32(cs.restart_count);
            out.push(Watched {
                uid: rec.uid().to_string(),
                object: format!("pod/{}/{}", rec.name(), cs.name),
                record: layout
                    .attempt_dir(rec.uid(), &cs.name, attempt)
                    .join(LOG_DROPS_FILE),
                container: cs.name.clone(),
            });
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
