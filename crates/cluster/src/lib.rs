//! Cluster mode (`--kubeconfig`): podhost as a node of a real Kubernetes control plane,
//! beside the static pods. This part registers the Node, keeps its Lease renewed and
//! posts its status as the kubelet does, follows the pods bound to the node (`pods`)
//! and writes their status and final deletion (`pod_status`), keeps a mirror pod of each
//! static pod (`mirror_plan`, `mirror_client`), follows the ConfigMaps and Secrets the
//! API pods name (`objects`) and their service account tokens (`tokens`), follows the
//! cluster's Services for the containers' service variables (`services`), and posts
//! the events (`events`); every exchange can be recorded (`--kube-record FILE`).
//!
//! In the workspace (docs/architecture.md, "Crates"): uses model. It may not: anything
//! that touches the host: it only talks to the API server; the daemon crate wires its
//! results into the pods' workers.

pub mod access_review;
pub mod certs;
pub mod client;
mod error;
pub mod events;
pub mod host_facts;
pub mod lease;
pub mod mirror_client;
pub mod mirror_plan;
pub mod node_status;
pub mod objects;
pub mod own_node;
pub mod pod_cidr;
pub mod pod_status;
pub mod pods;
pub mod rate;
pub mod record;
pub mod register;
pub mod services;
pub mod tokens;

pub use error::ClusterError;

use std::time::Duration;

use podhost_model::node::NodeSettings;

/// The node's settings and the kubelet's periods.
#[derive(Debug, Clone)]
pub struct ClusterSettings {
    pub node: NodeSettings,
    /// `nodeLeaseDurationSeconds` (40); the lease is renewed every quarter of it.
    pub lease_duration: Duration,
    /// `nodeStatusUpdateFrequency` (10 s): how often the status is computed.
    pub status_update_every: Duration,
    /// `nodeStatusReportFrequency` (5 min): how often it is posted when nothing changed.
    pub status_report_every: Duration,
}

impl ClusterSettings {
    /// The kubelet's defaults for `node`.
    pub fn with_defaults(node: NodeSettings) -> Self {
        Self {
            node,
            lease_duration: Duration::from_secs(40),
            status_update_every: Duration::from_secs(10),
            status_report_every: Duration::from_secs(300),
        }
    }

    /// The lease's renew interval: a quarter of its duration, as the kubelet's.
    pub fn lease_renew_every(&self) -> Duration {
        self.lease_duration / 4
    }
}

/// The Kubernetes version whose API podhost implements, reported as the node's
/// kubeletVersion.
pub const KUBELET_VERSION: &str = "v1.35.0-podhost";
