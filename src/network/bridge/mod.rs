//! The built-in pod network: bridge `podhost0`, a veth per pod, host-local IPAM,
//! masquerade and hostPort DNAT in podhost's own nftables table.
//! (Skeleton: the helper implementing it replaces this file.)

use std::collections::HashSet;

use super::{PodNetRequest, PodNetStatus};

/// Why the bridge network failed.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error("the built-in pod network is not built yet")]
    NotBuilt,
}

/// The built-in bridge network of the node.
#[derive(Debug)]
pub struct BridgeNetwork {}

impl BridgeNetwork {
    pub async fn setup(&self, _req: &PodNetRequest) -> Result<PodNetStatus, BridgeError> {
        Err(BridgeError::NotBuilt)
    }

    pub async fn teardown(&self, _uid: &str) -> Result<(), BridgeError> {
        Err(BridgeError::NotBuilt)
    }

    pub async fn reconcile(&self, _live: &HashSet<String>) -> Vec<BridgeError> {
        Vec::new()
    }
}
