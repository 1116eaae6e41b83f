//! What podhost writes to the pod and container cgroups (kubelet-semantics §8), as values.

use super::cgroup_math::{
    CPU_PERIOD_US, milli_cpu_to_quota, milli_cpu_to_shares, shares_to_weight,
};
use super::qos::{ContainerResources, QosClass};

/// The container's limits in OCI terms (libcontainer converts shares to cpu.weight).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContainerLimits {
    pub cpu_shares: u64,
    /// `(quota µs, period µs)`, `None` = no CPU limit.
    pub cpu_max: Option<(i64, u64)>,
    pub memory_max: Option<i64>,
}

/// `calculateLinuxResources`: shares from the request (limit when no request), quota from
/// the limit, memory limit.
pub fn container_limits(r: &ContainerResources) -> ContainerLimits {
    let shares_from = r.cpu_request_milli.or(r.cpu_limit_milli).unwrap_or(0);
    ContainerLimits {
        cpu_shares: milli_cpu_to_shares(shares_from),
        cpu_max: r
            .cpu_limit_milli
            .and_then(milli_cpu_to_quota)
            .map(|q| (q, CPU_PERIOD_US)),
        memory_max: r.memory_limit.filter(|m| *m > 0),
    }
}

/// The pod cgroup's values (`ResourceConfigForPod`), in cgroup v2 terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodCgroupConfig {
    pub cpu_weight: u64,
    pub cpu_max: Option<(i64, u64)>,
    pub memory_max: Option<i64>,
}

/// Guaranteed: weight, quota and memory from the sums; Burstable: weight, and quota or
/// memory only when every container has that limit; BestEffort: the minimum weight.
pub fn pod_cgroup_config(qos: QosClass, containers: &[ContainerResources]) -> PodCgroupConfig {
    if qos == QosClass::BestEffort {
        return PodCgroupConfig {
            cpu_weight: shares_to_weight(milli_cpu_to_shares(0)),
            cpu_max: None,
            memory_max: None,
        };
    }
    let cpu_requests: i64 = containers
        .iter()
        .map(|c| c.cpu_request_milli.or(c.cpu_limit_milli).unwrap_or(0))
        .sum();
    let all_cpu_limited = containers
        .iter()
        .all(|c| c.cpu_limit_milli.unwrap_or(0) > 0);
    let all_memory_limited = containers.iter().all(|c| c.memory_limit.unwrap_or(0) > 0);
    let cpu_limits: i64 = containers
        .iter()
        .map(|c| c.cpu_limit_milli.unwrap_or(0))
        .sum();
    let memory_limits: i64 = containers.iter().map(|c| c.memory_limit.unwrap_or(0)).sum();
    PodCgroupConfig {
        cpu_weight: shares_to_weight(milli_cpu_to_shares(cpu_requests)),
        cpu_max: all_cpu_limited
            .then(|| milli_cpu_to_quota(cpu_limits))
            .flatten()
            .map(|q| (q, CPU_PERIOD_US)),
        memory_max: all_memory_limited.then_some(memory_limits),
    }
}

/// The Burstable QoS cgroup's weight from the sum of its pods' CPU requests; BestEffort's
/// is always the minimum.
pub fn burstable_qos_weight(total_cpu_request_milli: i64) -> u64 {
    shares_to_weight(milli_cpu_to_shares(total_cpu_request_milli))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(cr: Option<i64>, cl: Option<i64>, ml: Option<i64>) -> ContainerResources {
        ContainerResources {
            cpu_request_milli: cr,
            cpu_limit_milli: cl,
            memory_request: ml,
            memory_limit: ml,
        }
    }

    #[test]
    fn container() {
        let l = container_limits(&res(Some(250), Some(500), Some(32 << 20)));
        assert_eq!(l.cpu_shares, 256);
        assert_eq!(l.cpu_max, Some((50_000, 100_000)));
        assert_eq!(l.memory_max, Some(32 << 20));
        let none = container_limits(&res(None, None, None));
        assert_eq!(
            none,
            ContainerLimits {
                cpu_shares: 2,
                cpu_max: None,
                memory_max: None
            }
        );
    }

    #[test]
    fn pod_levels() {
        let g = [
            res(Some(500), Some(500), Some(64)),
            res(Some(500), Some(500), Some(36)),
        ];
        let c = pod_cgroup_config(QosClass::Guaranteed, &g);
        assert_eq!(c.cpu_weight, 100);
        assert_eq!(c.cpu_max, Some((100_000, 100_000)));
        assert_eq!(c.memory_max, Some(100));
        let b = [
            res(Some(500), Some(1000), Some(64)),
            res(Some(100), None, None),
        ];
        let c = pod_cgroup_config(QosClass::Burstable, &b);
        assert_eq!(c.cpu_max, None, "not every container has a CPU limit");
        assert_eq!(c.memory_max, None, "not every container has a memory limit");
        assert_eq!(c.cpu_weight, shares_to_weight(milli_cpu_to_shares(600)));
        let be = pod_cgroup_config(QosClass::BestEffort, &[res(None, None, None)]);
        assert_eq!(
            be,
            PodCgroupConfig {
                cpu_weight: 1,
                cpu_max: None,
                memory_max: None
            }
        );
    }
}
