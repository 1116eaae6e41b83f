//! The node's status, as the kubelet's `syncNodeStatus`: computed every
//! `nodeStatusUpdateFrequency` (10 s) and posted when it changed, or every
//! `nodeStatusReportFrequency` (5 min) when it did not — the Lease is the heartbeat.
//! Posted as a strategic merge patch of `nodes/status`: conditions merge by type, so
//! conditions other agents set (NetworkUnavailable…) are not touched.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ContainerImage, Node, NodeCondition};
use kube::Api;
use kube::api::{Patch, PatchParams};

use super::ClusterError;
use super::register::FIELD_MANAGER;
use podhost_model::node::conditions::conditions_changed;
use podhost_model::node::{
    HostFacts, NodePressure, NodeSettings, allocatable, capacity, next_conditions,
};

/// The patch of `nodes/status` for the conditions and the figures the node owns.
pub fn status_patch(
    host: &HostFacts,
    settings: &NodeSettings,
    conditions: &[NodeCondition],
    images: &[ContainerImage],
) -> serde_json::Value {
    serde_json::json!({
        "status": {
            "conditions": conditions,
            // A list without a merge key: the patch replaces it whole.
            "images": images,
            "capacity": capacity(host, settings),
            "allocatable": allocatable(host, settings),
            "nodeInfo": podhost_model::node::object::node_info(host, settings),
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
    images: &[ContainerImage],
) -> Result<Vec<NodeCondition>, ClusterError> {
    let name = &settings.name;
    let node = nodes
        .get(name)
        .await
        .map_err(ClusterError::api(format!("reading Node {name}")))?;
    let previous = node.status.and_then(|s| s.conditions).unwrap_or_default();
    let now = podhost_model::k8s_time::to_k8s(chrono::Utc::now());
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
            &Patch::Strategic(status_patch(host, settings, &ours, images)),
        )
        .await
        .map_err(ClusterError::api(format!(
            "posting the status of Node {name}"
        )))?;
    Ok(ours)
}

/// What the last successful post said, and when.
struct Posted {
    conditions: Vec<NodeCondition>,
    images: Vec<ContainerImage>,
    at: Instant,
}

fn is_ours(type_: &str) -> bool {
    matches!(
        type_,
        "MemoryPressure" | "DiskPressure" | "PIDPressure" | "Ready"
    )
}

/// Keeps the status posted for ever. `observe` says what the eviction manager and the
/// daemon see now, `images` what the image store holds (`status.images`); a change of `wake` (the pod network starting) has it looked at at
/// once rather than at the next update period.
pub async fn run(
    client: kube::Client,
    host: HostFacts,
    settings: super::ClusterSettings,
    observe: impl Fn() -> NodePressure + Send,
    images: impl Fn() -> Vec<ContainerImage> + Send,
    mut wake: tokio::sync::watch::Receiver<bool>,
) {
    let nodes: Api<Node> = Api::all(client);
    let mut posted: Option<Posted> = None;
    loop {
        let observed = observe();
        let images_now = images();
        let due = match &posted {
            None => true,
            Some(last) => {
                let now = podhost_model::k8s_time::to_k8s(chrono::Utc::now());
                conditions_changed(
                    &last.conditions,
                    &next_conditions(&last.conditions, &observed, &now),
                ) || last.images != images_now
                    || last.at.elapsed() >= settings.status_report_every
            }
        };
        let wait = if due {
            match post_once(&nodes, &host, &settings.node, &observed, &images_now).await {
                Ok(conditions) => {
                    posted = Some(Posted {
                        conditions,
                        images: images_now,
                        at: Instant::now(),
                    });
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
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            changed = wake.changed() => {
                if changed.is_err() {
                    // Nothing will wake it any more: the period alone from now on.
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }
}
