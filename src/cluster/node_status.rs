//! The node's status, as the kubelet's `syncNodeStatus`: computed every
//! `nodeStatusUpdateFrequency` (10 s) and posted when it changed, or every
//! `nodeStatusReportFrequency` (5 min) when it did not — the Lease is the heartbeat.
//! Posted as a strategic merge patch of `nodes/status`: conditions merge by type, so
//! conditions other agents set (NetworkUnavailable…) are not touched.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, NodeCondition};
use kube::Api;
use kube::api::{Patch, PatchParams};

use super::ClusterError;
use super::register::FIELD_MANAGER;
use crate::model::node::conditions::conditions_changed;
use crate::model::node::{
    HostFacts, NodePressure, NodeSettings, allocatable, capacity, next_conditions,
};

/// The patch of `nodes/status` for the conditions and the figures the node owns.
pub fn status_patch(
    host: &HostFacts,
    settings: &NodeSettings,
    conditions: &[NodeCondition],
) -> serde_json::Value {
    serde_json::json!({
        "status": {
            "conditions": conditions,
            "capacity": capacity(host, settings),
            "allocatable": allocatable(host, settings),
            "nodeInfo": crate::model::node::object::node_info(host, settings),
        }
    })
}

/// Posts the status once: conditions from `observed` against the Node as the API
/// server has it. Returns the conditions posted.
pub async fn post_once(
    nodes: &Api<Node>,
    host: &HostFacts,
    settings: &NodeSettings,
    observed: &NodePressure,
) -> Result<Vec<NodeCondition>, ClusterError> {
    let name = &settings.name;
    let node = nodes
        .get(name)
        .await
        .map_err(ClusterError::api(format!("reading Node {name}")))?;
    let previous = node.status.and_then(|s| s.conditions).unwrap_or_default();
    let now = crate::model::k8s_time::to_k8s(chrono::Utc::now());
    let conditions = next_conditions(&previous, observed, &now);
    let ours: Vec<NodeCondition> = conditions
        .into_iter()
        .filter(|c| is_ours(&c.type_))
        .collect();
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    nodes
        .patch_status(
            name,
            &params,
            &Patch::Strategic(status_patch(host, settings, &ours)),
        )
        .await
        .map_err(ClusterError::api(format!(
            "posting the status of Node {name}"
        )))?;
    Ok(ours)
}

fn is_ours(type_: &str) -> bool {
    matches!(
        type_,
        "MemoryPressure" | "DiskPressure" | "PIDPressure" | "Ready"
    )
}

/// Keeps the status posted for ever. `observe` says what the eviction manager and the
/// daemon see now.
pub async fn run(
    client: kube::Client,
    host: HostFacts,
    settings: super::ClusterSettings,
    observe: impl Fn() -> NodePressure + Send,
) {
    let nodes: Api<Node> = Api::all(client);
    let mut posted: Option<(Vec<NodeCondition>, Instant)> = None;
    loop {
        let observed = observe();
        let due = match &posted {
            None => true,
            Some((last, at)) => {
                let now = crate::model::k8s_time::to_k8s(chrono::Utc::now());
                conditions_changed(last, &next_conditions(last, &observed, &now))
                    || at.elapsed() >= settings.status_report_every
            }
        };
        let wait = if due {
            match post_once(&nodes, &host, &settings.node, &observed).await {
                Ok(conditions) => {
                    posted = Some((conditions, Instant::now()));
                    settings.status_update_every
                }
                Err(error) => {
                    tracing::warn!(%error, "node status update failed; retrying");
                    Duration::from_secs(1).min(settings.status_update_every)
                }
            }
        } else {
            settings.status_update_every
        };
        tokio::time::sleep(wait).await;
    }
}
