//! Pod networking: every pod (but hostNetwork ones) gets an interface `eth0` in its
//! network namespace with IPv4 and IPv6 addresses, a default route, and its hostPorts
//! published on the host.
//!
//! Two backends, one chosen at daemon start (`--pod-network`):
//! - `bridge` (the default): podhost's own bridge `podhost0`, a veth per pod, host-local
//!   IPAM persisted under `<root>/network/`, masquerade and hostPort DNAT in podhost's own
//!   nftables table;
//! - `cni`: the standard CNI plugins from a config list in `--cni-conf-dir`.
//!
//! Every operation is idempotent and recoverable: a daemon killed during setup or
//! teardown leaves records from which the next daemon finishes the job
//! ([`PodNetwork::reconcile`] releases what belongs to pods that are gone).

pub mod bridge;
pub mod cni;

use std::collections::HashSet;
use std::net::IpAddr;
use std::path::PathBuf;

use crate::model::host_ports::HostPort;

/// What a backend needs to set a pod's network up.
#[derive(Debug, Clone)]
pub struct PodNetRequest {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// The pod's pinned network namespace (`<pod>/ns/net`).
    pub netns: PathBuf,
    /// The ports to publish on the host.
    pub host_ports: Vec<HostPort>,
}

/// A pod's network as set up.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PodNetStatus {
    /// The pod's addresses, IPv4 first (`status.podIPs`).
    pub ips: Vec<IpAddr>,
    /// The pod's interface (`eth0`).
    pub interface: String,
}

/// Why a pod's network could not be set up or released. The message is what the pod's
/// `FailedCreatePodSandBox` / `FailedKillPod` event shows.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    /// The built-in bridge failed.
    #[error(transparent)]
    Bridge(#[from] bridge::BridgeError),
    /// A CNI plugin or its configuration failed.
    #[error(transparent)]
    Cni(#[from] cni::CniError),
}

/// The node's pod network backend.
#[derive(Debug)]
pub enum PodNetwork {
    /// `--pod-network none`: pods have loopback only (podhost before networking).
    None,
    Bridge(bridge::BridgeNetwork),
    Cni(cni::CniNetwork),
}

impl PodNetwork {
    /// The backend's name, for logs and `describe`.
    pub fn mode(&self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Bridge(_) => "bridge",
            Self::Cni(_) => "cni",
        }
    }

    /// Sets the pod's network up (idempotent: a pod whose network survives from a
    /// previous daemon gets the same addresses back). `Ok(None)` with `None`.
    pub async fn setup(&self, req: &PodNetRequest) -> Result<Option<PodNetStatus>, NetworkError> {
        match self {
            Self::None => Ok(None),
            Self::Bridge(b) => Ok(Some(b.setup(req).await?)),
            Self::Cni(c) => Ok(Some(c.setup(req).await?)),
        }
    }

    /// Releases everything the pod held (interfaces, addresses, rules, IPAM entries);
    /// fine when nothing or only part of it exists.
    pub async fn teardown(&self, uid: &str) -> Result<(), NetworkError> {
        match self {
            Self::None => Ok(()),
            Self::Bridge(b) => Ok(b.teardown(uid).await?),
            Self::Cni(c) => Ok(c.teardown(uid).await?),
        }
    }

    /// At daemon start, after the pods on disk are known: releases what belongs to pods
    /// not in `live` (a daemon killed during setup or teardown), and returns what could
    /// not be released.
    pub async fn reconcile(&self, live: &HashSet<String>) -> Vec<NetworkError> {
        match self {
            Self::None => Vec::new(),
            Self::Bridge(b) => b
                .reconcile(live)
                .await
                .into_iter()
                .map(NetworkError::from)
                .collect(),
            Self::Cni(c) => c
                .reconcile(live)
                .await
                .into_iter()
                .map(NetworkError::from)
                .collect(),
        }
    }
}
