//! A token bucket for the node's writes to the API server, as client-go's rate limiter
//! under the kubelet's `kubeAPIQPS` (50) and `kubeAPIBurst` (100): a burst of pod
//! starts is written at once, a storm of changes is spread out instead of answered
//! with the server's 429s.

use std::time::{Duration, Instant};

/// The kubelet's default `kubeAPIQPS`.
pub const DEFAULT_QPS: f64 = 50.0;
/// The kubelet's default `kubeAPIBurst`.
pub const DEFAULT_BURST: u32 = 100;

/// Tokens refilled at `qps` per second up to `burst`.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    at: Instant,
}

impl TokenBucket {
    /// A full bucket.
    pub fn new(qps: f64, burst: u32, now: Instant) -> Self {
        Self {
            qps,
            burst: f64::from(burst),
            tokens: f64::from(burst),
            at: now,
        }
    }

    /// Takes a token at `now`: how long to wait before the request may go (zero when a
    /// token was there). The token is taken either way: a caller that waits the
    /// answer has its request paid for.
    pub fn take(&mut self, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = now;
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst) - 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.qps)
        }
    }

    /// Takes a token, sleeping until it is there.
    pub async fn acquire(&mut self) {
        let wait = self.take(Instant::now());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_goes_at_once_then_the_rate_holds() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(50.0, 100, t0);
        for _ in 0..100 {
            assert_eq!(b.take(t0), Duration::ZERO);
        }
        // The 101st waits one token's time, the 102nd two.
        assert_eq!(b.take(t0), Duration::from_millis(20));
        assert_eq!(b.take(t0), Duration::from_millis(40));
        // A second later 50 tokens came back, minus the two owed.
        let t1 = t0 + Duration::from_secs(1);
        for _ in 0..48 {
            assert_eq!(b.take(t1), Duration::ZERO);
        }
        assert!(b.take(t1) > Duration::ZERO);
    }

    #[test]
    fn the_bucket_never_holds_more_than_the_burst() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(50.0, 3, t0);
        let later = t0 + Duration::from_secs(3600);
        for _ in 0..3 {
            assert_eq!(b.take(later), Duration::ZERO);
        }
        assert!(b.take(later) > Duration::ZERO);
    }
}
