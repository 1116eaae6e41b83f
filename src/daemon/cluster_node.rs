//! Cluster mode's node side in the daemon: register the Node, then keep its Lease and
//! status, with the eviction manager's pressure and the daemon's health as conditions.

use std::sync::Arc;

use super::DaemonConfig;
use super::cluster_flags::ClusterConfig;
use crate::cluster::{ClusterError, ClusterSettings, KUBELET_VERSION};
use crate::model::node::{NodePressure, NodeSettings, node_object};
use crate::status::StatusStore;

/// The node side at work, and its client for the pod side.
pub struct ClusterNode {
    /// Registers (retrying until the API server accepts), then runs the lease and
    /// status loops for the daemon's life.
    pub task: tokio::task::JoinHandle<()>,
    pub client: kube::Client,
}

/// Builds the client (a bad kubeconfig stops the daemon at start, with the file named)
/// and starts registration.
pub async fn start(
    cfg: &DaemonConfig,
    cluster: &ClusterConfig,
    store: Arc<StatusStore>,
) -> Result<ClusterNode, ClusterError> {
    let client =
        crate::cluster::client::from_kubeconfig(&cluster.kubeconfig, cluster.record.as_deref())
            .await?;
    let mut settings = ClusterSettings::with_defaults(NodeSettings {
        name: cfg.node_name.clone(),
        labels: cluster.labels.clone(),
        taints: cluster.taints.clone(),
        kube_reserved: cluster.kube_reserved.clone(),
        system_reserved: cluster.system_reserved.clone(),
        eviction_hard: cfg
            .eviction
            .thresholds
            .iter()
            .filter(|t| t.is_hard())
            .cloned()
            .collect(),
        max_pods: cluster.max_pods,
        kubelet_port: i32::from(cluster.port),
        kubelet_version: KUBELET_VERSION.to_string(),
    });
    settings.status_update_every = cluster.status_update_every;
    settings.status_report_every = cluster.status_report_every;
    settings.lease_duration = cluster.lease_duration;
    let nodefs_bytes = crate::stats::fs::filesystem(&cfg.root_dir, chrono::Utc::now())
        .and_then(|fs| fs.capacity_bytes)
        .map_or(0, |b| i64::try_from(b).unwrap_or(i64::MAX));
    let host = crate::cluster::host_facts::read(
        &cluster.node_ips,
        super::host::memory_capacity(),
        nodefs_bytes,
    );
    let node_client = client.clone();
    let task = tokio::spawn(async move {
        let client = node_client;
        let node = node_object(&host, &settings.node);
        let registered = crate::cluster::register::register(&client, &node).await;
        let uid = registered.metadata.uid.unwrap_or_default();
        let lease = tokio::spawn(crate::cluster::lease::run(
            client.clone(),
            settings.node.name.clone(),
            uid,
            settings.lease_duration,
            settings.lease_renew_every(),
        ));
        let observe = move || {
            let stuck = crate::metrics::health().check();
            NodePressure::from_eviction(
                &store.node_conditions(),
                stuck.iter().map(ToString::to_string).collect(),
            )
        };
        let status = tokio::spawn(crate::cluster::node_status::run(
            client, host, settings, observe,
        ));
        // Both loops run for ever; if either panics, the daemon's essential-task
        // watch sees this task end.
        let _ = tokio::select! { l = lease => l, s = status => s };
    });
    Ok(ClusterNode { task, client })
}
