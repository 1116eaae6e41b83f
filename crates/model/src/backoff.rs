//! CrashLoopBackOff arithmetic, as the kubelet computes it (kubelet-semantics §3).
//!
//! The first restart is immediate; then the delay starts at `initial` and doubles up to
//! `max`. The entry is forgotten (back to the start) once the container ran for longer than
//! the reset window (600 s in the kubelet) before it exited.

use std::time::Duration;

/// The kubelet's `initialCrashLoopBackOff`.
pub const DEFAULT_INITIAL: Duration = Duration::from_secs(10);
/// The kubelet's `MaxCrashLoopBackOff`.
pub const DEFAULT_MAX: Duration = Duration::from_secs(300);
/// A container that ran this long before exiting starts again from no back-off.
pub const RESET_AFTER: Duration = Duration::from_secs(600);

/// Back-off settings: the daemon may shorten them for tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffPolicy {
    pub initial: Duration,
    pub max: Duration,
}

impl Default for BackoffPolicy {
    fn default() -> Self {
        Self {
            initial: DEFAULT_INITIAL,
            max: DEFAULT_MAX,
        }
    }
}

/// Back-off state of one container (keyed by pod UID + container name by the caller).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Backoff {
    /// The delay the next restart waits, or `None` when the next restart is immediate.
    current: Option<Duration>,
}

impl Backoff {
    /// The delay before the restart that follows an exit after `ran_for`, and the state
    /// once that restart has begun; `self` is unchanged (the pod-sync core decides with it).
    pub fn after_exit(&self, policy: &BackoffPolicy, ran_for: Duration) -> (Duration, Self) {
        let mut next = self.clone();
        let delay = next.next_delay(policy, ran_for);
        (delay, next)
    }

    /// Delay before the `failures`-th retry of a blocked start (image pull, config): the
    /// initial delay, doubling, capped (the kubelet's image back-off).
    pub fn retry_delay(policy: &BackoffPolicy, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(31);
        policy
            .initial
            .saturating_mul(1u32 << doublings)
            .min(policy.max)
            .max(policy.initial.min(policy.max))
    }

    /// The state after `restarts` quick restarts in a row: what a daemon that finds a
    /// container at attempt `restarts` rebuilds (the run times are not kept on disk).
    pub fn after_restarts(policy: &BackoffPolicy, restarts: u32) -> Self {
        let mut b = Self::default();
        for _ in 0..restarts.min(64) {
            b.next_delay(policy, Duration::ZERO);
        }
        b
    }

    /// Records an exit after the container ran for `ran_for`, and returns how long to wait
    /// before starting it again.
    pub fn next_delay(&mut self, policy: &BackoffPolicy, ran_for: Duration) -> Duration {
        if ran_for > RESET_AFTER {
            self.current = None;
        }
        let delay = self.current.unwrap_or(Duration::ZERO);
        self.current = Some(match self.current {
            None => policy.initial.min(policy.max),
            Some(d) => (d * 2).min(policy.max),
        });
        delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubelet_sequence_first_immediate_then_doubling_capped() {
        let policy = BackoffPolicy::default();
        let mut b = Backoff::default();
        let got: Vec<u64> = (0..9)
            .map(|_| b.next_delay(&policy, Duration::from_secs(1)).as_secs())
            .collect();
        assert_eq!(got, vec![0, 10, 20, 40, 80, 160, 300, 300, 300]);
    }

    #[test]
    fn long_run_resets_the_backoff() {
        let policy = BackoffPolicy::default();
        let mut b = Backoff::default();
        for _ in 0..5 {
            b.next_delay(&policy, Duration::from_secs(1));
        }
        assert_eq!(
            b.next_delay(&policy, Duration::from_secs(601)),
            Duration::ZERO
        );
        assert_eq!(b.next_delay(&policy, Duration::from_secs(1)).as_secs(), 10);
    }

    #[test]
    fn after_exit_leaves_the_state_alone() {
        let policy = BackoffPolicy::default();
        let b = Backoff::default();
        let (d0, b1) = b.after_exit(&policy, Duration::from_secs(1));
        assert_eq!((d0, b.clone()), (Duration::ZERO, Backoff::default()));
        let (d1, _) = b1.after_exit(&policy, Duration::from_secs(1));
        assert_eq!(d1, Duration::from_secs(10));
    }

    #[test]
    fn rebuilt_after_restarts_continues_the_sequence() {
        let policy = BackoffPolicy::default();
        let (d, _) = Backoff::after_restarts(&policy, 3).after_exit(&policy, Duration::ZERO);
        assert_eq!(d.as_secs(), 40);
        assert_eq!(Backoff::after_restarts(&policy, 0), Backoff::default());
        let (d, _) = Backoff::after_restarts(&policy, u32::MAX).after_exit(&policy, Duration::ZERO);
        assert_eq!(d.as_secs(), 300);
    }

    #[test]
    fn retry_delays_double_from_the_initial_and_cap() {
        let policy = BackoffPolicy::default();
        let got: Vec<u64> = (1..=8)
            .map(|n| Backoff::retry_delay(&policy, n).as_secs())
            .collect();
        assert_eq!(got, vec![10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(Backoff::retry_delay(&policy, 0).as_secs(), 10);
        assert_eq!(Backoff::retry_delay(&policy, u32::MAX).as_secs(), 300);
    }

    #[test]
    fn shortened_policy_for_tests() {
        let policy = BackoffPolicy {
            initial: Duration::from_millis(200),
            max: Duration::from_millis(500),
        };
        let mut b = Backoff::default();
        let got: Vec<u128> = (0..5)
            .map(|_| b.next_delay(&policy, Duration::ZERO).as_millis())
            .collect();
        assert_eq!(got, vec![0, 200, 400, 500, 500]);
    }
}
