//! Node registration, as the kubelet's `registerWithAPIServer`: create the Node; if it
//! exists already (a restart, or a re-install on the same host), keep it and bring the
//! labels and annotations this node owns up to date, leaving what others set.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};

use super::ClusterError;

/// The field manager podhost writes with (server-side bookkeeping and audit logs).
pub const FIELD_MANAGER: &str = "podhost";

/// Registers `node` once: created, or the existing one reconciled. Returns the Node as
/// the API server has it.
pub async fn register_once(client: &kube::Client, node: &Node) -> Result<Node, ClusterError> {
    let nodes: Api<Node> = Api::all(client.clone());
    let name = node.metadata.name.clone().unwrap_or_default();
    match nodes.create(&PostParams::default(), node).await {
        Ok(created) => {
            tracing::info!(node = %name, "registered the node with the API server");
            Ok(created)
        }
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let existing = nodes.get(&name).await.map_err(ClusterError::api(format!(
                "reading the existing Node {name}"
            )))?;
            match reconcile_patch(&existing, node) {
                None => {
                    tracing::info!(node = %name, "the node was registered already");
                    Ok(existing)
                }
                Some(patch) => {
                    let params = PatchParams {
                        field_manager: Some(FIELD_MANAGER.to_string()),
                        ..PatchParams::default()
                    };
                    let patched = nodes
                        .patch(&name, &params, &Patch::Strategic(patch))
                        .await
                        .map_err(ClusterError::api(format!(
                            "updating the labels of Node {name}"
                        )))?;
                    tracing::info!(node = %name, "the node was registered already; labels brought up to date");
                    Ok(patched)
                }
            }
        }
        Err(source) => Err(ClusterError::Api {
            what: format!("registering Node {name}"),
            source,
        }),
    }
}

/// Registers, retrying with the kubelet's backoff (100 ms doubling to 7 s) until the
/// API server accepts: a node that cannot register yet (API server down, RBAC not
/// granted) keeps running its static pods and keeps trying.
pub async fn register(client: &kube::Client, node: &Node) -> Node {
    let mut wait = Duration::from_millis(100);
    loop {
        match register_once(client, node).await {
            Ok(registered) => return registered,
            Err(error) => {
                tracing::warn!(%error, retry_in = ?wait, "node registration failed");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(7));
            }
        }
    }
}

/// The strategic merge patch that gives `existing` the labels and annotations `wanted`
/// has (others' labels stay), or `None` when nothing differs.
pub fn reconcile_patch(existing: &Node, wanted: &Node) -> Option<serde_json::Value> {
    let missing = |have: &Option<std::collections::BTreeMap<String, String>>,
                   want: &Option<std::collections::BTreeMap<String, String>>| {
        let have = have.clone().unwrap_or_default();
        want.clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, v)| have.get(k) != Some(v))
            .map(|(k, v)| (k, serde_json::Value::String(v)))
            .collect::<serde_json::Map<String, serde_json::Value>>()
    };
    let labels = missing(&existing.metadata.labels, &wanted.metadata.labels);
    let annotations = missing(&existing.metadata.annotations, &wanted.metadata.annotations);
    if labels.is_empty() && annotations.is_empty() {
        return None;
    }
    let mut metadata = serde_json::Map::new();
    if !labels.is_empty() {
        metadata.insert("labels".into(), labels.into());
    }
    if !annotations.is_empty() {
        metadata.insert("annotations".into(), annotations.into());
    }
    Some(serde_json::json!({ "metadata": metadata }))
}
