//! Says which network `--pod-network auto` chose when it is a CNI config: installing
//! another tool (podman drops `87-podman-bridge.conflist` into /etc/cni/net.d) would
//! otherwise move podhost's pods to that tool's network without a word.

use podhost_network::{NetworkMode, PodNetwork};
use podhost_status::{EventKind, StatusStore};

/// The node event's reason.
pub const REASON: &str = "PodNetworkFromCniConfig";

/// The annotation of the Node (`podhost describe node`) that names the pod network.
pub const ANNOTATION: &str = "podhost.io/pod-network";

/// The pod network in a line: `none`, `bridge`, or `cni NAME (FILE)`; or why it did
/// not start.
pub fn summary(started: Result<&PodNetwork, &dyn std::fmt::Display>) -> String {
    match started {
        Ok(PodNetwork::Cni(cni)) => {
            let list = cni.config_list();
            format!("cni {} ({})", list.name, list.file.display())
        }
        Ok(network) => network.mode().to_string(),
        Err(e) => format!("not started: {e}"),
    }
}

/// With `--pod-network auto` and a CNI network started: a log line and a node event
/// naming the config file and its network.
pub fn report(mode: NetworkMode, started: &PodNetwork, store: &StatusStore) {
    let (NetworkMode::Auto, PodNetwork::Cni(cni)) = (mode, started) else {
        return;
    };
    let list = cni.config_list();
    let message = format!(
        "--pod-network auto uses the CNI network {:?} of {} (the first config in the CNI \
         config directory takes precedence over the built-in bridge); \
         --pod-network bridge keeps podhost's own bridge",
        list.name,
        list.file.display()
    );
    tracing::warn!("{message}");
    store.node_event(EventKind::Normal, REASON, message);
}
