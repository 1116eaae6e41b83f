//! The node's heartbeat: its `Lease` in `kube-node-lease`, renewed every quarter of its
//! duration (10 s of 40 s), as the kubelet's node lease controller. The Lease is owned
//! by the Node, so deleting the Node deletes it.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use kube::Api;
use kube::api::PostParams;

use super::ClusterError;

/// The namespace of node leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";

/// The Lease a node holds: named after it, held by it, owned by its Node.
pub fn lease_object(node_name: &str, node_uid: &str, duration: Duration) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(node_name.to_string()),
            namespace: Some(LEASE_NAMESPACE.to_string()),
            owner_references: (!node_uid.is_empty()).then(|| {
                vec![OwnerReference {
                    api_version: "v1".to_string(),
                    kind: "Node".to_string(),
                    name: node_name.to_string(),
                    uid: node_uid.to_string(),
                    ..OwnerReference::default()
                }]
            }),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(node_name.to_string()),
            lease_duration_seconds: i32::try_from(duration.as_secs()).ok(),
            renew_time: Some(MicroTime(jiff_now())),
            ..LeaseSpec::default()
        }),
    }
}

fn jiff_now() -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::now()
}

/// One renewal: the Lease's renewTime set to now (created when missing). Returns the
/// Lease as stored, whose resourceVersion the next renewal updates.
pub async fn renew_once(
    leases: &Api<Lease>,
    current: Option<Lease>,
    node_name: &str,
    node_uid: &str,
    duration: Duration,
) -> Result<Lease, ClusterError> {
    let current = match current {
        Some(lease) => Some(lease),
        None => leases
            .get_opt(node_name)
            .await
            .map_err(ClusterError::api(format!(
                "reading the Lease of node {node_name}"
            )))?,
    };
    let Some(mut lease) = current else {
        return leases
            .create(
                &PostParams::default(),
                &lease_object(node_name, node_uid, duration),
            )
            .await
            .map_err(ClusterError::api(format!(
                "creating the Lease of node {node_name}"
            )));
    };
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    spec.holder_identity = Some(node_name.to_string());
    spec.lease_duration_seconds = i32::try_from(duration.as_secs()).ok();
    spec.renew_time = Some(MicroTime(jiff_now()));
    if lease.metadata.owner_references.is_none() && !node_uid.is_empty() {
        lease.metadata.owner_references = lease_object(node_name, node_uid, duration)
            .metadata
            .owner_references;
    }
    leases
        .replace(node_name, &PostParams::default(), &lease)
        .await
        .map_err(ClusterError::api(format!(
            "renewing the Lease of node {node_name}"
        )))
}

/// Renews for ever: every `renew_every`; after a failure (a conflict: someone else
/// wrote it; the API server away) the next try re-reads the Lease, with the kubelet's
/// backoff of 200 ms doubling up to 7 s.
pub async fn run(
    client: kube::Client,
    node_name: String,
    node_uid: String,
    duration: Duration,
    renew_every: Duration,
) {
    let leases: Api<Lease> = Api::namespaced(client, LEASE_NAMESPACE);
    let mut current = None;
    let mut retry = Duration::from_millis(200);
    loop {
        match renew_once(&leases, current.take(), &node_name, &node_uid, duration).await {
            Ok(stored) => {
                current = Some(stored);
                retry = Duration::from_millis(200);
                tokio::time::sleep(renew_every).await;
            }
            Err(error) => {
                tracing::warn!(%error, retry_in = ?retry, "node lease renewal failed");
                tokio::time::sleep(retry).await;
                retry = (retry * 2).min(Duration::from_secs(7));
            }
        }
    }
}
