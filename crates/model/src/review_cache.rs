//! The kubelet's caches of its webhook reviews: a TokenReview's answer is kept 2 min
//! (`authentication.webhook.cacheTTL`), a SubjectAccessReview's 5 min when allowed
//! and 30 s when not (`authorization.webhook.cacheAuthorizedTTL` /
//! `cacheUnauthorizedTTL`); failures are not kept. Without them every `kubectl logs`
//! or `exec` costs the API server one or two more requests.
//!
//! Pure: the time is passed in. Bounded: past [`MAX_ENTRIES`] the entry that expires
//! first goes.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// The kubelet's token review cache TTL.
pub const TOKEN_TTL: Duration = Duration::from_secs(120);
/// The kubelet's cache TTL of an allowed access review.
pub const ALLOWED_TTL: Duration = Duration::from_secs(300);
/// The kubelet's cache TTL of a denied access review.
pub const DENIED_TTL: Duration = Duration::from_secs(30);
/// Entries kept per cache.
pub const MAX_ENTRIES: usize = 1024;

/// Answers by question, each until it expires.
#[derive(Debug)]
pub struct ReviewCache<K, V> {
    entries: HashMap<K, (V, Instant)>,
}

impl<K, V> Default for ReviewCache<K, V> {
    fn default() -> Self {
        Self {
            entries: HashMap::new(),
        }
    }
}

impl<K: Eq + Hash + Clone, V: Clone> ReviewCache<K, V> {
    /// The kept answer to `key`, unless it has expired by `now`.
    pub fn get(&mut self, key: &K, now: Instant) -> Option<V> {
        match self.entries.get(key) {
            Some((value, expires)) if now < *expires => Some(value.clone()),
            Some(_) => {
                self.entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Keeps `value` for `key` for `ttl` from `now`.
    pub fn put(&mut self, key: K, value: V, ttl: Duration, now: Instant) {
        if self.entries.len() >= MAX_ENTRIES && !self.entries.contains_key(&key) {
            self.entries.retain(|_, (_, expires)| now < *expires);
            if self.entries.len() >= MAX_ENTRIES
                && let Some(first) = self
                    .entries
                    .iter()
                    .min_by_key(|(_, (_, expires))| *expires)
                    .map(|(k, _)| k.clone())
            {
                self.entries.remove(&first);
            }
        }
        self.entries.insert(key, (value, now + ttl));
    }

    /// How many answers are kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no answer is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_kept_until_its_ttl() {
        let t0 = Instant::now();
        let mut cache = ReviewCache::default();
        cache.put("bob", false, DENIED_TTL, t0);
        cache.put("admin", true, ALLOWED_TTL, t0);
        assert_eq!(cache.get(&"bob", t0 + Duration::from_secs(29)), Some(false));
        assert_eq!(cache.get(&"bob", t0 + DENIED_TTL), None);
        assert_eq!(
            cache.get(&"admin", t0 + Duration::from_secs(299)),
            Some(true)
        );
        assert_eq!(cache.get(&"admin", t0 + ALLOWED_TTL), None);
        assert!(cache.is_empty(), "expired answers are dropped when met");
    }

    #[test]
    fn the_cache_is_bounded_and_drops_what_expires_first() {
        let t0 = Instant::now();
        let mut cache = ReviewCache::default();
        for i in 0..MAX_ENTRIES {
            cache.put(i, i, ALLOWED_TTL + Duration::from_secs(i as u64), t0);
        }
        cache.put(MAX_ENTRIES, 0, ALLOWED_TTL * 10, t0);
        assert_eq!(cache.len(), MAX_ENTRIES);
        assert_eq!(cache.get(&0, t0), None, "the soonest to expire went");
        assert_eq!(cache.get(&1, t0), Some(1));
        assert_eq!(cache.get(&MAX_ENTRIES, t0), Some(0));
    }
}
