//! [`CachingReviewer`]: the kubelet's review caches ([`podhost_model::review_cache`])
//! in front of any [`AccessReviewer`]. Tokens are kept by their SHA-256, never as
//! themselves.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::FutureExt;
use futures::future::BoxFuture;
use sha2::{Digest, Sha256};

use super::reviewer::{AccessReviewer, ReviewError};
use podhost_model::kubelet_auth::{NodeAccess, UserInfo};
use podhost_model::review_cache::{ALLOWED_TTL, DENIED_TTL, ReviewCache, TOKEN_TTL};

/// Reviews through `inner`, answering repeated questions from the caches.
#[derive(Debug)]
pub struct CachingReviewer {
    inner: Arc<dyn AccessReviewer>,
    tokens: Mutex<ReviewCache<[u8; 32], Option<UserInfo>>>,
    access: Mutex<ReviewCache<(UserInfo, NodeAccess), (bool, String)>>,
}

impl CachingReviewer {
    pub fn new(inner: Arc<dyn AccessReviewer>) -> Self {
        Self {
            inner,
            tokens: Mutex::default(),
            access: Mutex::default(),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl AccessReviewer for CachingReviewer {
    fn review_token<'a>(
        &'a self,
        token: &'a str,
    ) -> BoxFuture<'a, Result<Option<UserInfo>, ReviewError>> {
        async move {
            let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
            if let Some(user) = lock(&self.tokens).get(&key, Instant::now()) {
                return Ok(user);
            }
            let user = self.inner.review_token(token).await?;
            lock(&self.tokens).put(key, user.clone(), TOKEN_TTL, Instant::now());
            Ok(user)
        }
        .boxed()
    }

    fn review_access<'a>(
        &'a self,
        user: &'a UserInfo,
        access: &'a NodeAccess,
    ) -> BoxFuture<'a, Result<(bool, String), ReviewError>> {
        async move {
            let key = (user.clone(), access.clone());
            if let Some(answer) = lock(&self.access).get(&key, Instant::now()) {
                return Ok(answer);
            }
            let answer = self.inner.review_access(user, access).await?;
            let ttl = if answer.0 { ALLOWED_TTL } else { DENIED_TTL };
            lock(&self.access).put(key, answer.clone(), ttl, Instant::now());
            Ok(answer)
        }
        .boxed()
    }
}
