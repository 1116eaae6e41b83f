//! A token bucket, as client-go's `flowcontrol` limiters: tokens come back at `rate`
//! per second up to `burst`. Two uses in the node: the API client's request limiter
//! (`cluster::rate`, the kubelet's `kubeAPIQPS`/`kubeAPIBurst`), where a request without
//! a token waits its turn, and the event correlator's spam filter, where an event
//! without a token is dropped.
//!
//! Pure: time is passed in, as seconds on any clock that does not go backwards (a
//! monotonic instant, or an event's timestamp).

/// Tokens refilled at `rate` per second up to `burst`; full when made.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    at: f64,
}

impl TokenBucket {
    /// A full bucket at time `now` (seconds).
    pub fn new(rate: f64, burst: u32, now: f64) -> Self {
        Self {
            rate,
            burst: f64::from(burst),
            tokens: f64::from(burst),
            at: now,
        }
    }

    fn refill(&mut self, now: f64) {
        let elapsed = (now - self.at).max(0.0);
        self.at = self.at.max(now);
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
    }

    /// Takes a token at `now`: the seconds to wait before the request may go (zero
    /// when a token was there). The token is taken either way — the bucket goes into
    /// debt — so that a caller who waits the answer has its request paid for and
    /// callers queue in order.
    pub fn take(&mut self, now: f64) -> f64 {
        self.refill(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            0.0
        } else {
            -self.tokens / self.rate
        }
    }

    /// Takes a token at `now` if one is there; `false` (and nothing taken) if not.
    pub fn try_take(&mut self, now: f64) -> bool {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// When the bucket was last used (seconds), for callers that keep many buckets
    /// and drop the oldest.
    pub fn last_used(&self) -> f64 {
        self.at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_goes_at_once_then_the_rate_holds() {
        let mut b = TokenBucket::new(50.0, 100, 0.0);
        for _ in 0..100 {
            assert_eq!(b.take(0.0), 0.0);
        }
        // The 101st waits one token's time, the 102nd two.
        assert!((b.take(0.0) - 0.02).abs() < 1e-9);
        assert!((b.take(0.0) - 0.04).abs() < 1e-9);
        // A second later 50 tokens came back, minus the two owed.
        for _ in 0..48 {
            assert_eq!(b.take(1.0), 0.0);
        }
        assert!(b.take(1.0) > 0.0);
    }

    #[test]
    fn the_bucket_never_holds_more_than_the_burst() {
        let mut b = TokenBucket::new(50.0, 3, 0.0);
        for _ in 0..3 {
            assert_eq!(b.take(3600.0), 0.0);
        }
        assert!(b.take(3600.0) > 0.0);
    }

    #[test]
    fn try_take_drops_instead_of_owing() {
        // The spam filter's numbers: 25 at once, then one per 5 minutes.
        let mut b = TokenBucket::new(1.0 / 300.0, 25, 0.0);
        for _ in 0..25 {
            assert!(b.try_take(10.0));
        }
        assert!(!b.try_take(10.0));
        assert!(!b.try_take(10.0), "a refused take owes nothing");
        assert!(!b.try_take(300.0));
        assert!(b.try_take(310.0));
        assert!(!b.try_take(310.0));
    }

    #[test]
    fn time_going_backwards_gives_nothing_back() {
        let mut b = TokenBucket::new(1.0, 1, 100.0);
        assert!(b.try_take(100.0));
        assert!(!b.try_take(50.0));
        assert!(!b.try_take(100.5));
        assert!(b.try_take(101.0));
        assert_eq!(b.last_used(), 101.0);
    }
}
