//! The API client's request limiter, as client-go's under the kubelet's `kubeAPIQPS`
//! (50) and `kubeAPIBurst` (100): one per client, shared by everything that writes
//! through it (pod status, mirror pods), so that a burst of pod starts is written at
//! once and a storm of changes is spread out instead of answered with the server's
//! 429s. Events have a limiter of their own, as the kubelet's event client has
//! (`eventRecordQPS`/`eventBurst`, the same defaults).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use podhost_model::token_bucket::TokenBucket;

/// The kubelet's default `kubeAPIQPS` (and `eventRecordQPS`).
pub const DEFAULT_QPS: f64 = 50.0;
/// The kubelet's default `kubeAPIBurst` (and `eventBurst`).
pub const DEFAULT_BURST: u32 = 100;

/// A token bucket on the monotonic clock; clones share it.
#[derive(Debug, Clone)]
pub struct ClientLimiter {
    inner: Arc<Mutex<TokenBucket>>,
    origin: Instant,
}

impl ClientLimiter {
    /// A full limiter of `qps` requests per second, `burst` at once.
    pub fn new(qps: f64, burst: u32) -> Self {
        Self {
            inner: Arc::new(Mutex::new(TokenBucket::new(qps, burst, 0.0))),
            origin: Instant::now(),
        }
    }

    /// The kubelet's defaults (50 QPS, burst 100).
    pub fn kubelet_default() -> Self {
        Self::new(DEFAULT_QPS, DEFAULT_BURST)
    }

    /// Takes a token: how long to wait before the request may go.
    fn take(&self) -> Duration {
        let now = self.origin.elapsed().as_secs_f64();
        let wait = self
            .inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take(now);
        Duration::from_secs_f64(wait)
    }

    /// Takes a token, sleeping until it is there.
    pub async fn acquire(&self) {
        let wait = self.take();
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_one_bucket() {
        let a = ClientLimiter::new(1.0, 2);
        let b = a.clone();
        assert_eq!(a.take(), Duration::ZERO);
        assert_eq!(b.take(), Duration::ZERO);
        // The third request, from either clone, waits for the refill.
        assert!(a.take() > Duration::from_millis(900));
        assert!(b.take() > Duration::from_millis(1900));
    }

    #[tokio::test]
    async fn acquire_waits_out_the_debt() {
        let limiter = ClientLimiter::new(10.0, 1);
        let started = tokio::time::Instant::now();
        limiter.acquire().await;
        limiter.acquire().await;
        assert!(started.elapsed() >= Duration::from_millis(99));
    }
}
