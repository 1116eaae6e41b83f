//! Cluster mode's kubelet API (`--port`, 10250): its TLS from the flags, its reviews
//! through the node's API client, and the server started beside the node side.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;

use super::cluster_flags::ClusterConfig;
use podhost_api::kubelet::{
    AccessReviewer, CachingReviewer, KubeletApiError, KubeletApiState, ReviewError, ServingCert,
};
use podhost_disk::Layout;
use podhost_model::kubelet_auth::{NodeAccess, UserInfo};
use podhost_status::StatusStore;

/// TokenReview and SubjectAccessReview with the node's own credentials.
#[derive(Clone)]
pub struct ClusterReviewer {
    pub client: kube::Client,
}

impl std::fmt::Debug for ClusterReviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterReviewer")
    }
}

impl AccessReviewer for ClusterReviewer {
    fn review_token<'a>(
        &'a self,
        token: &'a str,
    ) -> BoxFuture<'a, Result<Option<UserInfo>, ReviewError>> {
        podhost_cluster::access_review::review_token(&self.client, token)
            .map(|r| r.map_err(ReviewError::from))
            .boxed()
    }

    fn review_access<'a>(
        &'a self,
        user: &'a UserInfo,
        access: &'a NodeAccess,
    ) -> BoxFuture<'a, Result<(bool, String), ReviewError>> {
        podhost_cluster::access_review::review_access(&self.client, user, access)
            .map(|r| r.map_err(ReviewError::from))
            .boxed()
    }
}

/// What the kubelet API needs from the daemon.
pub struct KubeletApiParts {
    pub client: kube::Client,
    pub store: Arc<StatusStore>,
    pub layout: Layout,
    pub node_name: String,
    pub root_dir: PathBuf,
    pub podhost_exe: PathBuf,
    /// Connections into pods, shared with the local API's port-forward.
    pub port_forward: Arc<dyn podhost_api::PortForwardTarget>,
    /// The node's statistics, shared with the local and read-only APIs.
    pub stats: Arc<podhost_stats::Collector>,
}

/// Builds the TLS settings (a bad certificate stops the daemon at start, naming the
/// file) and starts serving.
pub async fn start(
    cluster: &ClusterConfig,
    parts: KubeletApiParts,
) -> Result<tokio::task::JoinHandle<()>, KubeletApiError> {
    let serving = match &cluster.serving_cert {
        Some((cert, key)) => ServingCert::Files {
            cert: cert.clone(),
            key: key.clone(),
        },
        None => ServingCert::SelfSigned {
            dir: parts.root_dir.join("pki"),
            hostnames: vec![parts.node_name.clone(), "localhost".into()],
            ips: cluster.node_ips.clone(),
        },
    };
    let tls = podhost_api::kubelet::tls::server_config(&serving, cluster.client_ca.as_deref())?;
    let state = KubeletApiState {
        store: parts.store,
        layout: parts.layout,
        node_name: parts.node_name,
        // The kubelet's review caches (2 min for tokens, 5 min allowed / 30 s denied).
        reviewer: Arc::new(CachingReviewer::new(Arc::new(ClusterReviewer {
            client: parts.client,
        }))),
        podhost_exe: parts.podhost_exe,
        port_forward: parts.port_forward,
        stats: Some(parts.stats),
    };
    podhost_api::kubelet::serve(SocketAddr::new(cluster.address, cluster.port), tls, state).await
}
