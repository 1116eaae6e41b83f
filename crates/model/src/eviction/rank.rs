//! Which pod goes first (`pkg/kubelet/eviction/helpers.go` rank functions) and the
//! message it is evicted with (`evictionMessage`).

use std::cmp::Reverse;

use super::threshold::Resource;

/// One container's usage and requests, as the message needs them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerUsage {
    pub name: String,
    /// Working set bytes.
    pub memory: i64,
    pub memory_request: i64,
    /// Writable layer plus logs, bytes.
    pub disk: i64,
    pub disk_request: i64,
}

/// A pod as the ranking sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodUsage {
    pub uid: String,
    pub name: String,
    /// `spec.priority` (0 when unset).
    pub priority: i32,
    /// Annotated `podhost.io/critical: "true"`: never evicted.
    pub critical: bool,
    /// The pod cgroup's working set, bytes.
    pub memory: i64,
    /// Writable layers, logs and disk emptyDirs, bytes.
    pub disk: i64,
    /// Inodes of the same.
    pub inodes: i64,
    pub processes: i64,
    pub containers: Vec<ContainerUsage>,
}

impl PodUsage {
    fn memory_request(&self) -> i64 {
        self.containers.iter().map(|c| c.memory_request).sum()
    }

    fn disk_request(&self) -> i64 {
        self.containers.iter().map(|c| c.disk_request).sum()
    }

    /// Usage and request of `resource` (inodes and pids have no request).
    fn usage_and_request(&self, resource: Resource) -> (i64, i64) {
        match resource {
            Resource::Memory => (self.memory, self.memory_request()),
            Resource::EphemeralStorage => (self.disk, self.disk_request()),
            Resource::Inodes => (self.inodes, 0),
            Resource::Pids => (self.processes, 0),
        }
    }
}

/// Orders `pods` so that the first is evicted first: for memory and disk, pods using
/// more than they requested, then lower priority, then the larger usage beyond the
/// request; for pids, lower priority then more processes.
pub fn rank(resource: Resource, pods: &mut [PodUsage]) {
    pods.sort_by_key(|p| {
        let (usage, request) = p.usage_and_request(resource);
        let exceeds = match resource {
            Resource::Pids => true,
            _ => usage > request,
        };
        (!exceeds, p.priority, Reverse(usage - request))
    });
}

/// The kubelet's eviction message: the resource, the threshold and what was available,
/// then every container that used more of it than it requested.
pub fn eviction_message(
    resource: Resource,
    threshold_quantity: i64,
    available: i64,
    pod: &PodUsage,
) -> String {
    let fmt = |v: i64| format_quantity(v, resource.is_bytes());
    let mut message = format!(
        "The node was low on resource: {}. Threshold quantity: {}, available: {}. ",
        resource.name(),
        fmt(threshold_quantity),
        fmt(available)
    );
    for c in &pod.containers {
        let (usage, request) = match resource {
            Resource::Memory => (c.memory, c.memory_request),
            Resource::EphemeralStorage => (c.disk, c.disk_request),
            _ => continue,
        };
        if usage > request {
            message.push_str(&format!(
                "Container {} was using {}, request is {}, has larger consumption of {}. ",
                c.name,
                fmt(usage),
                fmt(request),
                resource.name()
            ));
        }
    }
    message
}

/// A quantity in its canonical form as the API prints it: the largest binary (bytes) or
/// decimal (counts) suffix that divides it exactly, else the plain number.
pub fn format_quantity(value: i64, binary: bool) -> String {
    let suffixes: [(&str, i64); 6] = if binary {
        [
            ("Ei", 1 << 60),
            ("Pi", 1 << 50),
            ("Ti", 1 << 40),
            ("Gi", 1 << 30),
            ("Mi", 1 << 20),
            ("Ki", 1 << 10),
        ]
    } else {
        [
            ("E", 1_000_000_000_000_000_000),
            ("P", 1_000_000_000_000_000),
            ("T", 1_000_000_000_000),
            ("G", 1_000_000_000),
            ("M", 1_000_000),
            ("k", 1_000),
        ]
    };
    if value != 0 {
        for (suffix, unit) in suffixes {
            if value % unit == 0 {
                return format!("{}{suffix}", value / unit);
            }
        }
    }
    value.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MI: i64 = 1 << 20;

    fn pod(name: &str, priority: i32, memory: i64, request: i64) -> PodUsage {
        PodUsage {
            uid: name.into(),
            name: name.into(),
            priority,
            memory,
            disk: memory,
            containers: vec![ContainerUsage {
                name: "app".into(),
                memory,
                memory_request: request,
                disk: memory,
                disk_request: request,
            }],
            ..Default::default()
        }
    }

    fn names(pods: &[PodUsage]) -> Vec<&str> {
        pods.iter().map(|p| p.name.as_str()).collect()
    }

    #[test]
    fn memory_ranks_pods_over_their_request_then_priority_then_usage_beyond_request() {
        let mut pods = vec![
            pod("within-request", -10, 500 * MI, 600 * MI),
            pod("small-over", 0, 50 * MI, 0),
            pod("big-over", 0, 300 * MI, 0),
            pod("important-over", 100, 900 * MI, 0),
            pod("big-but-requested", 0, 400 * MI, 350 * MI),
        ];
        rank(Resource::Memory, &mut pods);
        assert_eq!(
            names(&pods),
            [
                "big-over",
                "small-over",
                "big-but-requested",
                "important-over",
                "within-request"
            ]
        );
    }

    #[test]
    fn disk_ranks_the_same_way_on_ephemeral_storage() {
        let mut pods = vec![pod("quiet", 0, MI, 0), pod("writer", 0, 40 * MI, 0)];
        rank(Resource::EphemeralStorage, &mut pods);
        assert_eq!(names(&pods), ["writer", "quiet"]);
    }

    #[test]
    fn pids_rank_by_priority_then_processes() {
        let mut a = pod("a", 0, 0, 0);
        a.processes = 10;
        let mut b = pod("b", 0, 0, 0);
        b.processes = 100;
        let mut c = pod("c", -1, 0, 0);
        c.processes = 1;
        let mut pods = vec![a, b, c];
        rank(Resource::Pids, &mut pods);
        assert_eq!(names(&pods), ["c", "b", "a"]);
    }

    #[test]
    fn the_message_is_the_kubelets() {
        let p = pod("p", 0, 200 * MI, 0);
        assert_eq!(
            eviction_message(Resource::Memory, 100 * MI, 90 * MI, &p),
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 90Mi. \
             Container app was using 200Mi, request is 0, has larger consumption of memory. "
        );
        let p = pod("p", 0, 5 * MI, 64 * MI);
        assert_eq!(
            eviction_message(Resource::EphemeralStorage, 6_710_886, 1_000_000, &p),
            "The node was low on resource: ephemeral-storage. Threshold quantity: 6710886, \
             available: 1000000. "
        );
        assert_eq!(
            eviction_message(Resource::Inodes, 5000, 120, &pod("p", 0, MI, 0)),
            "The node was low on resource: inodes. Threshold quantity: 5k, available: 120. "
        );
    }

    #[test]
    fn quantities_print_canonically() {
        assert_eq!(format_quantity(0, true), "0");
        assert_eq!(format_quantity(1024, true), "1Ki");
        assert_eq!(format_quantity(3 << 30, true), "3Gi");
        assert_eq!(format_quantity(1025, true), "1025");
        assert_eq!(format_quantity(2_000_000, false), "2M");
    }
}

/// The one pod to evict this round (at most one per interval, as the kubelet): the
/// first of the ranking that is not critical; also the critical pods passed over.
pub fn pick_victim(
    resource: Resource,
    mut pods: Vec<PodUsage>,
) -> (Option<PodUsage>, Vec<PodUsage>) {
    rank(resource, &mut pods);
    let mut passed_over = Vec::new();
    for p in pods {
        if p.critical {
            passed_over.push(p);
        } else {
            return (Some(p), passed_over);
        }
    }
    (None, passed_over)
}

#[cfg(test)]
mod pick_tests {
    use super::*;

    fn pod(name: &str, disk: i64, critical: bool) -> PodUsage {
        PodUsage {
            name: name.into(),
            disk,
            critical,
            ..Default::default()
        }
    }

    #[test]
    fn one_pod_is_picked_and_critical_pods_are_passed_over() {
        let pods = vec![
            pod("quiet", 1, false),
            pod("guarded", 300, true),
            pod("hog", 200, false),
        ];
        let (victim, passed) = pick_victim(Resource::EphemeralStorage, pods);
        assert_eq!(victim.map(|p| p.name), Some("hog".to_string()));
        let passed: Vec<_> = passed.into_iter().map(|p| p.name).collect();
        assert_eq!(passed, ["guarded"]);
        let (victim, _) = pick_victim(Resource::Memory, vec![pod("only", 5, true)]);
        assert_eq!(victim, None);
    }
}
