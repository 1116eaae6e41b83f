//! Grace-period arithmetic of container termination (kubelet-semantics §1).

use std::time::Duration;

/// The API default of `terminationGracePeriodSeconds`.
pub const DEFAULT_GRACE_SECONDS: i64 = 30;
/// The kubelet's `minimumGracePeriodInSeconds`: the stop signal always gets this long.
pub const MINIMUM_STOP_GRACE: Duration = Duration::from_secs(2);

/// The pod's grace period from its spec: default 30 s, never below 1 s (the pod worker's minimum).
pub fn pod_grace(termination_grace_period_seconds: Option<i64>) -> Duration {
    let secs = termination_grace_period_seconds.unwrap_or(DEFAULT_GRACE_SECONDS);
    Duration::from_secs(super::convert::non_negative_u64(secs.max(1)))
}

/// What is left for the stop signal after the preStop hook ran for `hook_took`.
///
/// The kubelet deducts the hook's time truncated to whole seconds, then floors the rest at 2 s.
pub fn stop_grace_after_hook(pod_grace: Duration, hook_took: Duration) -> Duration {
    let deducted = Duration::from_secs(hook_took.as_secs());
    pod_grace.saturating_sub(deducted).max(MINIMUM_STOP_GRACE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_and_minimum_pod_grace() {
        assert_eq!(pod_grace(None), Duration::from_secs(30));
        assert_eq!(pod_grace(Some(0)), Duration::from_secs(1));
        assert_eq!(pod_grace(Some(-5)), Duration::from_secs(1));
        assert_eq!(pod_grace(Some(7)), Duration::from_secs(7));
    }

    #[test]
    fn hook_time_is_truncated_and_deducted() {
        let g = Duration::from_secs(30);
        assert_eq!(
            stop_grace_after_hook(g, Duration::from_millis(4900)),
            Duration::from_secs(26)
        );
        assert_eq!(stop_grace_after_hook(g, Duration::ZERO), g);
    }

    #[test]
    fn floor_is_two_seconds() {
        let g = Duration::from_secs(5);
        assert_eq!(
            stop_grace_after_hook(g, Duration::from_secs(5)),
            Duration::from_secs(2)
        );
        assert_eq!(
            stop_grace_after_hook(g, Duration::from_secs(60)),
            Duration::from_secs(2)
        );
    }
}
