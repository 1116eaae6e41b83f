//! Keeping the config store current: a full read at start, after inotify reports a
//! change in the directory (bursts coalesced), and every `rescan_every` (which also
//! catches edits behind symlinks, e.g. a directory filled by a Kubernetes volume).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch as channel;
use tokio::time::{Instant, MissedTickBehavior, interval_at, timeout};

use super::ConfigObjects;

/// Quiet time that ends a burst of inotify events before the directory is re-read.
const DEBOUNCE: Duration = Duration::from_millis(50);

type Events = podhost_disk::dir_watch::DirEvents;

/// Reads `dir` now (blocking: call it at start-up, before pods are started) and then
/// keeps the returned receiver current in a tokio task; the task ends when every
/// receiver is dropped. A new value is sent only when objects or errors changed.
pub fn watch(
    dir: PathBuf,
    rescan_every: Duration,
) -> (
    channel::Receiver<Arc<ConfigObjects>>,
    tokio::task::JoinHandle<()>,
) {
    // Watched before the first read, so that no change falls between the two.
    let events = add_watch(&dir);
    let first = ConfigObjects::load(&dir);
    log_loaded(&dir, &first);
    let (tx, rx) = channel::channel(Arc::new(first));
    let task = tokio::spawn(run(dir, rescan_every, events, tx));
    (rx, task)
}

async fn run(
    dir: PathBuf,
    rescan_every: Duration,
    mut events: Option<Events>,
    tx: channel::Sender<Arc<ConfigObjects>>,
) {
    let rescan_every = rescan_every.max(Duration::from_millis(100));
    let mut rescan = interval_at(Instant::now() + rescan_every, rescan_every);
    rescan.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = tx.closed() => return,
            alive = next_event(&mut events) => {
                if alive {
                    // Swallow the rest of the burst.
                    while let Ok(true) = timeout(DEBOUNCE, next_event(&mut events)).await {}
                } else {
                    events = None;
                }
            }
            _ = rescan.tick() => {
                if events.is_none() {
                    events = add_watch(&dir);
                }
            }
        }
        let d = dir.clone();
        let Ok(loaded) = tokio::task::spawn_blocking(move || ConfigObjects::load(&d)).await else {
            tracing::error!(dir = %dir.display(), "reading the config dir panicked; keeping the previous objects");
            continue;
        };
        tx.send_if_modified(|current| {
            if current.same_as(&loaded) {
                return false;
            }
            log_loaded(&dir, &loaded);
            *current = Arc::new(loaded);
            true
        });
    }
}

fn log_loaded(dir: &Path, objects: &ConfigObjects) {
    let (config_maps, secrets) = objects.counts();
    tracing::info!(dir = %dir.display(), config_maps, secrets, "config objects loaded");
    for e in objects.errors() {
        tracing::warn!(error = %e, "config object skipped");
    }
}

/// Watches `dir`, or None while it is missing (it is tried again at each rescan).
fn add_watch(dir: &Path) -> Option<Events> {
    podhost_disk::dir_watch::watch_dir(dir)
        .inspect_err(|e| tracing::debug!(dir = %dir.display(), error = %e, "cannot watch the config dir yet"))
        .ok()
}

/// Waits for the next event: true when something happened, false when the watch is
/// gone (directory removed or moved, read error). Dotfiles count: a Kubernetes-style
/// `..data` swap is how such a directory changes.
async fn next_event(events: &mut Option<Events>) -> bool {
    use futures::StreamExt as _;
    let Some(stream) = events.as_mut() else {
        return std::future::pending().await;
    };
    match stream.next().await {
        Some(Ok(e)) => !e.mask.intersects(
            inotify::EventMask::DELETE_SELF
                | inotify::EventMask::MOVE_SELF
                | inotify::EventMask::IGNORED,
        ),
        Some(Err(_)) | None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use podhost_model::env::ConfigLookup;

    /// Writes `name` whole (a dotfile renamed into place), as an editor or a config
    /// tool does, so the watcher never reads it half-written.
    fn put(dir: &Path, name: &str, text: &str) {
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, dir.join(name)).unwrap();
    }

    #[tokio::test]
    async fn a_new_file_reaches_receivers_and_a_rewrite_of_the_same_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let (mut rx, task) = watch(dir.path().to_path_buf(), Duration::from_secs(3600));
        assert_eq!(rx.borrow().counts(), (0, 0));
        let cm = "kind: ConfigMap\nmetadata: {name: app}\ndata: {k: v1}\n";
        put(dir.path(), "app.yaml", cm);
        rx.changed().await.unwrap();
        assert_eq!(
            rx.borrow_and_update()
                .config_map("default", "app")
                .unwrap()
                .data
                .as_ref()
                .unwrap()["k"],
            "v1"
        );
        // Same content again: no new value; then a real change arrives.
        put(dir.path(), "app.yaml", cm);
        put(dir.path(), "app.yaml", &cm.replace("v1", "v2"));
        rx.changed().await.unwrap();
        assert_eq!(
            rx.borrow_and_update()
                .config_map("default", "app")
                .unwrap()
                .data
                .as_ref()
                .unwrap()["k"],
            "v2"
        );
        drop(rx);
        task.await.unwrap();
    }

    #[tokio::test]
    async fn a_dir_created_later_is_picked_up_by_the_rescan() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("config");
        let (mut rx, task) = watch(dir.clone(), Duration::from_millis(100));
        std::fs::create_dir(&dir).unwrap();
        put(
            &dir,
            "s.yaml",
            "kind: Secret\nmetadata: {name: s}\nstringData: {k: v}\n",
        );
        rx.changed().await.unwrap();
        assert!(rx.borrow().secret("default", "s").is_some());
        drop(rx);
        task.await.unwrap();
    }
}
