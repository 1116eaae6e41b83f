//! Polling the store's change counter: for periodic loops that rebuild something from
//! the pods' records only when a record changed since their last look.

use tokio::sync::watch::Receiver;

/// Whether any pod's record changed since the last [`PodChanges::take`].
#[derive(Debug)]
pub struct PodChanges {
    changes: Receiver<u64>,
    /// True until the first `take`: a new follower has seen nothing yet.
    unseen: bool,
}

impl PodChanges {
    pub(super) fn new(changes: Receiver<u64>) -> Self {
        Self {
            changes,
            unseen: true,
        }
    }

    /// True on the first call and whenever a record changed since the last call (also
    /// when the store is gone). Called before the store is read: a change made while it
    /// is read is seen at the next call.
    pub fn take(&mut self) -> bool {
        let changed =
            std::mem::take(&mut self.unseen) || self.changes.has_changed().unwrap_or(true);
        if changed {
            self.changes.borrow_and_update();
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::pod;
    use crate::StatusStore;
    use podhost_disk::Layout;

    #[test]
    fn first_take_and_each_change_are_seen_once() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path().join("root"), dir.path().join("logs"));
        let store = StatusStore::load(layout, "node");
        let mut changes = store.follow_changes();
        assert!(changes.take(), "a new follower builds once");
        assert!(!changes.take());
        store.admit(&pod("a"));
        store.update_status("a", |s| s.message = Some("x".into()));
        assert!(changes.take(), "changes since the last look");
        assert!(!changes.take(), "seen once");
        store.remove("a");
        assert!(changes.take(), "a removal is a change");
    }
}
