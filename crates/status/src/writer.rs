//! The one thread that writes pod records to disk, so that no API read and no tokio
//! worker thread ever waits behind a write + fsync + rename.
//!
//! Mutations only mark a pod dirty (a message on a channel). The writer drains every
//! message that is waiting, writes each dirty pod once, from a snapshot of its latest
//! in-memory state taken at write time: a burst of updates costs one write, and an
//! older state can never land after a newer one (there is one writer, and each snapshot
//! is at least as new as the one before). Removal is ordered with writes through the
//! write gate: see [`Shared::stop_persisting`].

use std::collections::{BTreeSet, HashMap};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard};

use super::store::{Inner, PodRecord};
use podhost_disk::Layout;
use podhost_disk::write_json_atomic;

/// The pod's record file in its pod dir.
pub(super) const STATUS_FILE: &str = "status.json";

/// State shared by the store (readers and mutators) and the writer thread.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) layout: Layout,
    pub(super) inner: Mutex<Inner>,
    /// Held by the writer for the whole of one file write (never while waiting for work).
    gate: Mutex<()>,
    /// What the writer did, for tests and the log.
    stats: Mutex<WriterStats>,
}

/// Counters of the writer's work.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriterStats {
    /// Batches handled (one wake-up each).
    pub batches: u64,
    /// Files written.
    pub writes: u64,
    /// Writes that failed (logged).
    pub failures: u64,
    /// `(uid, version)` of every write, in order (kept only in tests).
    #[cfg(test)]
    pub history: Vec<(String, u64)>,
}

pub(super) enum Job {
    /// The pod's in-memory record changed.
    Dirty(String),
    /// Answered once everything sent before it is on disk.
    Flush(Sender<()>),
}

impl Shared {
    pub(super) fn new(layout: Layout, inner: Inner) -> Self {
        Self {
            layout,
            inner: Mutex::new(inner),
            gate: Mutex::new(()),
            stats: Mutex::new(WriterStats::default()),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn gate(&self) -> MutexGuard<'_, ()> {
        self.gate.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Holds the gate as a write in progress would (tests).
    #[cfg(test)]
    pub(super) fn gate_for_tests(&self) -> MutexGuard<'_, ()> {
        self.gate()
    }

    pub(super) fn stats(&self) -> WriterStats {
        self.stats.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Stops writing the pod's record. On return no write of it is in flight and none
    /// will start, so its directory may be removed: a writer that took its snapshot
    /// before the flag changed holds the gate until its write is done, and one that
    /// takes the gate afterwards sees the flag. Waits at most one file write.
    pub(super) fn stop_persisting(&self, uid: &str) {
        if let Some(rec) = self.lock().pods.get_mut(uid) {
            rec.persisted = false;
        }
        drop(self.gate());
    }

    /// Writes the latest state of `uid` if it is newer than what `written` says is on
    /// disk.
    fn write_one(&self, uid: &str, written: &mut HashMap<String, u64>) {
        let _gate = self.gate();
        let snapshot: Option<PodRecord> = self.lock().pods.get(uid).cloned();
        let Some(rec) = snapshot.filter(|r| r.persisted) else {
            written.remove(uid);
            return;
        };
        if written.get(uid).is_some_and(|v| *v >= rec.version) {
            return;
        }
        let path = self.layout.pod_dir(uid).join(STATUS_FILE);
        let result = write_json_atomic(&path, &rec);
        let mut stats = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        match result {
            Ok(()) => {
                written.insert(uid.to_string(), rec.version);
                stats.writes += 1;
                #[cfg(test)]
                stats.history.push((uid.to_string(), rec.version));
            }
            Err(source) => {
                stats.failures += 1;
                let e = super::StatusError::Persist {
                    pod: rec.name().to_string(),
                    path,
                    source,
                };
                tracing::error!(error = %e, "cannot persist pod status");
            }
        }
    }
}

/// Starts the writer thread; it ends once every sender is gone and the queue is empty.
pub(super) fn start(shared: Arc<Shared>) -> (Sender<Job>, std::thread::JoinHandle<()>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = std::thread::Builder::new()
        .name("status-writer".into())
        .spawn(move || run(&shared, rx))
        .unwrap_or_else(|e| panic!("cannot start the status writer thread: {e}"));
    (tx, handle)
}

fn run(shared: &Shared, rx: Receiver<Job>) {
    let mut written: HashMap<String, u64> = HashMap::new();
    let health =
        podhost_metrics::health().on_demand("status writer", podhost_metrics::health::BUSY_LIMIT);
    while let Ok(first) = rx.recv() {
        health.busy();
        let mut dirty = BTreeSet::new();
        let mut flushes = Vec::new();
        for job in std::iter::once(first).chain(rx.try_iter()) {
            match job {
                Job::Dirty(uid) => {
                    dirty.insert(uid);
                }
                Job::Flush(ack) => flushes.push(ack),
            }
        }
        for uid in &dirty {
            shared.write_one(uid, &mut written);
            health.beat();
        }
        health.idle();
        shared
            .stats
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .batches += 1;
        for ack in flushes {
            let _ = ack.send(());
        }
    }
}
