//! The node's facts and settings, read once at start: the Node that cluster mode
//! registers and the node the workers admit pods against are built from these same
//! values, so the allocatable, labels, taints and pod count the scheduler sees are
//! exactly what the node enforces.

use super::DaemonConfig;
use podhost_cluster::KUBELET_VERSION;
use podhost_model::admission::NodeView;
use podhost_model::node::{DEFAULT_MAX_PODS, HostFacts, NodeSettings, node_object};

/// What the Node is built from.
#[derive(Debug, Clone)]
pub struct NodeFacts {
    pub host: HostFacts,
    pub settings: NodeSettings,
}

impl NodeFacts {
    /// Reads the host's facts and takes the node's settings from the cluster flags;
    /// without `--kubeconfig`, a node with no labels, taints or reservations beyond the
    /// hard eviction thresholds (its pods are all static then, and never refused for
    /// resources, affinity or taints).
    pub fn read(cfg: &DaemonConfig) -> Self {
        let cluster = cfg.cluster.as_ref();
        let settings = NodeSettings {
            name: cfg.node_name.clone(),
            labels: cluster.map(|c| c.labels.clone()).unwrap_or_default(),
            taints: cluster.map(|c| c.taints.clone()).unwrap_or_default(),
            kube_reserved: cluster.map(|c| c.kube_reserved.clone()).unwrap_or_default(),
            system_reserved: cluster
                .map(|c| c.system_reserved.clone())
                .unwrap_or_default(),
            eviction_hard: cfg
                .eviction
                .thresholds
                .iter()
                .filter(|t| t.is_hard())
                .cloned()
                .collect(),
            max_pods: cluster.map_or(DEFAULT_MAX_PODS, |c| c.max_pods),
            kubelet_port: cluster.map_or(10250, |c| i32::from(c.port)),
            kubelet_version: KUBELET_VERSION.to_string(),
        };
        let nodefs_bytes = podhost_stats::fs::filesystem(&cfg.root_dir, chrono::Utc::now())
            .and_then(|fs| fs.capacity_bytes)
            .map_or(0, |b| i64::try_from(b).unwrap_or(i64::MAX));
        let host = podhost_cluster::host_facts::read(
            cluster.map(|c| c.node_ips.as_slice()).unwrap_or_default(),
            super::host::memory_capacity(),
            nodefs_bytes,
        );
        Self { host, settings }
    }

    /// The node as the workers' admission sees it: the registered Node's view.
    pub fn admission_view(&self) -> NodeView {
        NodeView::from_node(&node_object(&self.host, &self.settings))
    }
}
