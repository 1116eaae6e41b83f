//! Turns the shims' log drop records (`log-drops.json` in each attempt dir) into pod
//! events: `LogWriteFailed` (Warning) when a container's output starts being dropped,
//! `LogWriteResumed` (Normal, with the count) when its log is written again.
//!
//! The shim cannot reach the daemon reliably (the daemon may be down, its report pipe
//! gone), and the record is its only channel that survives a daemon restart, so the
//! daemon looks at the records of the pods' current containers every
//! [`CHECK_EVERY`]. That is a few small reads per container, and the one place where a
//! disk-full episode becomes visible in `podhost describe`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

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
        let mut seen: HashMap<PathBuf, LogDrops> = HashMap::new();
        let mut ticker = tokio::time::interval(CHECK_EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let watched = current_containers(&store, &layout);
            let read = tokio::task::spawn_blocking(move || {
                watched
                    .into_iter()
                    .filter_map(|w| match read_drops(&w.record) {
                        Ok(Some(d)) => Some((w, d)),
                        Ok(None) => None,
                        Err(e) => {
                            // A record being rewritten reads torn; the next look is whole.
                            tracing::debug!(path = %w.record.display(), error = %e, "cannot read log drop record");
                            None
                        }
                    })
                    .collect::<Vec<_>>()
            })
            .await
            .unwrap_or_default();
            let mut still = HashMap::new();
            for (w, drops) in read {
                let before = seen.remove(&w.record);
                report(&store, &w, before.as_ref(), &drops);
                still.insert(w.record, drops);
            }
            seen = still;
        }
    })
}

/// Every pod's containers at their current restart count.
fn current_containers(store: &StatusStore, layout: &Layout) -> Vec<Watched> {
    let mut out = Vec::new();
    for rec in store.pods() {
        let statuses = rec
            .pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.clone())
            .unwrap_or_default();
        for cs in statuses {
            let attempt = crate::model::convert::non_negative_u32(cs.restart_count);
            out.push(Watched {
                uid: rec.uid().to_string(),
                object: format!("pod/{}/{}", rec.name(), cs.name),
                record: layout
                    .attempt_dir(rec.uid(), &cs.name, attempt)
                    .join(LOG_DROPS_FILE),
                container: cs.name,
            });
        }
    }
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
