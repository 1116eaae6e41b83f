//! The pair every new TLS connection of the node's client presents: rustls asks this
//! resolver at each handshake, so a rotated certificate is used from the next
//! connection on by every clone of the client, without rebuilding it. The generation
//! counter tells the client's connection pool to stop reusing connections made with
//! the old certificate (as the kubelet closes its connections after a rotation).

use std::sync::{Arc, RwLock};

use rustls::SignatureScheme;
use rustls::client::ResolvesClientCert;
use rustls::sign::CertifiedKey;

/// The current client certificate and key.
pub struct CurrentPair {
    key: RwLock<Arc<CertifiedKey>>,
    generation: tokio::sync::watch::Sender<u64>,
}

impl std::fmt::Debug for CurrentPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CurrentPair")
            .field("generation", &*self.generation.borrow())
            .finish_non_exhaustive()
    }
}

impl CurrentPair {
    pub fn new(key: Arc<CertifiedKey>) -> Arc<Self> {
        Arc::new(Self {
            key: RwLock::new(key),
            generation: tokio::sync::watch::Sender::new(0),
        })
    }

    /// Presents `key` from the next handshake on.
    pub fn swap(&self, key: Arc<CertifiedKey>) {
        *self.key.write().unwrap_or_else(|p| p.into_inner()) = key;
        self.generation.send_modify(|g| *g += 1);
    }

    /// Changes with every swap.
    pub fn generation(&self) -> tokio::sync::watch::Receiver<u64> {
        self.generation.subscribe()
    }

    fn current(&self) -> Arc<CertifiedKey> {
        self.key.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl ResolvesClientCert for CurrentPair {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        let key = self.current();
        // Present it only if the server accepts a signature our key can make.
        key.key.choose_scheme(sigschemes).map(|_| key)
    }

    fn has_certs(&self) -> bool {
        true
    }
}
