//! Writing an in-place resize to the live cgroups, one step of
//! `podhost_model::resize::decide_resize`'s plan at a time: the container's cgroup (v2,
//! or the v1 memory and cpu hierarchies libcontainer made) and, in full v2 mode, the pod
//! cgroup and the Burstable QoS weight. A memory limit below the cgroup's current usage
//! is refused before anything is written.

use std::path::Path;

use super::super::RuntimeError;
use super::super::cgroup_v2::{CgroupV2, MOUNT};
use super::{Enforcement, NodeCgroups};
use podhost_model_core::cgroup_math::shares_to_weight;
use podhost_model_core::qos::QosClass;
use podhost_model_core::resize::ResizeStep;

impl NodeCgroups {
    /// Whether a resize reaches the container cgroups on this host (v2, or v1 limits).
    pub fn can_resize(&self) -> bool {
        self.enforces_container_limits()
    }

    /// Writes one step of a resize of pod `uid`. On a host that enforces nothing this
    /// writes nothing (the caller says so with an event); in v1 mode pod-level steps
    /// write nothing (v1 pod cgroups get no values, see the module's notes).
    pub fn apply_resize_step(
        &self,
        qos: QosClass,
        uid: &str,
        step: &ResizeStep,
    ) -> Result<(), RuntimeError> {
        match (&self.enforcement, step) {
            (Enforcement::Unenforced(_), _) => Ok(()),
            (Enforcement::Full, ResizeStep::PodMemory(limit)) => {
                self.set_v2_memory(&self.pod_path(qos, uid), "pod", *limit)
            }
            (
                Enforcement::Full,
                ResizeStep::PodCpu {
                    weight,
                    cpu_max,
                    requests_milli,
                },
            ) => {
                let rel = self.pod_path(qos, uid);
                self.v2.write(&rel, "cpu.weight", &weight.to_string())?;
                self.v2.write(&rel, "cpu.max", &v2_cpu_max(*cpu_max))?;
                if qos == QosClass::Burstable {
                    self.set_burstable(uid, Some(*requests_milli));
                }
                Ok(())
            }
            (Enforcement::Full, ResizeStep::ContainerMemory { name, limit }) => {
                self.set_v2_memory(&self.container_path(qos, uid, name), "container", *limit)
            }
            (
                Enforcement::Full,
                ResizeStep::ContainerCpu {
                    name,
                    shares,
                    cpu_max,
                },
            ) => {
                let rel = self.container_path(qos, uid, name);
                self.v2
                    .write(&rel, "cpu.weight", &shares_to_weight(*shares).to_string())?;
                self.v2.write(&rel, "cpu.max", &v2_cpu_max(*cpu_max))
            }
            (Enforcement::V1ContainerLimits { .. }, ResizeStep::PodMemory(_))
            | (Enforcement::V1ContainerLimits { .. }, ResizeStep::PodCpu { .. }) => Ok(()),
            (
                Enforcement::V1ContainerLimits { swap_accounting },
                ResizeStep::ContainerMemory { name, limit },
            ) => {
                let rel = self.container_path(qos, uid, name);
                let memory = self.v1("memory");
                self.refuse_below_usage(
                    &memory,
                    &rel,
                    "memory.usage_in_bytes",
                    "container",
                    *limit,
                )?;
                let value = limit.map_or_else(|| "-1".to_string(), |l| l.to_string());
                if !swap_accounting {
                    return memory.write(&rel, "memory.limit_in_bytes", &value);
                }
                // memory+swap is never below memory: raise it first when growing, lower it
                // last when shrinking.
                let current = memory
                    .read(&rel, "memory.limit_in_bytes")
                    .and_then(|v| v.trim().parse::<i64>().ok());
                let growing = match (current, limit) {
                    (_, None) => true,
                    (Some(c), Some(l)) => *l > c,
                    (None, Some(_)) => false,
                };
                let files = if growing {
                    ["memory.memsw.limit_in_bytes", "memory.limit_in_bytes"]
                } else {
                    ["memory.limit_in_bytes", "memory.memsw.limit_in_bytes"]
                };
                for file in files {
                    memory.write(&rel, file, &value)?;
                }
                Ok(())
            }
            (
                Enforcement::V1ContainerLimits { .. },
                ResizeStep::ContainerCpu {
                    name,
                    shares,
                    cpu_max,
                },
            ) => {
                let rel = self.container_path(qos, uid, name);
                let cpu = self.v1("cpu");
                cpu.write(&rel, "cpu.shares", &shares.to_string())?;
                match cpu_max {
                    Some((quota, period)) => {
                        cpu.write(&rel, "cpu.cfs_period_us", &period.to_string())?;
                        cpu.write(&rel, "cpu.cfs_quota_us", &quota.to_string())
                    }
                    None => cpu.write(&rel, "cpu.cfs_quota_us", "-1"),
                }
            }
        }
    }

    /// The v1 hierarchy of `controller`, addressed as the cgroups of the v2 tree are.
    fn v1(&self, controller: &str) -> CgroupV2 {
        CgroupV2::with_kernel(Path::new(MOUNT).join(controller), self.v2.kernel().clone())
    }

    /// A v2 cgroup's new memory limit (`what`: "pod" or "container"), refused below
    /// what it uses now.
    fn set_v2_memory(
        &self,
        rel: &str,
        what: &'static str,
        limit: Option<i64>,
    ) -> Result<(), RuntimeError> {
        self.refuse_below_usage(&self.v2, rel, "memory.current", what, limit)?;
        self.v2.write(rel, "memory.max", &v2_limit(limit))
    }

    /// A new memory limit below the cgroup's usage is refused (the kernel would reclaim
    /// or OOM-kill the workload to meet it).
    fn refuse_below_usage(
        &self,
        hierarchy: &CgroupV2,
        rel: &str,
        usage_file: &str,
        what: &'static str,
        limit: Option<i64>,
    ) -> Result<(), RuntimeError> {
        let Some(limit) = limit else {
            return Ok(());
        };
        let usage = hierarchy
            .read(rel, usage_file)
            .and_then(|v| v.trim().parse::<u64>().ok());
        match usage {
            Some(usage) if usage > u64::try_from(limit).unwrap_or(0) => {
                Err(RuntimeError::MemoryBelowUsage { what, limit, usage })
            }
            _ => Ok(()),
        }
    }
}

fn v2_limit(limit: Option<i64>) -> String {
    limit.map_or_else(|| "max".to_string(), |l| l.to_string())
}

fn v2_cpu_max(cpu_max: Option<(i64, u64)>) -> String {
    match cpu_max {
        Some((quota, period)) => format!("{quota} {period}"),
        None => format!("max {}", podhost_model_core::cgroup_math::CPU_PERIOD_US),
    }
}

#[cfg(test)]
mod tests;
