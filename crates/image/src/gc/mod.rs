//! Image garbage collection with the kubelet's semantics (`image_gc_manager.go`,
//! reference/kubelet-semantics.md §9), without its known races.
//!
//! - **Thresholds**: when `usage% = 100 − available·100/capacity ≥ high`, free
//!   `capacity·(100−low)/100 − available` bytes by deleting images that are not in use,
//!   not pinned and were first detected at least `min_age` ago, least recently used
//!   first (never used first, then by first detection). `high = 100` disables it
//!   (kubernetes#79929: the kubelet still collected at 100). `max_age` deletes unused
//!   images idle for longer, whatever the usage.
//! - **Images, not names**: an image is a manifest digest; its references go together.
//!   Bytes are counted only for content nothing else names (shared layers count when
//!   their last user goes), and unreferenced leftovers (`podhost rmi`, other platforms
//!   of an archive, an interrupted GC) count first.
//! - **Crash safety**: references are removed first (one atomic index write), then the
//!   content nothing names any more; a snapshot is renamed to a temp name before it is
//!   deleted, so a crash never leaves a reference to missing content nor a half-deleted
//!   snapshot under its real name.
//! - **Concurrency**: GC deletes only under the exclusive side of the GC barrier
//!   (`images/gc.lock`); loads (and pulls) hold its shared side from their first blob
//!   to their index update, and [`ImageStore::resolve`] holds it too. The in-use set is
//!   evaluated under the barrier, so an image leased by a starting pod
//!   ([`ImageLeases`], kubernetes#18140) before it resolves its image is always seen.
//!   A reference touched or pinned while GC was choosing is not deleted.
//! - **Dead containers** (kubernetes#27169): containers, running or exited, keep their
//!   image in use until container GC ([`crate::gc`]) removes them. Content of an in-use
//!   manifest that no reference names any more (re-tagged) and every snapshot that is
//!   a lower dir of a mounted overlay are kept, whatever else happens.

mod barrier;
mod content;
mod leases;
mod pass;
mod select;
mod usage;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::ImageStore;
use super::error::ImageError;
use pass::full_pass;

pub use barrier::ContentGuard;
pub(crate) use barrier::shared as content_guard;
pub use leases::{ImageLease, ImageLeases};
pub use usage::FsUsage;

/// How long a GC pass waits for loads in progress before it gives up this round.
pub const LOCK_WAIT: Duration = Duration::from_secs(120);

/// Image GC settings; defaults are the kubelet's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageGcPolicy {
    /// Usage percent at or above which GC runs (kubelet 85; 100 disables it).
    pub high_threshold_percent: u8,
    /// Usage percent GC frees down to (kubelet 80).
    pub low_threshold_percent: u8,
    /// Images first detected less than this long ago are never deleted (kubelet 2 min).
    pub min_age: Duration,
    /// Unused images idle longer than this are deleted whatever the usage (kubelet:
    /// off).
    pub max_age: Option<Duration>,
}

impl Default for ImageGcPolicy {
    fn default() -> Self {
        ImageGcPolicy {
            high_threshold_percent: 85,
            low_threshold_percent: 80,
            min_age: Duration::from_secs(120),
            max_age: None,
        }
    }
}

/// What keeps images from being collected.
pub trait InUse {
    /// Normalized references and `sha256:` manifest digests that any container
    /// (running OR exited, not yet removed) uses, plus images a starting pod has
    /// selected. References are normalized again here; a `name@sha256:…` also holds
    /// its digest. Called once per GC pass, under the GC barrier.
    fn in_use(&self) -> HashSet<String>;
}

impl InUse for HashSet<String> {
    fn in_use(&self) -> HashSet<String> {
        self.clone()
    }
}

impl<T: InUse + ?Sized> InUse for &T {
    fn in_use(&self) -> HashSet<String> {
        (**self).in_use()
    }
}

/// The union of two sources, e.g. `(&containers, &leases)`.
impl<A: InUse, B: InUse> InUse for (A, B) {
    fn in_use(&self) -> HashSet<String> {
        let mut out = self.0.in_use();
        out.extend(self.1.in_use());
        out
    }
}

/// What a GC pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Bytes of blobs and snapshots deleted.
    pub freed_bytes: u64,
    /// References deleted, sorted.
    pub deleted: Vec<String>,
    /// Bytes the thresholds asked for (0 below the high threshold).
    pub target_bytes: u64,
    /// `target_bytes − freed_bytes` when GC could not free enough (the kubelet's
    /// `FreeDiskSpaceFailed`).
    pub shortfall_bytes: u64,
}

/// One GC pass: statvfs of the store's filesystem, and nothing more unless usage is at
/// or above the high threshold (or `force_below_high`, which frees down to the low
/// threshold from any usage; a policy with `low_threshold_percent: 0` then deletes
/// every eligible image) or `max_age` finds idle images. Blocking I/O: call it from
/// `spawn_blocking`.
pub fn image_gc(
    store: &ImageStore,
    policy: &ImageGcPolicy,
    in_use: &dyn InUse,
    now: DateTime<Utc>,
    force_below_high: bool,
) -> Result<GcReport, ImageError> {
    let usage = store.image_fs_usage()?;
    image_gc_with_usage(store, policy, in_use, now, force_below_high, usage)
}

/// [`image_gc`] with the filesystem usage given (tests, benchmarks, or a caller that
/// measured it already).
pub fn image_gc_with_usage(
    store: &ImageStore,
    policy: &ImageGcPolicy,
    in_use: &dyn InUse,
    now: DateTime<Utc>,
    force_below_high: bool,
    usage: FsUsage,
) -> Result<GcReport, ImageError> {
    let used = usage.used_percent();
    let triggered = force_below_high
        || (policy.high_threshold_percent < 100 && used >= policy.high_threshold_percent);
    let target = if triggered {
        usage.amount_to_free(policy.low_threshold_percent)
    } else {
        0
    };
    if target == 0 && !any_idle_past_max_age(store, policy, now)? {
        tracing::debug!(used_percent = used, "image GC: nothing to do");
        return Ok(GcReport::default());
    }
    tracing::info!(
        used_percent = used,
        high = policy.high_threshold_percent,
        low = policy.low_threshold_percent,
        target_bytes = target,
        "image GC: collecting"
    );
    let started = Instant::now();
    let Some(done) = full_pass(store, Some((policy, target)), in_use, now)? else {
        tracing::warn!(wait = ?LOCK_WAIT, "image GC: image loads in progress held the store; skipped");
        return Ok(GcReport {
            target_bytes: target,
            shortfall_bytes: target,
            ..GcReport::default()
        });
    };
    let report = GcReport {
        freed_bytes: done.freed,
        shortfall_bytes: target.saturating_sub(done.freed),
        deleted: done.deleted,
        target_bytes: target,
    };
    tracing::info!(
        deleted = report.deleted.len(),
        freed_bytes = report.freed_bytes,
        elapsed_ms = podhost_model::convert::millis(started.elapsed()),
        "image GC: done"
    );
    if report.shortfall_bytes > 0 {
        tracing::warn!(
            target_bytes = target,
            freed_bytes = report.freed_bytes,
            "image GC: could not free enough: the rest is in use, pinned or too young"
        );
    }
    Ok(report)
}

/// Deletes every blob and snapshot that no reference names (after `podhost rmi`, say)
/// and returns the bytes freed. Snapshots mounted as an overlay lower dir are kept;
/// use [`collect_unreferenced_keeping`] to keep the content of in-use manifests that no
/// reference names any more, too (a running container's image re-tagged).
pub fn collect_unreferenced(store: &ImageStore) -> Result<u64, ImageError> {
    collect_unreferenced_keeping(store, &HashSet::new())
}

/// [`collect_unreferenced`], also keeping the content of every manifest `in_use` names.
pub fn collect_unreferenced_keeping(
    store: &ImageStore,
    in_use: &dyn InUse,
) -> Result<u64, ImageError> {
    match full_pass(store, None, in_use, Utc::now())? {
        Some(done) => Ok(done.freed),
        None => Err(ImageError::io(
            "lock (image loads in progress)",
            barrier::barrier_path(store.root_dir()),
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("still held after {LOCK_WAIT:?}; try again"),
            ),
        )),
    }
}

/// True if `max_age` is set and some unpinned reference has been idle for longer
/// (read from the index only: cheap).
fn any_idle_past_max_age(
    store: &ImageStore,
    policy: &ImageGcPolicy,
    now: DateTime<Utc>,
) -> Result<bool, ImageError> {
    let Some(max) = policy.max_age else {
        return Ok(false);
    };
    let index = store.ref_file().read()?;
    Ok(index.images.values().any(|e| {
        let idle = now - e.last_used.unwrap_or(e.first_detected());
        !e.pinned && idle.to_std().is_ok_and(|d| d > max)
    }))
}
