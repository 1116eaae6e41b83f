//! Which images to delete (pure): the kubelet's order and accounting
//! (`image_gc_manager.go`), on images grouped by manifest digest (an image is a
//! manifest; its references are names, deleted together as the kubelet deletes an
//! image ID with all its tags).
//!
//! Bytes are counted only for content that nothing else still names, so deleting an
//! image whose layers another image shares frees (and counts) only what is its own.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::ImageGcPolicy;

/// One image (manifest) as GC sees it.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    /// Manifest digest.
    pub manifest: String,
    /// References naming it.
    pub refs: Vec<String>,
    /// Earliest first-detected time of its references.
    pub first_detected: DateTime<Utc>,
    /// Latest use of any of its references.
    pub last_used: Option<DateTime<Utc>>,
    /// Any reference pinned.
    pub pinned: bool,
    /// Used by a container, or leased by a starting pod.
    pub in_use: bool,
    /// Interned content ids, deduplicated.
    pub items: Vec<usize>,
}

/// Why an image was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    /// Unused for longer than `max_age`.
    MaxAge,
    /// Usage above the high threshold.
    Threshold,
}

/// How many bytes a pass must free, and how many it frees anyway.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Budget {
    /// Unreferenced content deleted whatever is selected.
    pub already_freed: u64,
    /// Bytes to free (0: only `max_age` deletions).
    pub target: u64,
}

/// The outcome of [`select`].
#[derive(Debug, Clone, Default)]
pub(crate) struct Selection {
    /// Indices into the candidates, in deletion order.
    pub victims: Vec<(usize, Reason)>,
    /// Bytes the victims free (content nothing else names), plus `already_freed`.
    pub planned_bytes: u64,
}

fn elapsed(now: DateTime<Utc>, then: DateTime<Utc>) -> Duration {
    (now - then).to_std().unwrap_or(Duration::ZERO)
}

/// Not in use, not pinned and detected at least `min_age` ago.
pub(crate) fn eligible(c: &Candidate, policy: &ImageGcPolicy, now: DateTime<Utc>) -> bool {
    !c.in_use && !c.pinned && elapsed(now, c.first_detected) >= policy.min_age
}

/// Eligible and unused (never used: since detection) for longer than `max_age`.
pub(crate) fn past_max_age(c: &Candidate, policy: &ImageGcPolicy, now: DateTime<Utc>) -> bool {
    policy.max_age.is_some_and(|max| {
        eligible(c, policy, now) && elapsed(now, c.last_used.unwrap_or(c.first_detected)) > max
    })
}

/// Chooses the images to delete: every image past `max_age`, then, while the bytes
/// freed (starting at `budget.already_freed`, the unreferenced content deleted
/// anyway) are below `budget.target`, eligible images by last use ascending (never used first), then
/// first detection. `roots` are content ids kept whatever happens (content of in-use
/// manifests no reference names any more, mounted snapshots). `size` gives an item's
/// bytes; it is asked only for items that become unreferenced.
pub(crate) fn select(
    candidates: &[Candidate],
    roots: &[usize],
    item_count: usize,
    budget: Budget,
    policy: &ImageGcPolicy,
    now: DateTime<Utc>,
    size: &mut dyn FnMut(usize) -> u64,
) -> Selection {
    let mut refcount = vec![0u32; item_count];
    for c in candidates {
        for &i in &c.items {
            refcount[i] += 1;
        }
    }
    for &i in roots {
        refcount[i] += 1;
    }
    let mut out = Selection {
        victims: Vec::new(),
        planned_bytes: budget.already_freed,
    };
    let target = budget.target;
    let mut take = |idx: usize, reason: Reason, out: &mut Selection| {
        for &i in &candidates[idx].items {
            refcount[i] -= 1;
            if refcount[i] == 0 {
                out.planned_bytes += size(i);
            }
        }
        out.victims.push((idx, reason));
    };
    let mut rest = Vec::new();
    for (idx, c) in candidates.iter().enumerate() {
        if past_max_age(c, policy, now) {
            take(idx, Reason::MaxAge, &mut out);
        } else if eligible(c, policy, now) {
            rest.push(idx);
        }
    }
    if out.planned_bytes >= target {
        return out;
    }
    rest.sort_by(|&a, &b| {
        let (a, b) = (&candidates[a], &candidates[b]);
        (a.last_used, a.first_detected, &a.manifest).cmp(&(
            b.last_used,
            b.first_detected,
            &b.manifest,
        ))
    });
    for idx in rest {
        if out.planned_bytes >= target {
            break;
        }
        take(idx, Reason::Threshold, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeDelta;

    fn t(mins: i64) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp(1_700_000_000, 0).unwrap() + TimeDelta::minutes(mins)
    }

    fn cand(name: &str, detected: i64, used: Option<i64>, items: &[usize]) -> Candidate {
        Candidate {
            manifest: format!("sha256:{name}"),
            refs: vec![name.to_string()],
            first_detected: t(detected),
            last_used: used.map(t),
            pinned: false,
            in_use: false,
            items: items.to_vec(),
        }
    }

    fn policy() -> ImageGcPolicy {
        ImageGcPolicy::default()
    }

    fn names(c: &[Candidate], s: &Selection) -> Vec<String> {
        s.victims
            .iter()
            .map(|(i, _)| c[*i].refs[0].clone())
            .collect()
    }

    fn b(already_freed: u64, target: u64) -> Budget {
        Budget {
            already_freed,
            target,
        }
    }

    /// Every item is 100 bytes.
    fn hundred(_: usize) -> u64 {
        100
    }

    #[test]
    fn lru_order_never_used_first_then_first_detected() {
        let c = vec![
            cand("used-late", 0, Some(50), &[0]),
            cand("never-b", 5, None, &[1]),
            cand("used-early", 0, Some(10), &[2]),
            cand("never-a", 1, None, &[3]),
        ];
        let s = select(&c, &[], 4, b(0, 400), &policy(), t(60), &mut hundred);
        assert_eq!(
            names(&c, &s),
            ["never-a", "never-b", "used-early", "used-late"]
        );
        let s = select(&c, &[], 4, b(0, 150), &policy(), t(60), &mut hundred);
        assert_eq!(names(&c, &s), ["never-a", "never-b"]);
        assert_eq!(s.planned_bytes, 200);
    }

    #[test]
    fn in_use_pinned_and_young_images_are_kept() {
        let mut c = vec![
            cand("in-use", 0, None, &[0]),
            cand("pinned", 0, None, &[1]),
            cand("young", 59, None, &[2]),
            cand("old", 0, None, &[3]),
        ];
        c[0].in_use = true;
        c[1].pinned = true;
        let s = select(&c, &[], 4, b(0, u64::MAX), &policy(), t(60), &mut hundred);
        assert_eq!(names(&c, &s), ["old"]);
        assert_eq!(s.planned_bytes, 100);
        // min_age 0: the young one goes too.
        let p = ImageGcPolicy {
            min_age: Duration::ZERO,
            ..policy()
        };
        let s = select(&c, &[], 4, b(0, u64::MAX), &p, t(60), &mut hundred);
        assert_eq!(names(&c, &s), ["old", "young"]);
    }

    #[test]
    fn shared_content_counts_only_when_its_last_user_goes() {
        // base (item 0) shared by a and b; c is in use and shares item 3 with b.
        let mut c = vec![
            cand("a", 0, Some(1), &[0, 1]),
            cand("b", 0, Some(2), &[0, 2, 3]),
            cand("c", 0, Some(3), &[3, 4]),
        ];
        c[2].in_use = true;
        let mut sizes = |i: usize| [1000, 10, 20, 30, 40][i];
        let s = select(&c, &[], 5, b(0, 15), &policy(), t(60), &mut sizes);
        assert_eq!(
            names(&c, &s),
            ["a", "b"],
            "a alone frees only its own 10 bytes"
        );
        assert_eq!(s.planned_bytes, 10 + 1000 + 20);
        // A root (e.g. a mounted snapshot) is never counted as freed.
        let s = select(&c, &[0], 5, b(0, u64::MAX), &policy(), t(60), &mut sizes);
        assert_eq!(s.planned_bytes, 10 + 20);
    }

    #[test]
    fn garbage_already_freed_counts_toward_the_target() {
        let c = vec![cand("a", 0, None, &[0])];
        let s = select(&c, &[], 1, b(500, 400), &policy(), t(60), &mut hundred);
        assert!(s.victims.is_empty());
        assert_eq!(s.planned_bytes, 500);
    }

    #[test]
    fn max_age_deletes_idle_images_whatever_the_target() {
        let mut c = vec![
            cand("idle", 0, Some(10), &[0]),
            cand("recent", 0, Some(55), &[1]),
            cand("never-used-old", 0, None, &[2]),
            cand("idle-pinned", 0, Some(0), &[3]),
        ];
        c[3].pinned = true;
        let p = ImageGcPolicy {
            max_age: Some(Duration::from_secs(30 * 60)),
            ..policy()
        };
        let s = select(&c, &[], 4, b(0, 0), &p, t(60), &mut hundred);
        assert_eq!(names(&c, &s), ["idle", "never-used-old"]);
        assert!(s.victims.iter().all(|(_, r)| *r == Reason::MaxAge));
    }
}
