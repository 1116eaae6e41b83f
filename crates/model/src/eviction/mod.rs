//! The eviction manager's pure parts (reference kubelet-semantics.md §10): thresholds
//! from the flags, one round's assessment (grace periods, minimum reclaim, node
//! conditions with their transition period), the ranking of pods and the message.
//! The readings and the loop are in `crate::eviction`.

mod decide;
mod rank;
mod threshold;

pub use decide::{Assessment, ConditionChange, EvictionState, Observation, Observations, is_met};
pub use rank::{ContainerUsage, PodUsage, eviction_message, format_quantity, pick_victim, rank};
pub use threshold::{
    DEFAULT_HARD, NodeCondition, Resource, Signal, Threshold, ThresholdValue, parse_duration,
    parse_thresholds,
};

use std::time::Duration;

/// The annotation that keeps a pod from being evicted (podhost's pods are all static,
/// which the kubelet never evicts; podhost does, unless a pod opts out).
pub const CRITICAL_ANNOTATION: &str = "podhost.io/critical";

/// The grace of a hard eviction (the kubelet's `immediateEvictionGracePeriodSeconds`;
/// the 2 s stop floor applies after it).
pub const HARD_EVICTION_GRACE: Duration = Duration::from_secs(1);

/// The grace a pod evicted for `threshold` gets: hard → [`HARD_EVICTION_GRACE`]; soft →
/// the pod's own grace, shortened to `max_pod_grace` when that is positive.
pub fn eviction_grace(threshold: &Threshold, max_pod_grace: i64, pod_grace: Duration) -> Duration {
    if threshold.is_hard() {
        return HARD_EVICTION_GRACE;
    }
    match u64::try_from(max_pod_grace) {
        Ok(max) if max > 0 => pod_grace.min(Duration::from_secs(max)),
        _ => pod_grace,
    }
}

/// A flag of the eviction manager that cannot be used as given.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum EvictionConfigError {
    #[error("{flag}: `{statement}` is not `signal<value` (only `<` is supported)")]
    Operator {
        flag: &'static str,
        statement: String,
    },
    #[error(
        "{flag}: unknown signal `{name}` (podhost reads memory.available, nodefs.available, \
         nodefs.inodesFree, imagefs.available, imagefs.inodesFree, pid.available)"
    )]
    Signal { flag: &'static str, name: String },
    #[error("{flag}: {signal} is given twice")]
    Duplicate {
        flag: &'static str,
        signal: &'static str,
    },
    #[error(
        "eviction threshold {signal}: `{value}` is not a quantity or a percentage \
         (use e.g. 100Mi or 10%; not negative, at most 100%)"
    )]
    Value { signal: &'static str, value: String },
    #[error(
        "--eviction-soft: soft threshold {signal} has no grace period; give it in \
         --eviction-soft-grace-period as {signal}=1m30s"
    )]
    NoGrace { signal: &'static str },
    #[error(
        "--eviction-soft-grace-period: {signal}: `{value}` is not a duration (e.g. 90s, 1m30s)"
    )]
    Duration { signal: &'static str, value: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hard_evictions_are_immediate_and_soft_ones_capped_by_the_max_pod_grace() {
        let t = parse_thresholds(
            "memory.available<1Gi",
            "nodefs.available<10%",
            "nodefs.available=1m",
            "",
        )
        .unwrap();
        let thirty = Duration::from_secs(30);
        assert_eq!(eviction_grace(&t[0], 5, thirty), HARD_EVICTION_GRACE);
        assert_eq!(eviction_grace(&t[1], 5, thirty), Duration::from_secs(5));
        assert_eq!(eviction_grace(&t[1], 60, thirty), thirty);
        assert_eq!(eviction_grace(&t[1], 0, thirty), thirty);
        assert_eq!(eviction_grace(&t[1], -1, thirty), thirty);
    }
}
