//! The node as its admission sees it: taken from the very Node object the node
//! registers (`model::node::node_object`), so that what the scheduler was told and
//! what the node enforces cannot differ.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Taint};

use super::requests::Resources;

/// Name, labels, taints, allocatable and pod capacity of the node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeView {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    /// `status.allocatable` without `pods`.
    pub allocatable: Resources,
    /// `status.allocatable.pods` (`--max-pods`): how many active pods fit.
    pub max_pods: i64,
}

impl NodeView {
    /// The view of `node` (a Node without an allocatable `pods` admits none, as the
    /// scheduler's `AllowedPodNumber` of zero).
    pub fn from_node(node: &Node) -> Self {
        let allocatable = node
            .status
            .as_ref()
            .and_then(|s| s.allocatable.clone())
            .unwrap_or_default();
        let max_pods = allocatable
            .get("pods")
            .and_then(|q| crate::quantity::Quantity::parse(&q.0).ok())
            .and_then(|q| q.value().ok())
            .unwrap_or(0);
        Self {
            name: node.metadata.name.clone().unwrap_or_default(),
            labels: node.metadata.labels.clone().unwrap_or_default(),
            taints: node
                .spec
                .as_ref()
                .and_then(|s| s.taints.clone())
                .unwrap_or_default(),
            allocatable: Resources::from_list(&allocatable),
            max_pods,
        }
    }

    /// This view with the labels and taints the API server's copy of the Node has now
    /// (an administrator's `kubectl label`/`kubectl taint`); the allocatable and pod
    /// count stay this node's own, which it computes and posts (the API's copy may
    /// still hold a previous run's until the next status post). `None` when nothing
    /// changed.
    pub fn with_placement_of(&self, node: &Node) -> Option<Self> {
        let api = Self::from_node(node);
        if api.labels == self.labels && api.taints == self.taints {
            return None;
        }
        Some(Self {
            labels: api.labels,
            taints: api.taints,
            ..self.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::{HostFacts, NodeSettings, Reserved, node_object};

    #[test]
    fn the_view_is_the_registered_nodes_allocatable_labels_and_taints() {
        let host = HostFacts {
            cpus: 4,
            memory_bytes: 8 << 30,
            ephemeral_storage_bytes: 100 << 30,
            machine_id: String::new(),
            system_uuid: String::new(),
            boot_id: String::new(),
            kernel_version: String::new(),
            os_image: String::new(),
            architecture: "amd64".into(),
            hostname: "box".into(),
            internal_ips: vec![],
        };
        let settings = NodeSettings {
            name: "box".into(),
            labels: BTreeMap::from([("disk".to_string(), "ssd".to_string())]),
            taints: crate::node::parse_taints("dedicated=db:NoExecute").unwrap(),
            kube_reserved: Reserved::parse("--kube-reserved", "cpu=500m,memory=1Gi").unwrap(),
            system_reserved: Reserved::default(),
            eviction_hard: vec![],
            max_pods: 20,
            kubelet_port: 10250,
            kubelet_version: "v1.34.0".into(),
        };
        let view = NodeView::from_node(&node_object(&host, &settings));
        assert_eq!(view.name, "box");
        assert_eq!(view.labels["disk"], "ssd");
        assert_eq!(view.labels["kubernetes.io/hostname"], "box");
        assert_eq!(view.taints[0].key, "dedicated");
        assert_eq!(view.allocatable.cpu_millis, 3500);
        assert_eq!(view.allocatable.memory_bytes, 7 << 30);
        assert_eq!(view.allocatable.ephemeral_storage_bytes, 100 << 30);
        assert_eq!(view.allocatable.scalar["hugepages-2Mi"], 0);
        assert_eq!(view.max_pods, 20);
    }

    #[test]
    fn placement_comes_from_the_api_and_resources_stay_the_nodes() {
        let own = NodeView {
            name: "box".into(),
            labels: BTreeMap::from([("disk".to_string(), "ssd".to_string())]),
            taints: vec![],
            allocatable: Resources::default(),
            max_pods: 20,
        };
        let mut api = Node::default();
        api.metadata.name = Some("box".into());
        api.metadata.labels = own.labels.clone().into();
        assert_eq!(own.with_placement_of(&api), None, "nothing changed");
        api.metadata.labels = Some(BTreeMap::from([("disk".to_string(), "hdd".to_string())]));
        api.spec = Some(k8s_openapi::api::core::v1::NodeSpec {
            taints: crate::node::parse_taints("maintenance=yes:NoSchedule").ok(),
            ..Default::default()
        });
        // The API's copy has no allocatable yet: the node's own numbers stay.
        let changed = own.with_placement_of(&api).unwrap();
        assert_eq!(changed.labels["disk"], "hdd");
        assert_eq!(changed.taints.len(), 1);
        assert_eq!(changed.max_pods, 20);
        assert_eq!(changed.name, "box");
    }
}
