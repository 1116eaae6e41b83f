//! What this host's cgroups let podhost enforce, and what it cannot: said at start (a
//! node event), on each affected pod (a Warning event) and by `podhost validate`, so no
//! limit is claimed that the host does not apply.

/// How much of a pod's resources podhost enforces on this host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostEnforcement {
    /// Pure cgroup v2: container, pod and QoS-class cgroups, all limits.
    Full,
    /// cgroup v1 or hybrid: each container's memory, CPU and pids limits are enforced
    /// through the v1 hierarchies (as runc does); [`V1_NOT_ENFORCED`] is not.
    V1ContainerLimits,
    /// No limits at all (required controllers missing or not delegated).
    Unenforced,
}

/// Warning event reason on a pod whose settings a cgroup v1 host cannot fully apply.
pub const V1_POD_EVENT_REASON: &str = "CgroupV1NotEnforced";
/// Node event reason at start on a cgroup v1 / hybrid host (limits enforced, some
/// features not).
pub const V1_NODE_EVENT_REASON: &str = "CgroupV1LimitsOnly";
/// Node event reason at start when no limit is enforced.
pub const UNENFORCED_NODE_EVENT_REASON: &str = "CgroupLimitsNotEnforced";

/// What a cgroup v1 host does not give, as told to the user (node event, daemon log).
pub const V1_NOT_ENFORCED: &[&str] = &[
    "pod-level cgroups and the QoS-class hierarchy (kubepods/burstable, besteffort): a \
     pod's total limits and the classes' CPU weights are not set, only each container's",
    "memory.oom.group: an OOM kill takes the one process the kernel picks, not the whole \
     container",
    "memory.high / MemoryQoS (no v1 equivalent)",
    "PSI (pressure stall information) of pods and containers",
];

/// The `podhost validate` reason of `requests.cpu` on a cgroup v1 host.
pub const V1_CPU_REQUEST_REASON: &str = "not enforced on this host (cgroup v1): each container \
     gets its cpu.shares, but the pod's and the QoS classes' CPU weights (the QoS \
     hierarchy) are not set";
/// The `podhost validate` reason of resource fields where nothing is enforced.
pub const UNENFORCED_REASON: &str = "not enforced on this host: podhost cannot use its cgroup \
     controllers here (see the daemon's CgroupLimitsNotEnforced node event for why)";

/// What the Warning event of a pod on a cgroup v1 host lists: the [`V1_NOT_ENFORCED`]
/// items that matter to a pod with these traits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PodTraits {
    /// Some container has a memory limit (OOM kills concern it).
    pub memory_limited: bool,
    /// The pod runs more than one container (pod totals would differ from each one's).
    pub several_containers: bool,
    /// A pod-wide pids limit is set (`--pod-pids-limit`): applied per container.
    pub pod_pids_limit: bool,
    /// The memory+swap limit cannot be set (no `memory.memsw.*`: swap accounting off).
    pub no_swap_accounting: bool,
    /// Some container requests or limits CPU (QoS-class weights concern it).
    pub cpu_set: bool,
}

/// The message of the pod's [`V1_POD_EVENT_REASON`] event, `None` when nothing it asks
/// for is missing.
pub fn v1_pod_warning(t: PodTraits) -> Option<String> {
    let mut missing: Vec<&str> = Vec::new();
    if t.cpu_set || t.several_containers {
        missing.push(
            "pod-level and QoS-class cgroups (each container's own limits are enforced, the \
             pod's total and the QoS classes' CPU weights are not)",
        );
    }
    if t.pod_pids_limit && t.several_containers {
        missing.push("the pod pids limit applies to each container, not to the pod's total");
    }
    if t.memory_limited {
        missing.push("memory.oom.group (an OOM kill takes one process, not the whole container)");
    }
    if t.memory_limited && t.no_swap_accounting {
        missing.push(
            "the swap limit (no memory.memsw: swap accounting is off, so a container may swap \
             past its memory limit)",
        );
    }
    (!missing.is_empty()).then(|| {
        format!(
            "cgroup v1 host: not enforced for this pod: {}",
            missing.join("; ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_asking_for_nothing_v1_lacks_gets_no_warning() {
        assert_eq!(v1_pod_warning(PodTraits::default()), None);
    }

    #[test]
    fn a_memory_limited_pod_is_told_about_oom_group_and_missing_swap_accounting() {
        let msg = v1_pod_warning(PodTraits {
            memory_limited: true,
            no_swap_accounting: true,
            ..PodTraits::default()
        })
        .unwrap();
        assert!(msg.contains("memory.oom.group"), "{msg}");
        assert!(msg.contains("memsw"), "{msg}");
        assert!(!msg.contains("QoS"), "{msg}");
    }

    #[test]
    fn cpu_settings_name_the_qos_hierarchy() {
        let msg = v1_pod_warning(PodTraits {
            cpu_set: true,
            ..PodTraits::default()
        })
        .unwrap();
        assert!(msg.contains("QoS-class"), "{msg}");
    }
}
