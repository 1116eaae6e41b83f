//! QoS class and the oom_score_adj policy (kubelet-semantics §6): the class and the
//! scores are in `podhost_model_core::qos`, re-exported here; this adds what reads a
//! pod's spec.

use k8s_openapi::api::core::v1::{Container, Pod};

pub use podhost_model_core::qos::*;

use super::quantity::{bytes, cpu_millis};

/// The CPU and memory `c` asks for, with requests defaulted to limits as the API server
/// does.
pub fn container_resources(c: &Container) -> ContainerResources {
    let r = c.resources.clone().unwrap_or_default();
    let get = |map: &Option<
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >,
               key: &str| map.as_ref().and_then(|m| m.get(key)).map(|q| q.0.clone());
    let cpu_limit_milli = get(&r.limits, "cpu").and_then(|q| cpu_millis(&q));
    let memory_limit = get(&r.limits, "memory").and_then(|q| bytes(&q));
    ContainerResources {
        cpu_request_milli: get(&r.requests, "cpu")
            .and_then(|q| cpu_millis(&q))
            .or(cpu_limit_milli),
        cpu_limit_milli,
        memory_request: get(&r.requests, "memory")
            .and_then(|q| bytes(&q))
            .or(memory_limit),
        memory_limit,
    }
}

/// All containers of a pod (init containers included) as the QoS computation sees them.
pub fn pod_resources(pod: &Pod) -> Vec<ContainerResources> {
    // Borrowed, not copied: the statistics' housekeeping asks for every pod's QoS
    // every 10 s.
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    spec.init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .map(container_resources)
        .collect()
}

/// `priorityClassName: system-node-critical` (static pods are always critical).
pub fn is_node_critical(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.priority_class_name.as_deref())
        == Some("system-node-critical")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_default_to_limits() {
        let c: Container = serde_json::from_value(serde_json::json!({
            "name": "c", "resources": {"limits": {"cpu": "500m", "memory": "64Mi"}}
        }))
        .unwrap();
        let r = container_resources(&c);
        assert_eq!(r.cpu_request_milli, Some(500));
        assert_eq!(r.memory_request, Some(64 << 20));
        assert_eq!(qos_class(&[r]), QosClass::Guaranteed);
    }
}
