//! The set of log drop records the daemon watches (`log_drops`): one inotify instance,
//! a watch per current container's record, and a stat-based look at the records that
//! cannot be watched (not created yet, or no inotify at all).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use futures::StreamExt as _;
use inotify::{EventMask, EventStream, Inotify, WatchDescriptor, WatchMask, Watches};

/// A record to read now.
pub(super) struct Change {
    pub path: PathBuf,
}

/// The watched records, and what was seen of those that are not watched.
pub(super) struct RecordWatch {
    /// `None` where inotify cannot be used: every record is looked at with stat(2).
    inotify: Option<(Watches, EventStream<[u8; 1024]>)>,
    by_wd: HashMap<WatchDescriptor, PathBuf>,
    by_path: HashMap<PathBuf, WatchDescriptor>,
    /// Records without a watch, with their identity when last looked at.
    unwatched: HashMap<PathBuf, Option<Stamp>>,
    /// A watch was lost (its record removed or moved, or inotify itself) since the last
    /// [`RecordWatch::follow`]: the next one must look at every path again.
    lost_watch: bool,
}

/// What tells a rewritten record without inotify: the shim rewrites it in place, so its
/// modification time changes (its inode too, if it was recreated).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    inode: u64,
    len: u64,
    modified: Option<SystemTime>,
}

fn stamp(path: &Path) -> Option<Stamp> {
    match std::fs::metadata(path) {
        Ok(m) => Some(Stamp {
            inode: std::os::unix::fs::MetadataExt::ino(&m),
            len: m.len(),
            modified: m.modified().ok(),
        }),
        Err(e) => {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::debug!(path = %path.display(), error = %e, "cannot stat log drop record");
            }
            None
        }
    }
}

impl RecordWatch {
    /// A watch set with its own inotify instance (or, where that fails, stat-only).
    pub(super) fn new() -> Self {
        let inotify = Inotify::init()
            .and_then(|i| {
                let watches = i.watches();
                Ok((watches, i.into_event_stream([0u8; 1024])?))
            })
            .inspect_err(|e| {
                tracing::warn!(error = %e, "cannot use inotify for the log drop records; they are looked at every 2 s")
            })
            .ok();
        Self {
            inotify,
            by_wd: HashMap::new(),
            by_path: HashMap::new(),
            unwatched: HashMap::new(),
            lost_watch: false,
        }
    }

    /// Whether a [`RecordWatch::follow`] with the paths of the last one would do
    /// nothing: every record has its watch and none was lost since. The caller then
    /// need not build the paths again.
    pub(super) fn at_rest(&self) -> bool {
        !self.lost_watch && self.unwatched.is_empty()
    }

    /// Brings the watched set to `paths` (the current containers' records) and returns
    /// those to read now: the newly watched ones (their content so far), and unwatched
    /// ones that are new or changed since the last look.
    pub(super) fn follow(&mut self, paths: &[PathBuf]) -> Vec<Change> {
        self.lost_watch = false;
        let wanted: std::collections::HashSet<&PathBuf> = paths.iter().collect();
        let gone: Vec<PathBuf> = self
            .by_path
            .keys()
            .filter(|p| !wanted.contains(p))
            .cloned()
            .collect();
        for path in gone {
            if let Some(wd) = self.by_path.remove(&path) {
                self.by_wd.remove(&wd);
                if let Some((watches, _)) = self.inotify.as_mut() {
                    // Fails when the record was removed already (the watch went with it).
                    let _ = watches.remove(wd);
                }
            }
        }
        self.unwatched.retain(|p, _| wanted.contains(p));

        let mut due = Vec::new();
        for path in paths {
            if self.by_path.contains_key(path) {
                continue;
            }
            if self.add(path) {
                // Watched from now on; what it says so far is read once.
                self.unwatched.remove(path);
                due.push(Change { path: path.clone() });
                continue;
            }
            let now = stamp(path);
            let before = self.unwatched.insert(path.clone(), now);
            if now.is_some() && before != Some(now) {
                due.push(Change { path: path.clone() });
            }
        }
        due
    }

    /// Adds a watch on `path`; false when it cannot (no such file yet, no inotify).
    fn add(&mut self, path: &Path) -> bool {
        let Some((watches, _)) = self.inotify.as_mut() else {
            return false;
        };
        let mask = WatchMask::MODIFY | WatchMask::DELETE_SELF | WatchMask::MOVE_SELF;
        match watches.add(path, mask) {
            Ok(wd) => {
                self.by_wd.insert(wd.clone(), path.to_path_buf());
                self.by_path.insert(path.to_path_buf(), wd);
                true
            }
            Err(e) => {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::debug!(path = %path.display(), error = %e, "cannot watch log drop record");
                }
                false
            }
        }
    }

    /// Waits until watched records change and returns them. A record removed or moved
    /// away loses its watch (the next [`RecordWatch::follow`] watches its path again); a
    /// queue overflow reads every watched record. Never returns without inotify.
    pub(super) async fn changed(&mut self) -> Vec<Change> {
        let Some((_, events)) = self.inotify.as_mut() else {
            return std::future::pending().await;
        };
        let event = match events.next().await {
            Some(Ok(event)) => event,
            Some(Err(e)) => {
                tracing::warn!(error = %e, "the log drop records' watch failed; they are looked at every 2 s from now on");
                return self.lose_inotify();
            }
            None => return self.lose_inotify(),
        };
        if event.mask.contains(EventMask::Q_OVERFLOW) {
            return self
                .by_path
                .keys()
                .map(|p| Change { path: p.clone() })
                .collect();
        }
        if event
            .mask
            .intersects(EventMask::IGNORED | EventMask::DELETE_SELF | EventMask::MOVE_SELF)
        {
            if let Some(path) = self.by_wd.remove(&event.wd) {
                self.by_path.remove(&path);
                self.lost_watch = true;
            }
            return Vec::new();
        }
        match self.by_wd.get(&event.wd) {
            Some(path) if event.mask.contains(EventMask::MODIFY) => {
                vec![Change { path: path.clone() }]
            }
            _ => Vec::new(),
        }
    }

    /// Drops inotify: every record is looked at with stat from the next follow on, and
    /// all are read once now.
    fn lose_inotify(&mut self) -> Vec<Change> {
        self.inotify = None;
        self.lost_watch = true;
        self.by_wd.clear();
        self.by_path
            .drain()
            .map(|(path, _)| Change { path })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileExt as _;
    use std::time::Duration;

    use super::*;

    fn paths(changes: Vec<Change>) -> Vec<PathBuf> {
        changes.into_iter().map(|c| c.path).collect()
    }

    /// The next change; a generous bound only so that a broken watch fails instead of
    /// hanging the test.
    async fn next_change(w: &mut RecordWatch) -> Vec<PathBuf> {
        tokio::time::timeout(Duration::from_secs(30), w.changed())
            .await
            .map(paths)
            .expect("no inotify event for a rewritten record")
    }

    #[tokio::test]
    async fn records_are_read_when_watched_and_when_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let record = dir.path().join("log-drops.json");
        let mut w = RecordWatch::new();
        assert!(w.inotify.is_some(), "inotify must work on this host");

        // Not created yet: nothing to read, looked at again next time.
        assert!(w.follow(std::slice::from_ref(&record)).is_empty());
        std::fs::write(&record, b"{}").unwrap();
        // Now watched, and read once for what it says so far.
        assert_eq!(
            paths(w.follow(std::slice::from_ref(&record))),
            std::slice::from_ref(&record)
        );
        assert!(w.follow(std::slice::from_ref(&record)).is_empty());

        // Rewritten in place, as the shim does: the watch reports it.
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&record)
            .unwrap();
        file.write_all_at(b"{ }", 0).unwrap();
        assert_eq!(next_change(&mut w).await, std::slice::from_ref(&record));

        assert!(
            w.at_rest(),
            "every record watched: a check has nothing to do"
        );

        // Removed: its watch goes; created again, it is watched and read again.
        drop(file);
        std::fs::remove_file(&record).unwrap();
        loop {
            if next_change(&mut w).await.is_empty() && !w.by_path.contains_key(&record) {
                break;
            }
        }
        assert!(!w.at_rest(), "a lost watch wants the next check");
        assert!(w.follow(std::slice::from_ref(&record)).is_empty());
        assert!(
            !w.at_rest(),
            "a record not there yet is looked at every check"
        );
        std::fs::write(&record, b"{}").unwrap();
        assert_eq!(
            paths(w.follow(std::slice::from_ref(&record))),
            std::slice::from_ref(&record)
        );

        assert!(w.at_rest());

        // No longer a current container's: unwatched and forgotten.
        assert!(w.follow(&[]).is_empty());
        assert!(w.by_path.is_empty() && w.by_wd.is_empty() && w.unwatched.is_empty());
    }

    #[test]
    fn without_inotify_a_changed_stamp_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let record = dir.path().join("log-drops.json");
        let mut w = RecordWatch {
            inotify: None,
            by_wd: HashMap::new(),
            by_path: HashMap::new(),
            unwatched: HashMap::new(),
            lost_watch: false,
        };
        std::fs::write(&record, b"{}").unwrap();
        assert_eq!(
            paths(w.follow(std::slice::from_ref(&record))),
            std::slice::from_ref(&record)
        );
        assert!(w.follow(std::slice::from_ref(&record)).is_empty());
        // A longer content: the size alone tells (the mtime may not move within a tick).
        std::fs::write(&record, b"{ }").unwrap();
        assert_eq!(
            paths(w.follow(std::slice::from_ref(&record))),
            std::slice::from_ref(&record)
        );
    }
}
