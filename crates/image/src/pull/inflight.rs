//! In-flight dedupe: one lock per blob digest, shared by every pull of one
//! [`Puller`](super::Puller). Whoever holds it downloads and unpacks the blob;
//! the others wait and then find it in the store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

/// See the module docs.
#[derive(Debug, Default)]
pub(super) struct InFlight {
    locks: Mutex<HashMap<String, Weak<AsyncMutex<()>>>>,
}

impl InFlight {
    /// Takes the lock of `digest`, waiting while another pull holds it.
    pub(super) async fn lock(&self, digest: &str) -> OwnedMutexGuard<()> {
        let lock = {
            let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
            locks.retain(|_, w| w.strong_count() > 0);
            match locks.get(digest).and_then(Weak::upgrade) {
                Some(l) => l,
                None => {
                    let l = Arc::new(AsyncMutex::new(()));
                    locks.insert(digest.to_string(), Arc::downgrade(&l));
                    l
                }
            }
        };
        match lock.clone().try_lock_owned() {
            Ok(guard) => guard,
            Err(_) => {
                tracing::debug!(digest, "waiting for a concurrent download of the same blob");
                lock.lock_owned().await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn same_digest_serializes_other_digests_do_not() {
        let f = Arc::new(InFlight::default());
        let a = f.lock("a").await;
        let _b = f.lock("b").await;
        let f2 = f.clone();
        let waiter = tokio::spawn(async move {
            let _g = f2.lock("a").await;
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(a);
        waiter.await.unwrap();
        assert!(f.locks.lock().unwrap().len() <= 2);
    }
}
