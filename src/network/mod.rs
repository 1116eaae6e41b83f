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
pub mod pod_cidr;

use std::collections::HashSet;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

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
    /// `--pod-network` names no backend.
    #[error("--pod-network {0}: use auto, bridge, cni or none")]
    UnknownMode(String),
    /// Cluster mode without `--pod-cidr`: the Node has no `spec.podCIDR` yet.
    #[error(
        "waiting for the Node's spec.podCIDR (kube-controller-manager --allocate-node-cidrs), \
         or give --pod-cidr"
    )]
    PodCidrPending,
}

/// Which backend `--pod-network` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkMode {
    /// CNI when `--cni-conf-dir` holds a config, else the built-in bridge.
    Auto,
    Bridge,
    Cni,
    /// Loopback only.
    None,
}

impl std::str::FromStr for NetworkMode {
    type Err = NetworkError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Self::Auto),
            "bridge" => Ok(Self::Bridge),
            "cni" => Ok(Self::Cni),
            "none" => Ok(Self::None),
            other => Err(NetworkError::UnknownMode(other.to_string())),
        }
    }
}

/// The node's network settings (`--pod-network`, `--pod-cidr`, `--cni-conf-dir`,
/// `--cni-bin-dir`).
#[derive(Debug, Clone)]
pub struct NetworkSettings {
    pub mode: NetworkMode,
    /// The built-in bridge's pod CIDRs, `v4[,v6]`, when `--pod-cidr` is given (else
    /// the Node's or the default: [`pod_cidr::choose`]).
    pub pod_cidrs: Option<String>,
    pub cni_conf_dir: PathBuf,
    pub cni_bin_dirs: Vec<PathBuf>,
}

/// The node's pod network, made on first use and again after a failure: like the
/// kubelet's "network not ready", a backend that cannot start fails the sandboxes of
/// pods that need it (retried), never the daemon or hostNetwork pods.
#[derive(Debug)]
pub struct NodeNetwork {
    settings: NetworkSettings,
    /// `<root>/network`: each backend keeps its records below.
    state_dir: PathBuf,
    /// `<root>/pods`: a pod whose directory is there is live for [`PodNetwork::reconcile`].
    pods_dir: PathBuf,
    /// Cluster mode: the Node's podCIDRs as read from the API server.
    node_cidrs: Option<pod_cidr::NodePodCidrs>,
    backend: tokio::sync::OnceCell<PodNetwork>,
}

impl NodeNetwork {
    /// `node_cidrs`: in cluster mode, the Node's `spec.podCIDRs` as they are read
    /// (`None` standalone).
    pub fn new(
        settings: NetworkSettings,
        state_dir: &Path,
        pods_dir: &Path,
        node_cidrs: Option<pod_cidr::NodePodCidrs>,
    ) -> Self {
        Self {
            settings,
            state_dir: state_dir.to_path_buf(),
            pods_dir: pods_dir.to_path_buf(),
            node_cidrs,
            backend: tokio::sync::OnceCell::new(),
        }
    }

    /// The pod CIDRs the bridge uses now, and where they come from; `None` while the
    /// Node's podCIDR is awaited.
    pub fn pod_cidr_choice(&self) -> Option<pod_cidr::PodCidrChoice> {
        let node = self.node_cidrs.as_ref().map(|rx| rx.borrow().clone());
        pod_cidr::choose(
            self.settings.pod_cidrs.as_deref(),
            node.as_ref().map(|n| n.as_deref()),
        )
    }

    /// The backend, started on first use (then what a previous daemon left of pods that
    /// are gone is released).
    pub async fn backend(&self) -> Result<&PodNetwork, NetworkError> {
        self.backend
            .get_or_try_init(|| async {
                let backend = self.open().await?;
                let live = live_pods(&self.pods_dir);
                for e in backend.reconcile(&live).await {
                    tracing::warn!(error = %e, "pod network of a pod that is gone not released");
                }
                tracing::info!(mode = backend.mode(), "pod network ready");
                Ok(backend)
            })
            .await
    }

    async fn open(&self) -> Result<PodNetwork, NetworkError> {
        let s = &self.settings;
        let mode = match s.mode {
            NetworkMode::Auto if cni::has_config(&s.cni_conf_dir) => NetworkMode::Cni,
            NetworkMode::Auto => NetworkMode::Bridge,
            other => other,
        };
        Ok(match mode {
            NetworkMode::None => PodNetwork::None,
            NetworkMode::Cni => PodNetwork::Cni(
                cni::CniNetwork::new(cni::CniConfig {
                    conf_dir: s.cni_conf_dir.clone(),
                    bin_dirs: s.cni_bin_dirs.clone(),
                    state_dir: self.state_dir.join("cni"),
                })
                .await?,
            ),
            NetworkMode::Bridge | NetworkMode::Auto => {
                let choice = self.pod_cidr_choice().ok_or(NetworkError::PodCidrPending)?;
                tracing::info!(cidrs = %choice.cidrs, from = %choice.origin, "pod CIDRs of the bridge");
                PodNetwork::Bridge(
                    bridge::BridgeNetwork::new(bridge::BridgeConfig {
                        bridge: bridge::DEFAULT_BRIDGE.to_string(),
                        cidrs: bridge::BridgeConfig::parse_cidrs(&choice.cidrs)?,
                        state_dir: self.state_dir.join("bridge"),
                    })
                    .await?,
                )
            }
        })
    }
}

/// The uids of the pods with a directory under `pods_dir`.
fn live_pods(pods_dir: &Path) -> HashSet<String> {
    std::fs::read_dir(pods_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .collect()
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
