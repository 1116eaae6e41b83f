//! One inotify instance for every shim log the daemon follows (`shim_log`).
//!
//! An instance per log ran into `fs.inotify.max_user_instances` (128 on Debian): past
//! ~128 containers every further log was polled (opened and read) every 2 s, the
//! largest share of an idle daemon's file opens with 250 pods. One instance holds a
//! watch per log (`max_user_watches` is in the tens of thousands) and one task reads its
//! events and wakes the log's follower.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt;
use inotify::{Inotify, WatchDescriptor, WatchMask, Watches};
use tokio::sync::Notify;

/// The daemon's shared instance: its watches and who waits on each.
struct SharedWatch {
    watches: Mutex<Watches>,
    waiters: Mutex<HashMap<WatchDescriptor, Vec<Arc<Notify>>>>,
    /// False once the event stream failed: followers poll from then on.
    alive: AtomicBool,
}

/// The shared instance, made (and its reader task spawned on the current runtime) on
/// first use, and again if its reader ended (a runtime shut down: tests run several);
/// `None` where inotify cannot be used now.
fn shared() -> Option<Arc<SharedWatch>> {
    static SHARED: Mutex<Option<Arc<SharedWatch>>> = Mutex::new(None);
    static WARNED: AtomicBool = AtomicBool::new(false);
    let mut current = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(s) = current.as_ref().filter(|s| s.alive.load(Ordering::Acquire)) {
        return Some(s.clone());
    }
    match start() {
        Ok(s) => {
            *current = Some(s.clone());
            Some(s)
        }
        Err(e) => {
            if !WARNED.swap(true, Ordering::Relaxed) {
                tracing::warn!(error = %e, "cannot use inotify for the shims' logs; they are polled");
            }
            None
        }
    }
}

fn start() -> std::io::Result<Arc<SharedWatch>> {
    let inotify = Inotify::init()?;
    let me = Arc::new(SharedWatch {
        watches: Mutex::new(inotify.watches()),
        waiters: Mutex::new(HashMap::new()),
        alive: AtomicBool::new(true),
    });
    let mut events = inotify.into_event_stream([0u8; 4096])?;
    let reader = ReaderGone(me.clone());
    tokio::spawn(async move {
        while let Some(event) = events.next().await {
            match event {
                Ok(event) => reader.0.wake(&event.wd),
                Err(e) => {
                    tracing::warn!(error = %e, "the shims' log watch failed; their logs are polled from now on");
                    break;
                }
            }
        }
    });
    Ok(me)
}

/// Held by the reader task: when the task ends (a failed stream, or its runtime shut
/// down), followers switch to polling instead of waiting for events that never come.
struct ReaderGone(Arc<SharedWatch>);

impl Drop for ReaderGone {
    fn drop(&mut self) {
        self.0.alive.store(false, Ordering::Release);
        self.0.wake_all();
    }
}

impl SharedWatch {
    fn wake(&self, wd: &WatchDescriptor) {
        if let Some(list) = self.lock_waiters().get(wd) {
            for n in list {
                n.notify_one();
            }
        }
    }

    fn wake_all(&self) {
        for n in self.lock_waiters().values().flatten() {
            n.notify_one();
        }
    }

    fn lock_waiters(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<WatchDescriptor, Vec<Arc<Notify>>>> {
        self.waiters.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_watches(&self) -> std::sync::MutexGuard<'_, Watches> {
        self.watches.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A follower's watch on one log: [`changed`](Self::changed) resolves after the file was
/// written to (or at once if it was since the last call). Dropping it removes the watch.
pub struct LogWatch {
    /// `None`: not watched (no inotify, or the watch could not be added): poll.
    watched: Option<Watched>,
}

/// The instance holding the watch, its descriptor and the follower's wake-up.
struct Watched {
    shared: Arc<SharedWatch>,
    wd: WatchDescriptor,
    notify: Arc<Notify>,
}

impl LogWatch {
    /// Watches `path` for writes; on failure the follower polls (said once, at debug).
    pub fn new(path: &Path) -> Self {
        let Some(shared) = shared() else {
            return Self { watched: None };
        };
        // Waiters, then watches, here and in drop: a watch is never removed while a
        // new follower of the same file (the same descriptor) registers.
        let mut waiters = shared.lock_waiters();
        let added = shared.lock_watches().add(path, WatchMask::MODIFY);
        match added {
            Ok(wd) => {
                let notify = Arc::new(Notify::new());
                waiters.entry(wd.clone()).or_default().push(notify.clone());
                drop(waiters);
                Self {
                    watched: Some(Watched { shared, wd, notify }),
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, log = %path.display(), "cannot watch the shim's log; polling it");
                Self { watched: None }
            }
        }
    }

    /// Whether the follower must poll the file instead of waiting for [`changed`].
    pub fn polling(&self) -> bool {
        self.watched
            .as_ref()
            .is_none_or(|w| !w.shared.alive.load(Ordering::Acquire))
    }

    /// Resolves after the next write (never when polling).
    pub async fn changed(&self) {
        match &self.watched {
            Some(w) if !self.polling() => w.notify.notified().await,
            _ => std::future::pending().await,
        }
    }
}

impl Drop for LogWatch {
    fn drop(&mut self) {
        let Some(Watched { shared, wd, notify }) = self.watched.take() else {
            return;
        };
        let mut waiters = shared.lock_waiters();
        let last = match waiters.get_mut(&wd) {
            Some(list) => {
                list.retain(|n| !Arc::ptr_eq(n, &notify));
                list.is_empty()
            }
            None => false,
        };
        if last {
            waiters.remove(&wd);
            // Fails when the file is gone (the kernel dropped the watch): nothing to do.
            let _ = shared.lock_watches().remove(wd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::Duration;

    /// A guard against a hang, not a speed requirement.
    const HANG: Duration = Duration::from_secs(30);

    // One test: the shared instance lives on the runtime that made it, and two tests
    // (two runtimes) at once would hand each other a reader that ends with its test.
    #[tokio::test]
    async fn a_write_wakes_every_follower_of_the_file_and_a_missing_file_is_polled() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shim.log");
        let mut f = std::fs::File::create(&path).unwrap();
        let (a, b) = (LogWatch::new(&path), LogWatch::new(&path));
        assert!(!a.polling() && !b.polling(), "inotify works on this host");
        f.write_all(b"one\n").unwrap();
        tokio::time::timeout(HANG, a.changed())
            .await
            .expect("a woken");
        tokio::time::timeout(HANG, b.changed())
            .await
            .expect("b woken");
        drop(a);
        f.write_all(b"two\n").unwrap();
        tokio::time::timeout(HANG, b.changed())
            .await
            .expect("b still woken after a's watch is gone");
        let missing = LogWatch::new(&dir.path().join("missing.log"));
        assert!(missing.polling());
    }
}
