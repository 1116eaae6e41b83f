//! Cluster mode: says on the Node which pod CIDRs the bridge hands addresses from, and
//! starts the bridge as soon as the Node's podCIDR arrives (pods waiting for a network
//! retry the moment it starts, see `NodeNetwork::ready`).

use std::sync::Arc;

use podhost_network::pod_cidr::{NodePodCidrs, PodCidrOrigin, flag_mismatch};
use podhost_network::{NetworkMode, NetworkSettings, NodeNetwork};
use podhost_status::{EventKind, StatusStore};

/// Runs until the Node's podCIDRs were read once and the choice was reported.
pub async fn run(
    network: Arc<NodeNetwork>,
    settings: NetworkSettings,
    mut node_cidrs: NodePodCidrs,
    store: Arc<StatusStore>,
) {
    if !matches!(settings.mode, NetworkMode::Bridge | NetworkMode::Auto) {
        return;
    }
    let Ok(node) = node_cidrs
        .wait_for(Option::is_some)
        .await
        .map(|v| v.clone())
    else {
        return;
    };
    let node = node.unwrap_or_default();
    if let Some(flag) = &settings.pod_cidrs
        && let Some(message) = flag_mismatch(flag, &node)
    {
        store.node_event(EventKind::Warning, "PodCIDRMismatch", message);
    }
    // With an empty podCIDR (and no flag) the wait goes on until the Node has one.
    let Ok(_) = node_cidrs
        .wait_for(|v| v.as_ref().is_some_and(|l| !l.is_empty()) || settings.pod_cidrs.is_some())
        .await
    else {
        return;
    };
    let Some(choice) = network.pod_cidr_choice() else {
        return;
    };
    match network.backend().await {
        Ok(podhost_network::PodNetwork::Bridge(_)) => store.node_event(
            EventKind::Normal,
            "PodCIDR",
            format!(
                "pods get addresses from {} ({}){}",
                choice.cidrs,
                choice.origin,
                if choice.origin == PodCidrOrigin::Node {
                    ""
                } else {
                    ", not the Node's spec.podCIDR"
                }
            ),
        ),
        Ok(_) => {}
        Err(error) => tracing::warn!(%error, "the pod network cannot start with its pod CIDRs"),
    }
}
