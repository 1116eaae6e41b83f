//! Cluster mode: says on the Node which pod CIDRs the bridge hands addresses from, and
//! starts the bridge as soon as the Node's podCIDR arrives (pods waiting for a network
//! then get one at their next retry instead of waiting for it to be started by them).

use std::sync::Arc;

use crate::network::pod_cidr::{NodePodCidrs, PodCidrOrigin, flag_mismatch};
use crate::network::{NetworkMode, NetworkSettings, NodeNetwork, cni};
use crate::status::{EventKind, StatusStore};

/// Whether the bridge takes its CIDRs from the Node: the bridge is (or may be) the
/// backend and `--pod-cidr` is not given.
pub fn needs_node_cidrs(settings: &NetworkSettings) -> bool {
    let bridge = match settings.mode {
        NetworkMode::Bridge => true,
        NetworkMode::Auto => !cni::has_config(&settings.cni_conf_dir),
        NetworkMode::Cni | NetworkMode::None => false,
    };
    bridge && settings.pod_cidrs.is_none()
}

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
        Ok(crate::network::PodNetwork::Bridge(_)) => store.node_event(
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

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(mode: NetworkMode, pod_cidrs: Option<&str>) -> NetworkSettings {
        NetworkSettings {
            mode,
            pod_cidrs: pod_cidrs.map(str::to_string),
            cni_conf_dir: "/nonexistent/podhost-test-cni".into(),
            cni_bin_dirs: Vec::new(),
        }
    }

    #[test]
    fn only_the_bridge_without_a_flag_waits_for_the_nodes_cidrs() {
        assert!(needs_node_cidrs(&settings(NetworkMode::Bridge, None)));
        assert!(needs_node_cidrs(&settings(NetworkMode::Auto, None)));
        assert!(!needs_node_cidrs(&settings(
            NetworkMode::Bridge,
            Some("10.9.0.0/24")
        )));
        assert!(!needs_node_cidrs(&settings(NetworkMode::None, None)));
        assert!(!needs_node_cidrs(&settings(NetworkMode::Cni, None)));
    }
}
