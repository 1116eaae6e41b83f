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
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

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

/// The shared instance, made (and its reader task spawned) on first use; `None` where
/// inotify cannot be used at all.
fn shared() -> Option<&'static Arc<SharedWatch>> {
    static SHARED: OnceLock<Option<Arc<SharedWatch>>> = OnceLock::new();
    SHARED
        .get_or_init(|| match start() {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(error = %e, "cannot use inotify for the shims' logs; they are polled");
                None
            }
        })
        .as_ref()
}

fn start() -> std::io::Result<Arc<SharedWatch>> {
    let inotify = Inotify::init()?;
    let me = Arc::new(SharedWatch {
        watches: Mutex::new(inotify.watches()),
        waiters: Mutex::new(HashMap::new()),
        alive: AtomicBool::new(true),
    });
    let mut events = inotify.into_event_stream([0u8; 4096])?;
    let reader = me.clone();
    tokio::spawn(async move {
        while let Some(event) = events.next().await {
            match event {
                Ok(event) => reader.wake(&event.wd),
                Err(e) => {
                    tracing::warn!(error = %e, "the shims' log watch failed; their logs are polled from now on");
                    break;
                }
            }
        }
        reader.alive.store(false, Ordering::Release);
        reader.wake_all();
    });
    Ok(me)
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
    watched: Option<(WatchDescriptor, Arc<Notify>)>,
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
                Self {
                    watched: Some((wd, notify)),
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
        self.watched.is_none() || shared().is_none_or(|s| !s.alive.load(Ordering::Acquire))
    }

    /// Resolves after the next write (never when polling).
    pub async fn changed(&self) {
        match &self.watched {
            Some((_, notify)) if !self.polling() => notify.notified().await,
            _ => std::future::pending().await,
        }
    }
}

impl Drop for LogWatch {
    fn drop(&mut self) {
        let (Some((wd, notify)), Some(shared)) = (self.watched.take(), shared()) else {
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
