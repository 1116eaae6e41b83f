//! Whether the pod's requests fit what the node's active pods leave of its
//! allocatable: the scheduler's `noderesources.Fits` as the kubelet's admission runs
//! it (`pkg/scheduler/framework/plugins/noderesources/fit.go`, `fitsRequest`), after
//! `removeMissingExtendedResources` (`pkg/kubelet/lifecycle/predicate.go`).

use super::Unfit;
use super::node::NodeView;
use super::requests::{Resources, is_extended_resource};

/// What the node's active pods hold: their count and their requests summed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Usage {
    pub pods: i64,
    pub requested: Resources,
}

impl Usage {
    /// Counts one more pod with `requests`.
    pub fn add_pod(&mut self, requests: &Resources) {
        self.pods += 1;
        self.requested.add(requests);
    }
}

/// The extended resources the node does not have are dropped from the pod's
/// requests before the fit: they are cluster-level resources (or backed by DRA) that
/// the node cannot account for. Hugepages and the other native scalars stay.
pub fn without_missing_extended(request: &Resources, node: &NodeView) -> Resources {
    let mut kept = request.clone();
    kept.scalar.retain(|name, _| {
        !is_extended_resource(name) || node.allocatable.scalar.contains_key(name)
    });
    kept
}

/// Every resource the pod does not fit, in the scheduler's order: pods, cpu, memory,
/// ephemeral-storage, then the scalar resources (by name; Go's order is a map's).
/// A pod that requests nothing is checked against the pod count only.
pub fn insufficient_resources(request: &Resources, node: &NodeView, used: &Usage) -> Vec<Unfit> {
    let mut out = Vec::new();
    let short =
        |resource: &str, requested: i64, used: i64, capacity: i64| Unfit::InsufficientResource {
            resource: resource.to_string(),
            requested,
            used,
            capacity,
        };
    if used.pods + 1 > node.max_pods {
        out.push(short("pods", 1, used.pods, node.max_pods));
    }
    if request.is_empty() {
        return out;
    }
    let (have, held) = (&node.allocatable, &used.requested);
    for (resource, requested, used, capacity) in [
        ("cpu", request.cpu_millis, held.cpu_millis, have.cpu_millis),
        (
            "memory",
            request.memory_bytes,
            held.memory_bytes,
            have.memory_bytes,
        ),
        (
            "ephemeral-storage",
            request.ephemeral_storage_bytes,
            held.ephemeral_storage_bytes,
            have.ephemeral_storage_bytes,
        ),
    ] {
        if capacity < requested.saturating_add(used) {
            out.push(short(resource, requested, used, capacity));
        }
    }
    for (name, &requested) in &request.scalar {
        let used = held.scalar.get(name).copied().unwrap_or(0);
        let capacity = have.scalar.get(name).copied().unwrap_or(0);
        if capacity < requested.saturating_add(used) {
            out.push(short(name, requested, used, capacity));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> NodeView {
        NodeView {
            name: "box".into(),
            allocatable: Resources {
                cpu_millis: 2000,
                memory_bytes: 4 << 30,
                ephemeral_storage_bytes: 10 << 30,
                scalar: [
                    ("hugepages-2Mi".to_string(), 0),
                    ("example.com/fpga".to_string(), 1),
                ]
                .into(),
            },
            max_pods: 3,
            ..NodeView::default()
        }
    }

    fn asking(cpu_millis: i64, memory_bytes: i64) -> Resources {
        Resources {
            cpu_millis,
            memory_bytes,
            ..Resources::default()
        }
    }

    #[test]
    fn cpu_beyond_what_the_active_pods_leave_is_insufficient() {
        let mut used = Usage::default();
        used.add_pod(&asking(1500, 1 << 30));
        assert!(insufficient_resources(&asking(500, 0), &node(), &used).is_empty());
        let unfit = insufficient_resources(&asking(600, 0), &node(), &used);
        assert_eq!(
            unfit,
            [Unfit::InsufficientResource {
                resource: "cpu".into(),
                requested: 600,
                used: 1500,
                capacity: 2000
            }]
        );
        assert_eq!(unfit[0].reason(), "OutOfcpu");
        assert_eq!(
            unfit[0].to_string(),
            "Node didn't have enough resource: cpu, requested: 600, used: 1500, capacity: 2000"
        );
    }

    #[test]
    fn every_short_resource_is_listed_in_the_schedulers_order() {
        let mut used = Usage::default();
        for _ in 0..3 {
            used.add_pod(&Resources::default());
        }
        let mut request = asking(3000, 5 << 30);
        request.ephemeral_storage_bytes = 11 << 30;
        request.scalar.insert("hugepages-2Mi".into(), 2 << 20);
        let reasons: Vec<String> = insufficient_resources(&request, &node(), &used)
            .iter()
            .map(|u| u.reason().into_owned())
            .collect();
        assert_eq!(
            reasons,
            [
                "OutOfpods",
                "OutOfcpu",
                "OutOfmemory",
                "OutOfephemeral-storage",
                "OutOfhugepages-2Mi"
            ]
        );
    }

    #[test]
    fn the_pod_count_is_checked_even_for_a_pod_that_asks_nothing() {
        let mut used = Usage::default();
        used.add_pod(&Resources::default());
        used.add_pod(&Resources::default());
        assert!(insufficient_resources(&Resources::default(), &node(), &used).is_empty());
        used.add_pod(&Resources::default());
        let unfit = insufficient_resources(&Resources::default(), &node(), &used);
        assert_eq!(
            unfit[0].to_string(),
            "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3"
        );
        assert_eq!(unfit[0].reason(), "OutOfpods");
    }

    #[test]
    fn extended_resources_the_node_lacks_are_not_checked_but_those_it_has_are() {
        let mut request = Resources::default();
        request.scalar.insert("example.com/gpu".into(), 4);
        request.scalar.insert("example.com/fpga".into(), 2);
        let request = without_missing_extended(&request, &node());
        assert_eq!(
            request.scalar.keys().collect::<Vec<_>>(),
            ["example.com/fpga"]
        );
        let unfit = insufficient_resources(&request, &node(), &Usage::default());
        assert_eq!(unfit[0].reason(), "OutOfexample.com/fpga");
        assert_eq!(
            unfit[0].to_string(),
            "Node didn't have enough resource: example.com/fpga, requested: 2, used: 0, capacity: 1"
        );
    }
}
