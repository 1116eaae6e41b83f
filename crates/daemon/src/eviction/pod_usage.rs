//! What each active pod uses, for the ranking and the message: the pod's and its
//! containers' memory working set (their cgroups), their writable layers and logs, the
//! pod's disk emptyDirs, its processes. Blocking reads: call from `spawn_blocking`.

use std::path::Path;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::signals::stat_value;
use podhost_disk::Layout;
use podhost_model::eviction::{CRITICAL_ANNOTATION, ContainerUsage, PodUsage};
use podhost_model::qos::{pod_resources, qos_class};
use podhost_runtime::node_cgroups::NodeCgroups;

const CGROUP_MOUNT: &str = "/sys/fs/cgroup";

/// Whether the pod opted out of eviction.
pub fn is_critical(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CRITICAL_ANNOTATION))
        .is_some_and(|v| v == "true")
}

/// The usage of `pod` (one the daemon runs) now.
pub fn pod_usage(pod: &Pod, layout: &Layout, cgroups: &NodeCgroups) -> PodUsage {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let spec = pod.spec.clone().unwrap_or_default();
    let qos = qos_class(&pod_resources(pod));
    let pod_cgroup = cgroups.pod_path(qos, &uid);
    let log_dir = layout.pod_log_dir(namespace, &name, &uid);
    let containers: Vec<ContainerUsage> = spec
        .containers
        .iter()
        .map(|c| {
            let (layer, _) = du(&layout.container_dir(&uid, &c.name));
            let (logs, _) = du(&log_dir.join(&c.name));
            ContainerUsage {
                name: c.name.clone(),
                memory: working_set(&format!("{pod_cgroup}/{}", c.name)).unwrap_or(0),
                memory_request: request(c, "memory"),
                disk: layer + logs,
                disk_request: request(c, "ephemeral-storage"),
            }
        })
        .collect();
    // Init containers' layers and logs count for the pod, not in the message.
    let (all_layers, layer_inodes) = du(&layout.pod_dir(&uid).join("containers"));
    let (all_logs, log_inodes) = du(&log_dir);
    let (volumes, volume_inodes) = du(&layout
        .pod_volumes_dir(&uid)
        .join(podhost_volume::plan::EMPTY_DIR_KIND));
    let memory =
        working_set(&pod_cgroup).unwrap_or_else(|| containers.iter().map(|c| c.memory).sum());
    PodUsage {
        priority: spec.priority.unwrap_or(0),
        critical: is_critical(pod),
        memory,
        disk: all_layers + all_logs + volumes,
        inodes: layer_inodes + log_inodes + volume_inodes,
        processes: processes(&pod_cgroup),
        containers,
        uid,
        name,
    }
}

/// A request (`requests`, else `limits` as the API server defaults it), in bytes.
fn request(c: &Container, resource: &str) -> i64 {
    let r = c.resources.as_ref();
    let pick = |m: Option<&std::collections::BTreeMap<String, _>>| {
        m.and_then(|m| m.get(resource)).and_then(
            |q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity| {
                podhost_model::quantity::bytes(&q.0)
            },
        )
    };
    pick(r.and_then(|r| r.requests.as_ref()))
        .or_else(|| pick(r.and_then(|r| r.limits.as_ref())))
        .unwrap_or(0)
}

/// usage − inactive_file of the cgroup `rel` (v2; else the v1 memory hierarchy).
fn working_set(rel: &str) -> Option<i64> {
    let rel = rel.trim_start_matches('/');
    let v2 = Path::new(CGROUP_MOUNT).join(rel);
    let read = |p: &Path| std::fs::read_to_string(p).ok();
    let (usage, inactive) = match read(&v2.join("memory.current")) {
        Some(current) => (
            current.trim().parse::<i64>().ok()?,
            read(&v2.join("memory.stat")).and_then(|s| stat_value(&s, "inactive_file"))?,
        ),
        None => {
            let v1 = Path::new(CGROUP_MOUNT).join("memory").join(rel);
            (
                read(&v1.join("memory.usage_in_bytes"))?
                    .trim()
                    .parse()
                    .ok()?,
                read(&v1.join("memory.stat"))
                    .and_then(|s| stat_value(&s, "total_inactive_file"))?,
            )
        }
    };
    Some((usage - inactive).max(0))
}

/// The tasks of the pod cgroup (v2 `pids.current`, else the v1 pids hierarchy).
fn processes(rel: &str) -> i64 {
    let rel = rel.trim_start_matches('/');
    [
        Path::new(CGROUP_MOUNT).join(rel).join("pids.current"),
        Path::new(CGROUP_MOUNT)
            .join("pids")
            .join(rel)
            .join("pids.current"),
    ]
    .iter()
    .find_map(|p| std::fs::read_to_string(p).ok()?.trim().parse().ok())
    .unwrap_or(0)
}

/// Bytes allocated and inodes under `dir` (`volume::tree_usage`), as the eviction
/// arithmetic's signed numbers; (0, 0) when it does not exist.
pub fn du(dir: &Path) -> (i64, i64) {
    let usage = podhost_volume::tree_usage(dir).unwrap_or_default();
    (
        i64::try_from(usage.bytes).unwrap_or(i64::MAX),
        i64::try_from(usage.inodes).unwrap_or(i64::MAX),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_default_to_limits() {
        let c: Container = serde_json::from_value(serde_json::json!({
            "name": "c",
            "resources": {"limits": {"memory": "64Mi"}, "requests": {"ephemeral-storage": "1Gi"}}
        }))
        .unwrap();
        assert_eq!(request(&c, "memory"), 64 << 20);
        assert_eq!(request(&c, "ephemeral-storage"), 1 << 30);
        assert_eq!(request(&c, "cpu-less"), 0);
    }
}
