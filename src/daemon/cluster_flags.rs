//! The flags of cluster mode (the kubelet's names): `--kubeconfig` switches it on.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::Args;

use crate::model::node::{
    NodeLabelError, Reserved, ReservedError, parse_node_labels, parse_taints,
};

/// Cluster-mode settings from the flags.
#[derive(Debug, Clone, Args)]
pub struct ClusterFlags {
    /// A kubeconfig with this node's credentials: podhost registers the node with
    /// that API server and keeps its lease and status (static pods keep running).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Record every exchange with the API server to this file (JSON lines).
    #[arg(long)]
    pub kube_record: Option<PathBuf>,
    /// Resources held back for Kubernetes daemons: `cpu=100m,memory=256Mi,
    /// ephemeral-storage=1Gi,pid=1000`.
    #[arg(long, default_value = "")]
    pub kube_reserved: String,
    /// Resources held back for the OS, as --kube-reserved.
    #[arg(long, default_value = "")]
    pub system_reserved: String,
    /// Labels to add to the Node at registration, `key=value,…`.
    #[arg(long, default_value = "")]
    pub node_labels: String,
    /// Taints the Node registers with, `key[=value]:Effect,…`.
    #[arg(long, default_value = "")]
    pub register_with_taints: String,
    /// The node's InternalIP addresses (comma-separated); default: the source
    /// addresses of the host's default routes.
    #[arg(long, value_delimiter = ',')]
    pub node_ip: Vec<IpAddr>,
    /// The most pods this node runs (the Node's pods capacity).
    #[arg(long, default_value_t = 110)]
    pub max_pods: u32,
    /// The kubelet API's port, advertised in the Node's daemonEndpoints.
    #[arg(long, default_value_t = 10250)]
    pub port: u16,
}

/// Cluster mode's settings in the daemon's config.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    pub kubeconfig: PathBuf,
    pub record: Option<PathBuf>,
    pub kube_reserved: Reserved,
    pub system_reserved: Reserved,
    pub labels: std::collections::BTreeMap<String, String>,
    pub taints: Vec<crate::model::node::Taint>,
    pub node_ips: Vec<IpAddr>,
    pub max_pods: u32,
    pub port: u16,
}

/// A cluster flag that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ClusterFlagError {
    #[error(transparent)]
    Reserved(#[from] ReservedError),
    #[error(transparent)]
    Labels(#[from] NodeLabelError),
}

impl ClusterFlags {
    /// `None` without `--kubeconfig`.
    pub fn into_config(self) -> Result<Option<ClusterConfig>, ClusterFlagError> {
        let Some(kubeconfig) = self.kubeconfig else {
            return Ok(None);
        };
        Ok(Some(ClusterConfig {
            kubeconfig: std::path::absolute(&kubeconfig).unwrap_or(kubeconfig),
            record: self.kube_record,
            kube_reserved: Reserved::parse("--kube-reserved", &self.kube_reserved)?,
            system_reserved: Reserved::parse("--system-reserved", &self.system_reserved)?,
            labels: parse_node_labels(&self.node_labels)?,
            taints: parse_taints(&self.register_with_taints)?,
            node_ips: self.node_ip,
            max_pods: self.max_pods,
            port: self.port,
        }))
    }
}
