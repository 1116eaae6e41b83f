//! `POST /pods/NAME/ephemeral` adds an ephemeral container (`podhost debug`) to a running
//! pod through its worker; the API only knows this trait, so that it does not depend on
//! `worker` (the daemon wires the real registry in).

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::EphemeralContainer;

/// Why an ephemeral container was refused: the HTTP status and the message.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct EphemeralRefused {
    pub status: u16,
    pub message: String,
}

/// Adds ephemeral containers to running pods.
pub trait EphemeralTarget: Send + Sync + std::fmt::Debug {
    /// Adds `container` to the pod `uid` (named `pod`); resolves once its worker
    /// accepted it (it starts right after) or refused it.
    fn add(
        &self,
        uid: &str,
        pod: &str,
        container: EphemeralContainer,
    ) -> BoxFuture<'_, Result<(), EphemeralRefused>>;
}
