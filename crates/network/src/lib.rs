//! Pod networking: every pod (but hostNetwork ones) gets an interface `eth0` in its
//! network namespace with IPv4 and IPv6 addresses, a default route, and its hostPorts
//! published on the host.
//!
//! Two backends, one chosen at daemon start (`--pod-network`):
//! - `bridge` (the default): podhost's own bridge (`--bridge-name`, `podhost0`), a veth
//!   per pod, host-local IPAM persisted under `<root>/network/`, masquerade and hostPort
//!   DNAT in podhost's own nftables table. Every host object is marked with the daemon's
//!   identity and only its own are reconciled; a bridge another running daemon owns is
//!   refused ([`bridge::BridgeError::BridgeOwned`]);
//! - `cni`: the standard CNI plugins from a config list in `--cni-conf-dir`.
//!
//! Every operation is idempotent and recoverable: a daemon killed during setup or
//! teardown leaves records from which the next daemon finishes the job
//! ([`PodNetwork::reconcile`] releases what belongs to pods that are gone).
//!
//! In the workspace (docs/architecture.md, "Crates"): uses model, disk, runtime. It may
//! not: pods' workers or their status: it takes a pod's identity and returns its
//! addresses.

pub mod bridge;
pub mod cni;
pub mod pod_cidr;

use std::collections::HashSet;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use podhost_model::host_ports::HostPort;

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

/// Whether a pod's network is whole ([`PodNetwork::check`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkHealth {
    Attached,
    /// Something is gone: what (`veth vethab12cd34`, `eth0 in the pod's network
    /// namespace`, `nftables table inet podhost`, `address 10.86.0.5 on eth0`…). A
    /// repeated [`PodNetwork::setup`] makes it again with the same addresses.
    Missing(String),
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

/// The node's network settings (`--pod-network`, `--bridge-name`, `--pod-cidr`,
/// `--cluster-cidr`, `--cni-conf-dir`, `--cni-bin-dir`).
#[derive(Debug, Clone)]
pub struct NetworkSettings {
    pub mode: NetworkMode,
    /// The built-in bridge's name (`podhost0`): a second daemon on the host needs its
    /// own, with its own `--pod-cidr`.
    pub bridge_name: String,
    /// The built-in bridge's pod CIDRs, `v4[,v6]`, when `--pod-cidr` is given (else
    /// the Node's or the default: [`pod_cidr::choose`]).
    pub pod_cidrs: Option<String>,
    /// The cluster's pod ranges (`--cluster-cidr`): the bridge does not masquerade
    /// pods' traffic to them. Empty: only the bridge's own pod CIDRs are exempt.
    pub cluster_cidrs: Vec<podhost_model::net::Cidr>,
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
    /// Set once the backend started: pods waiting for it retry at once.
    ready: tokio::sync::watch::Sender<bool>,
    /// Pods that ended while the backend had not started, whose network an earlier
    /// daemon may have set up: released as soon as it starts. (Its start-up reconcile
    /// alone would miss a pod whose directory was still there when it looked.)
    owed_releases: std::sync::Mutex<std::collections::BTreeSet<String>>,
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
            ready: tokio::sync::watch::Sender::new(false),
            owed_releases: std::sync::Mutex::new(std::collections::BTreeSet::new()),
        }
    }

    /// Pod `uid` ended while the backend had not started: its network (if an earlier
    /// daemon set one up) is released when the backend starts. Returns `false` if the
    /// backend has started meanwhile: the caller releases it now.
    pub fn release_when_started(&self, uid: &str) -> bool {
        let mut owed = self.owed();
        // Checked under the lock that `backend` drains it with after the start: a pod
        // added here is either drained or sees the started backend.
        if self.backend.initialized() {
            return false;
        }
        owed.insert(uid.to_string());
        true
    }

    fn owed(&self) -> std::sync::MutexGuard<'_, std::collections::BTreeSet<String>> {
        // Inserts and takes only: a panic cannot leave it half-changed.
        self.owed_releases
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether the backend started.
    pub fn is_ready(&self) -> bool {
        self.backend.initialized()
    }

    /// Why pods cannot get a network now, or `None` once the backend started: the
    /// Node's Ready condition carries it, as the kubelet's "container runtime network
    /// not ready", so the scheduler places no pod on a node that cannot run it.
    pub fn not_ready_reason(&self) -> Option<String> {
        if self.is_ready() {
            return None;
        }
        let waits_for_cidr = matches!(self.settings.mode, NetworkMode::Bridge | NetworkMode::Auto)
            && !cni::has_config(&self.settings.cni_conf_dir)
            && self.pod_cidr_choice().is_none();
        Some(if waits_for_cidr {
            "the Node has no spec.podCIDR yet and no --pod-cidr was given".to_string()
        } else {
            "the pod network has not started (see the node's NetworkNotReady event)".to_string()
        })
    }

    /// Changes to `true` when the backend starts.
    pub fn watch_ready(&self) -> tokio::sync::watch::Receiver<bool> {
        self.ready.subscribe()
    }

    /// Returns once the backend started (a pod whose sandbox failed for want of a
    /// network, e.g. while the Node's podCIDR was awaited, retries then rather than at
    /// its next 10 s retry).
    pub async fn ready(&self) {
        let mut rx = self.ready.subscribe();
        let _ = rx.wait_for(|r| *r).await;
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
        let backend = self
            .backend
            .get_or_try_init(|| async {
                let backend = self.open().await?;
                let live = live_pods(&self.pods_dir);
                for e in backend.reconcile(&live).await {
                    tracing::warn!(error = %e, "pod network of a pod that is gone not released");
                }
                tracing::info!(mode = backend.mode(), "pod network ready");
                Ok::<_, NetworkError>(backend)
            })
            .await?;
        let owed = std::mem::take(&mut *self.owed());
        for uid in owed {
            tracing::info!(%uid, "pod network: releasing what a pod that ended before the network started held");
            if let Err(e) = backend.teardown(&uid).await {
                tracing::warn!(%uid, error = %e, "pod network of a pod that is gone not released");
            }
        }
        // Said only now that `is_ready` holds: the node status loop, woken by this,
        // reads `is_ready` at once; told before, it would post "network not ready" and
        // sleep a whole status period.
        self.ready
            .send_if_modified(|ready| !std::mem::replace(ready, true));
        Ok(backend)
    }

    async fn open(&self) -> Result<PodNetwork, NetworkError> {
        let s = &self.settings;
        let mode = match s.mode {
            NetworkMode::Auto if cni::has_config(&s.cni_conf_dir) => NetworkMode::Cni,
            NetworkMode::Auto => NetworkMode::Bridge,
            other => other,
        };
        if mode == NetworkMode::Cni && !s.cluster_cidrs.is_empty() {
            tracing::info!(
                "--cluster-cidr has no effect with a CNI network: its plugins decide what is masqueraded"
            );
        }
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
                let net = bridge::BridgeNetwork::new(bridge::BridgeConfig {
                    bridge: s.bridge_name.clone(),
                    cidrs: bridge::BridgeConfig::parse_cidrs(&choice.cidrs)?,
                    cluster_cidrs: s.cluster_cidrs.clone(),
                    state_dir: self.state_dir.join("bridge"),
                })
                .await?;
                // Said once the bridge runs (a failed start is retried and would repeat it).
                if self.node_cidrs.is_some() && s.cluster_cidrs.is_empty() {
                    tracing::warn!(
                        "no --cluster-cidr: pods' traffic to pods on other nodes is masqueraded \
                         (they see this node's address, not the client pod's); give \
                         --cluster-cidr the cluster's pod range (kube-controller-manager's \
                         --cluster-cidr)"
                    );
                }
                // Cluster mode: Services (kube-proxy) between pods of this bridge.
                if self.node_cidrs.is_some()
                    && let Some(problem) = bridge::bridged_traffic_problem()
                {
                    tracing::warn!("{problem}");
                }
                PodNetwork::Bridge(Box::new(net))
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
    /// Boxed: the bridge's state is several times the size of the other variants.
    Bridge(Box<bridge::BridgeNetwork>),
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

    /// Whether the pod's network (set up with addresses `ips`) is still whole. The
    /// bridge checks its veth, `eth0`, the addresses, routes and nftables table; `none`
    /// has nothing to check and CNI leaves it to the plugins' CHECK at adoption, so both
    /// say `Attached`.
    pub async fn check(
        &self,
        req: &PodNetRequest,
        ips: &[IpAddr],
    ) -> Result<NetworkHealth, NetworkError> {
        match self {
            Self::None | Self::Cni(_) => Ok(NetworkHealth::Attached),
            Self::Bridge(b) => Ok(b.check(req, ips).await?),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn bridge_settings(pod_cidrs: Option<&str>) -> NetworkSettings {
        NetworkSettings {
            mode: NetworkMode::Bridge,
            bridge_name: bridge::DEFAULT_BRIDGE.into(),
            pod_cidrs: pod_cidrs.map(str::to_string),
            cluster_cidrs: Vec::new(),
            cni_conf_dir: "/nonexistent/podhost-test-cni".into(),
            cni_bin_dirs: Vec::new(),
        }
    }

    #[tokio::test]
    async fn a_node_without_its_pod_cidr_keeps_the_network_not_ready() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, rx) = tokio::sync::watch::channel(None);
        let net = NodeNetwork::new(bridge_settings(None), dir.path(), dir.path(), Some(rx));
        // Not read yet, then read without a podCIDR: pending either way, nothing made.
        for node in [None, Some(vec![])] {
            tx.send_replace(node);
            let err = net.backend().await.unwrap_err();
            assert!(matches!(err, NetworkError::PodCidrPending), "{err}");
            assert!(err.to_string().contains("--pod-cidr"), "{err}");
            assert!(!net.is_ready());
            assert_eq!(net.pod_cidr_choice(), None);
        }
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), net.ready());
        assert!(
            waiting.await.is_err(),
            "ready() returned before the network started"
        );
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
        // Once the Node has one, it is the choice (starting it would make a bridge).
        tx.send_replace(Some(vec!["10.1.2.0/24".into()]));
        let choice = net.pod_cidr_choice().unwrap();
        assert_eq!(choice.cidrs, "10.1.2.0/24");
        assert_eq!(choice.origin, pod_cidr::PodCidrOrigin::Node);
    }

    /// Whoever is told the network started (the node status loop) finds it started:
    /// the announcement comes after the backend is in place, never before. Many rounds
    /// on two workers, as the daemon runs: the receiver wakes on the other worker.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn told_the_network_started_it_is_ready() {
        for _ in 0..200 {
            let dir = tempfile::tempdir().unwrap();
            let mut settings = bridge_settings(None);
            settings.mode = NetworkMode::None;
            let net = Arc::new(NodeNetwork::new(settings, dir.path(), dir.path(), None));
            let mut told = net.watch_ready();
            let starter = net.clone();
            let start = tokio::spawn(async move { starter.backend().await.map(|_| ()) });
            told.changed().await.unwrap();
            assert!(
                net.is_ready(),
                "told the network started before it was ready"
            );
            assert!(net.not_ready_reason().is_none());
            start.await.unwrap().unwrap();
        }
    }

    #[test]
    fn the_flag_is_the_choice_whatever_the_node_says() {
        let dir = tempfile::tempdir().unwrap();
        let (_tx, rx) = tokio::sync::watch::channel(Some(vec!["10.1.2.0/24".into()]));
        let net = NodeNetwork::new(
            bridge_settings(Some("10.9.0.0/24")),
            dir.path(),
            dir.path(),
            Some(rx),
        );
        assert_eq!(
            net.pod_cidr_choice().unwrap().origin,
            pod_cidr::PodCidrOrigin::Flag
        );
        let standalone = NodeNetwork::new(bridge_settings(None), dir.path(), dir.path(), None);
        assert_eq!(
            standalone.pod_cidr_choice().unwrap().origin,
            pod_cidr::PodCidrOrigin::Default
        );
    }
}
