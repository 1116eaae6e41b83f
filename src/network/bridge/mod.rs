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

/// The bridge's name.
pub const DEFAULT_BRIDGE: &str = "podhost0";
/// The default pod CIDRs (skeleton value).
pub const DEFAULT_POD_CIDRS: &str = "10.77.0.0/16";

/// A pod CIDR (skeleton).
#[derive(Debug, Clone)]
pub struct Cidr(pub String);

/// The bridge's settings.
#[derive(Debug, Clone)]
pub struct BridgeConfig {
    pub bridge: String,
    pub cidrs: Vec<Cidr>,
    pub state_dir: std::path::PathBuf,
}

impl BridgeConfig {
    pub fn parse_cidrs(flag: &str) -> Result<Vec<Cidr>, BridgeError> {
        Ok(flag.split(',').map(|c| Cidr(c.to_string())).collect())
    }
}

/// The built-in bridge network of the node.
#[derive(Debug)]
pub struct BridgeNetwork {}

impl BridgeNetwork {
    pub async fn new(_cfg: BridgeConfig) -> Result<Self, BridgeError> {
        Err(BridgeError::NotBuilt)
    }

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
