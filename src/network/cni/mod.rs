//! Pod networking through the standard CNI plugins.
//! (Skeleton: the helper implementing it replaces this file.)

use std::collections::HashSet;

use super::{PodNetRequest, PodNetStatus};

/// Why a CNI operation failed.
#[derive(Debug, thiserror::Error)]
pub enum CniError {
    #[error("CNI is not built yet")]
    NotBuilt,
}

/// The CNI network of the node.
#[derive(Debug)]
pub struct CniNetwork {}

impl CniNetwork {
    pub async fn setup(&self, _req: &PodNetRequest) -> Result<PodNetStatus, CniError> {
        Err(CniError::NotBuilt)
    }

    pub async fn teardown(&self, _uid: &str) -> Result<(), CniError> {
        Err(CniError::NotBuilt)
    }

    pub async fn reconcile(&self, _live: &HashSet<String>) -> Vec<CniError> {
        Vec::new()
    }
}
