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

/// Where the CNI configuration and plugins are.
#[derive(Debug, Clone)]
pub struct CniConfig {
    pub conf_dir: std::path::PathBuf,
    pub bin_dirs: Vec<std::path::PathBuf>,
    pub state_dir: std::path::PathBuf,
}

/// Whether `conf_dir` holds a config (skeleton: never).
pub fn has_config(_conf_dir: &std::path::Path) -> bool {
    false
}

/// The CNI network of the node.
#[derive(Debug)]
pub struct CniNetwork {}

impl CniNetwork {
    pub async fn new(_cfg: CniConfig) -> Result<Self, CniError> {
        Err(CniError::NotBuilt)
    }

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
