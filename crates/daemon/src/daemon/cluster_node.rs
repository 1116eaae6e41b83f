//! Cluster mode's node side in the daemon: register the Node, then keep its Lease and
//! status, with the eviction manager's pressure and the daemon's health as conditions.

use std::sync::Arc;

use super::cluster_flags::ClusterConfig;
use super::node_facts::NodeFacts;
use podhost_cluster::{ClusterError, ClusterSettings};
use podhost_image::ImageStore;
use podhost_model::node::images::{StoredImage, node_images};
use podhost_model::node::{NodePressure, node_object};
use podhost_network::NodeNetwork;
use podhost_status::StatusStore;

/// The node side at work, and its client for the pod side.
pub struct ClusterNode {
    /// Registers (retrying until the API server accepts), then runs the lease and
    /// status loops for the daemon's life.
    pub task: tokio::task::JoinHandle<()>,
    pub client: kube::Client,
    /// `--rotate-certificates`: renews the client certificate for the daemon's life.
    pub rotation: Option<tokio::task::JoinHandle<()>>,
    /// The registered Node's UID, once registered: mirror pods name it as their owner.
    pub node_uid: tokio::sync::watch::Receiver<Option<String>>,
}

/// Builds the client (a bad kubeconfig stops the daemon at start, with the file named;
/// TLS bootstrap first when `--bootstrap-kubeconfig` asks for it)
/// and starts registration of the Node built from `facts` (the values the workers'
/// admission holds pods to).
pub async fn start(
    cluster: &ClusterConfig,
    store: Arc<StatusStore>,
    facts: NodeFacts,
    network: Arc<NodeNetwork>,
    images: Arc<ImageStore>,
) -> Result<ClusterNode, ClusterError> {
    let credentials = super::cluster_certs::node_client(cluster, &facts.settings.name).await?;
    let client = credentials.client;
    let NodeFacts { host, settings } = facts;
    let mut settings = ClusterSettings::with_defaults(settings);
    settings.status_update_every = cluster.status_update_every;
    settings.status_report_every = cluster.status_report_every;
    settings.lease_duration = cluster.lease_duration;
    let node_client = client.clone();
    let (uid_tx, node_uid) = tokio::sync::watch::channel(None);
    let task = tokio::spawn(async move {
        let client = node_client;
        let node = node_object(&host, &settings.node);
        let registered = podhost_cluster::register::register(&client, &node).await;
        let network_starting = !podhost_cluster::pod_cidr::node_pod_cidrs(&registered).is_empty()
            && !network.is_ready();
        let uid = registered.metadata.uid.unwrap_or_default();
        uid_tx.send_replace(Some(uid.clone()));
        let lease = tokio::spawn(podhost_cluster::lease::run(
            client.clone(),
            settings.node.name.clone(),
            uid,
            settings.lease_duration,
            settings.lease_renew_every(),
        ));
        let network_started = network.watch_ready();
        // As the kubelet checks its runtime once before its first status: a restarted
        // daemon whose pod network is about to start on the Node's podCIDR would
        // otherwise report a node that runs its pods "network not ready" for a moment,
        // which taints it not-ready (NoExecute) and marks its pods unready. The lease
        // keeps the node alive meanwhile; at most one status period is waited.
        if network_starting {
            let _ = tokio::time::timeout(settings.status_update_every, network.ready()).await;
        }
        let observe = move || {
            let mut not_ready: Vec<String> = podhost_metrics::health()
                .check()
                .iter()
                .map(ToString::to_string)
                .collect();
            if let Some(reason) = network.not_ready_reason() {
                not_ready.push(network_not_ready(&reason));
            }
            NodePressure::from_eviction(&store.node_conditions(), not_ready)
        };
        let stored_images = move || stored_images(&images);
        let status = tokio::spawn(podhost_cluster::node_status::run(
            client,
            host,
            settings,
            observe,
            stored_images,
            network_started,
        ));
        // Both loops run for ever; if either panics, the daemon's essential-task
        // watch sees this task end.
        let _ = tokio::select! { l = lease => l, s = status => s };
    });
    Ok(ClusterNode {
        task,
        client,
        rotation: credentials.rotation,
        node_uid,
    })
}

/// The Ready condition's message for a node whose pods cannot get a network, in the
/// kubelet's words (its runtime's NetworkReady=false), which tools and people search for.
fn network_not_ready(reason: &str) -> String {
    format!(
        "container runtime network not ready: NetworkReady=false \
         reason:NetworkPluginNotReady message:podhost: {reason}"
    )
}

/// `status.images` from the store; empty (and a warning) when the store cannot be read.
fn stored_images(store: &ImageStore) -> Vec<k8s_openapi::api::core::v1::ContainerImage> {
    match store.list() {
        Ok(list) => node_images(
            &list
                .into_iter()
                .map(|i| StoredImage {
                    reference: i.reference,
                    manifest_digest: i.digest,
                    size_bytes: i.size,
                })
                .collect::<Vec<_>>(),
        ),
        Err(error) => {
            tracing::warn!(%error, "the image store cannot be listed for the Node's status.images");
            Vec::new()
        }
    }
}
