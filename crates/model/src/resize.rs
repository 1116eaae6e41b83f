//! In-place pod resize (`InPlacePodVerticalScaling`): what a running pod's changed
//! container resources mean for the node, as values. Whether the resize is possible,
//! which containers restart for it (`resizePolicy: RestartContainer`), and the order of
//! the cgroup writes: for each resource (memory, then CPU) a growing pod cgroup first,
//! then the containers whose limit shrinks, then those whose limit grows, and a
//! shrinking pod cgroup last, so that no child is ever above its parent.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::{Deserialize, Serialize};

use super::qos::{ContainerResources, QosClass};
use super::resources::{ContainerLimits, PodCgroupConfig, container_limits, pod_cgroup_config};

/// The pod condition shown while a resize waits (reason `Infeasible` or `Deferred`).
pub const PENDING: &str = "PodResizePending";
/// The pod condition shown while a resize is being applied (or failed to be).
pub const IN_PROGRESS: &str = "PodResizeInProgress";

/// A container's resources as allocated to it (its spec's requests and limits, as
/// quantity strings): what the node has accepted and what its cgroups are given.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, String>,
}

impl Allocation {
    /// The container's spec resources.
    pub fn of(c: &Container) -> Self {
        let map = |m: Option<&BTreeMap<String, Quantity>>| {
            m.into_iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.0.clone()))
                .collect()
        };
        let r = c.resources.as_ref();
        Self {
            requests: map(r.and_then(|r| r.requests.as_ref())),
            limits: map(r.and_then(|r| r.limits.as_ref())),
        }
    }

    /// As the API's type, for `containerStatuses[].resources`.
    pub fn requirements(&self) -> ResourceRequirements {
        ResourceRequirements {
            requests: quantities(&self.requests),
            limits: quantities(&self.limits),
            ..Default::default()
        }
    }

    /// `containerStatuses[].allocatedResources`: the allocated requests.
    pub fn allocated_requests(&self) -> Option<BTreeMap<String, Quantity>> {
        quantities(&self.requests)
    }

    /// The numbers the cgroups are made from.
    pub fn resources(&self) -> ContainerResources {
        let container = Container {
            resources: Some(self.requirements()),
            ..Default::default()
        };
        crate::qos::container_resources(&container)
    }
}

fn quantities(m: &BTreeMap<String, String>) -> Option<BTreeMap<String, Quantity>> {
    (!m.is_empty()).then(|| {
        m.iter()
            .map(|(k, v)| (k.clone(), Quantity(v.clone())))
            .collect()
    })
}

/// A container's resources as the node holds them: allocated (accepted; a restart
/// starts with them) and applied (what its cgroups have now). They differ while a
/// resize is in progress or failed to be applied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerAllocation {
    pub allocated: Allocation,
    pub applied: Allocation,
    /// Its `resizePolicy` restarts it for the resize: the core stops its running
    /// instance and starts it again (with `allocated`), as for a changed image.
    pub restart_pending: bool,
}

impl ContainerAllocation {
    /// Allocated and applied as the container's spec says (a container started with it).
    pub fn started_as(allocation: Allocation) -> Self {
        Self {
            applied: allocation.clone(),
            allocated: allocation,
            restart_pending: false,
        }
    }
}

/// The resize condition a pod shows: `PodResizePending` (reason `Infeasible` or
/// `Deferred`) or `PodResizeInProgress` (reason `Error` when applying failed), with the
/// pod's generation the resize is of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResizeCondition {
    pub type_: &'static str,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub observed_generation: Option<i64>,
}

impl ResizeCondition {
    pub fn infeasible(message: String, generation: Option<i64>) -> Self {
        Self {
            type_: PENDING,
            reason: Some("Infeasible".to_string()),
            message: Some(message),
            observed_generation: generation,
        }
    }

    /// It fits the node, not beside the pods there now (retried as they leave).
    pub fn deferred(message: String, generation: Option<i64>) -> Self {
        Self {
            type_: PENDING,
            reason: Some("Deferred".to_string()),
            message: Some(message),
            observed_generation: generation,
        }
    }

    pub fn in_progress(error: Option<String>, generation: Option<i64>) -> Self {
        Self {
            type_: IN_PROGRESS,
            reason: error.is_some().then(|| "Error".to_string()),
            message: error,
            observed_generation: generation,
        }
    }
}

/// What a container's `resizePolicy` says for each resource: whether a change of it
/// restarts the container (`RestartContainer`) instead of being applied in place.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RestartOn {
    pub cpu: bool,
    pub memory: bool,
}

impl RestartOn {
    pub fn of(c: &Container) -> Self {
        let restarts = |name: &str| {
            c.resize_policy
                .iter()
                .flatten()
                .any(|p| p.resource_name == name && p.restart_policy == "RestartContainer")
        };
        Self {
            cpu: restarts("cpu"),
            memory: restarts("memory"),
        }
    }
}

/// One container's wanted resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    pub name: String,
    pub allocation: Allocation,
    pub restart_on: RestartOn,
}

pub use podhost_model_core::resize::ResizeStep;

/// What to do about a pod whose containers' wanted resources are `wanted`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResizeDecision {
    /// Nothing changed.
    Unchanged,
    /// It cannot be done on this node (the `PodResizePending` condition's message).
    Infeasible(String),
    /// Allocate `wanted`, write `steps` in order, then restart `restart`.
    Apply {
        steps: Vec<ResizeStep>,
        restart: Vec<String>,
    },
}

/// The node's room for pods: its allocatable CPU (millicores) and memory (bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeRoom {
    pub cpu_milli: i64,
    pub memory: i64,
}

/// Decides a resize of a pod of class `qos` from its `allocated` resources (by
/// container, init containers first, in spec order) to `wanted` (the same containers).
/// `room`, when known, is what the node can give this pod at most. Only CPU and memory
/// are resized; the API server refuses a resize that adds or removes a container or
/// changes the pod's QoS class.
pub fn decide_resize(
    qos: QosClass,
    allocated: &[(String, Allocation)],
    wanted: &[Wanted],
    room: Option<NodeRoom>,
) -> ResizeDecision {
    let current = |name: &str| {
        allocated
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, a)| a.clone())
    };
    let changed: Vec<&Wanted> = wanted
        .iter()
        .filter(|w| current(&w.name).is_some_and(|a| a != w.allocation))
        .collect();
    if changed.is_empty() {
        return ResizeDecision::Unchanged;
    }
    if let Some(room) = room
        && let Some(message) = over_capacity(wanted, room)
    {
        return ResizeDecision::Infeasible(message);
    }
    let before: Vec<ContainerResources> = allocated.iter().map(|(_, a)| a.resources()).collect();
    let after: Vec<ContainerResources> = wanted.iter().map(|w| w.allocation.resources()).collect();
    let (pod_before, pod_after) = (
        pod_cgroup_config(qos, &before),
        pod_cgroup_config(qos, &after),
    );
    let mut restart = Vec::new();
    let mut memory = Vec::new();
    let mut cpu = Vec::new();
    for w in changed {
        let old = current(&w.name).unwrap_or_default().resources();
        let new = w.allocation.resources();
        let (old_limits, new_limits) = (container_limits(&old), container_limits(&new));
        let memory_changed = old_limits.memory_max != new_limits.memory_max;
        let cpu_changed = old_limits.cpu_shares != new_limits.cpu_shares
            || old_limits.cpu_max != new_limits.cpu_max;
        if (memory_changed && w.restart_on.memory) || (cpu_changed && w.restart_on.cpu) {
            restart.push(w.name.clone());
            continue;
        }
        if memory_changed {
            memory.push((w.name.clone(), old_limits, new_limits));
        }
        if cpu_changed {
            cpu.push((w.name.clone(), old_limits, new_limits));
        }
    }
    let mut steps = Vec::new();
    memory_steps(&pod_before, &pod_after, &memory, &mut steps);
    let requests_milli = after.iter().filter_map(|r| r.cpu_request_milli).sum();
    cpu_steps(requests_milli, &pod_before, &pod_after, &cpu, &mut steps);
    ResizeDecision::Apply { steps, restart }
}

type ContainerChange = (String, ContainerLimits, ContainerLimits);

/// A limit grows when it goes up or away (`None` is unlimited).
fn grows(old: Option<i64>, new: Option<i64>) -> bool {
    match (old, new) {
        (_, None) => old.is_some(),
        (None, Some(_)) => false,
        (Some(o), Some(n)) => n > o,
    }
}

fn memory_steps(
    before: &PodCgroupConfig,
    after: &PodCgroupConfig,
    changes: &[ContainerChange],
    steps: &mut Vec<ResizeStep>,
) {
    let pod_changed = before.memory_max != after.memory_max;
    let pod_grows = grows(before.memory_max, after.memory_max);
    if pod_changed && pod_grows {
        steps.push(ResizeStep::PodMemory(after.memory_max));
    }
    let step = |(name, _, new): &ContainerChange| ResizeStep::ContainerMemory {
        name: name.clone(),
        limit: new.memory_max,
    };
    let shrinking = |(_, old, new): &&ContainerChange| !grows(old.memory_max, new.memory_max);
    steps.extend(changes.iter().filter(shrinking).map(step));
    steps.extend(changes.iter().filter(|c| !shrinking(c)).map(step));
    if pod_changed && !pod_grows {
        steps.push(ResizeStep::PodMemory(after.memory_max));
    }
}

fn cpu_steps(
    requests_milli: i64,
    before: &PodCgroupConfig,
    after: &PodCgroupConfig,
    changes: &[ContainerChange],
    steps: &mut Vec<ResizeStep>,
) {
    let pod_changed = before.cpu_weight != after.cpu_weight || before.cpu_max != after.cpu_max;
    let quota = |c: Option<(i64, u64)>| c.map(|(q, _)| q);
    let pod_grows = grows(quota(before.cpu_max), quota(after.cpu_max))
        || (before.cpu_max == after.cpu_max && after.cpu_weight > before.cpu_weight);
    let pod_step = ResizeStep::PodCpu {
        weight: after.cpu_weight,
        cpu_max: after.cpu_max,
        requests_milli,
    };
    if pod_changed && pod_grows {
        steps.push(pod_step.clone());
    }
    let step = |(name, _, new): &ContainerChange| ResizeStep::ContainerCpu {
        name: name.clone(),
        shares: new.cpu_shares,
        cpu_max: new.cpu_max,
    };
    let shrinking =
        |(_, old, new): &&ContainerChange| !grows(quota(old.cpu_max), quota(new.cpu_max));
    steps.extend(changes.iter().filter(shrinking).map(step));
    steps.extend(changes.iter().filter(|c| !shrinking(c)).map(step));
    if pod_changed && !pod_grows {
        steps.push(pod_step);
    }
}

/// The kubelet's `Node didn't have enough capacity` when the pod's requests exceed what
/// the node can give it.
fn over_capacity(wanted: &[Wanted], room: NodeRoom) -> Option<String> {
    let resources: Vec<ContainerResources> =
        wanted.iter().map(|w| w.allocation.resources()).collect();
    let cpu: i64 = resources.iter().filter_map(|r| r.cpu_request_milli).sum();
    let memory: i64 = resources.iter().filter_map(|r| r.memory_request).sum();
    if cpu > room.cpu_milli {
        return Some(format!(
            "Node didn't have enough capacity: cpu, requested: {cpu}, capacity: {}",
            room.cpu_milli
        ));
    }
    if memory > room.memory {
        return Some(format!(
            "Node didn't have enough capacity: memory, requested: {memory}, capacity: {}",
            room.memory
        ));
    }
    None
}

#[cfg(test)]
mod tests;
