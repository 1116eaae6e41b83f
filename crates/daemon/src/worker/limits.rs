//! A container's kernel-facing settings from the pod: cgroup resources, rlimits and
//! oom_score_adj, with the host's limits applied (clamped, never silently).

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Container;
use oci_spec::runtime::{
    LinuxCpuBuilder, LinuxMemoryBuilder, LinuxPidsBuilder, LinuxResources, LinuxResourcesBuilder,
    PosixRlimitType,
};

use super::context::{Ctx, PodInfo};
use super::error::LimitsError;
use podhost_model::cgroup_enforcement::{PodTraits, v1_pod_warning};
use podhost_model::qos::{ContainerResources, container_oom_score_adj, is_node_critical};
use podhost_model::resources::container_limits;
use podhost_model::rlimits::{RLIMITS_ANNOTATION_PREFIX, Rlimit, parse_rlimits};
use podhost_runtime::rlimit_host::hard_limit;

/// Pod annotation that turns memory.oom.group off (the kubelet's singleProcessOOMKill).
pub const SINGLE_PROCESS_OOM_KILL_ANNOTATION: &str = "podhost.io/single-process-oom-kill";

/// What the container gets, plus warnings to report as events.
#[derive(Debug, Default)]
pub struct KernelSettings {
    pub resources: Option<LinuxResources>,
    pub rlimits: Vec<(PosixRlimitType, u64, u64)>,
    pub oom_score_adj: i32,
    pub warnings: Vec<String>,
    /// On a cgroup v1 host: what the pod asks for that the host cannot apply (the
    /// pod's `CgroupV1NotEnforced` Warning event).
    pub v1_not_enforced: Option<String>,
}

fn rlimit_type(name: &str) -> Option<PosixRlimitType> {
    serde_json::from_value(serde_json::Value::String(format!(
        "RLIMIT_{}",
        name.to_ascii_uppercase()
    )))
    .ok()
}

/// Builds the settings; an unusable rlimits annotation is an error naming it.
pub fn kernel_settings(
    ctx: &Ctx,
    pod: &PodInfo,
    c: &Container,
) -> Result<KernelSettings, LimitsError> {
    let mut out = KernelSettings::default();
    let res = podhost_model::qos::container_resources(c);
    out.oom_score_adj = container_oom_score_adj(
        pod.qos,
        is_node_critical(&pod.pod),
        res.memory_request,
        ctx.memory_capacity,
    );
    if ctx.cgroups.enforces_container_limits() {
        out.resources = Some(resources(ctx, pod, &res)?);
    }
    if ctx.cgroups.is_v1() {
        out.v1_not_enforced = v1_pod_warning(pod_traits(ctx, pod));
    }
    // The daemon's defaults (already clamped, warned once), then the annotation's values.
    let mut wanted: Vec<Rlimit> = ctx.default_rlimits.clone();
    let key = format!("{RLIMITS_ANNOTATION_PREFIX}{}", c.name);
    if let Some(text) = pod
        .pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(&key))
    {
        let parsed = parse_rlimits(text).map_err(|e| LimitsError::RlimitAnnotation {
            key: key.clone(),
            message: e.to_string(),
        })?;
        for r in parsed {
            wanted.retain(|w| w.resource != r.resource);
            wanted.push(r);
        }
    }
    let defaults = ctx.default_rlimits.clone();
    for r in wanted {
        let (mut soft, mut hard) = (r.soft, r.hard);
        if !ctx.can_raise_limits
            && !defaults.contains(&r)
            && let Some(host) = hard_limit(&r.resource).filter(|h| hard > *h)
        {
            out.warnings.push(format!(
                    "rlimit {} {}:{} clamped to the host's hard limit {host} (podhost lacks CAP_SYS_RESOURCE)",
                    r.resource,
                    show(soft),
                    show(hard)
                ));
            hard = host;
            soft = soft.min(host);
        }
        let typ = rlimit_type(&r.resource).ok_or_else(|| LimitsError::UnknownRlimit {
            name: r.resource.clone(),
        })?;
        out.rlimits.push((typ, soft, hard));
    }
    Ok(out)
}

fn show(v: u64) -> String {
    if v == u64::MAX {
        "unlimited".into()
    } else {
        v.to_string()
    }
}

/// What of the pod matters to the list of what a cgroup v1 host does not enforce.
fn pod_traits(ctx: &Ctx, pod: &PodInfo) -> PodTraits {
    let spec = pod.pod.spec.as_ref();
    let containers: Vec<ContainerResources> = spec
        .into_iter()
        .flat_map(|s| s.init_containers.iter().flatten().chain(&s.containers))
        .map(podhost_model::qos::container_resources)
        .collect();
    PodTraits {
        memory_limited: containers.iter().any(|r| r.memory_limit.unwrap_or(0) > 0),
        several_containers: containers.len() > 1,
        pod_pids_limit: ctx.cgroups.pod_pids_limit.is_some_and(|p| p > 0),
        no_swap_accounting: !ctx.cgroups.v1_swap_accounting(),
        cpu_set: containers
            .iter()
            .any(|r| r.cpu_request_milli.is_some() || r.cpu_limit_milli.is_some()),
    }
}

fn resources(
    ctx: &Ctx,
    pod: &PodInfo,
    res: &ContainerResources,
) -> Result<LinuxResources, oci_spec::OciSpecError> {
    let limits = container_limits(res);
    let mut cpu = LinuxCpuBuilder::default().shares(limits.cpu_shares);
    if let Some((quota, period)) = limits.cpu_max {
        cpu = cpu.quota(quota).period(period);
    }
    let mut memory = LinuxMemoryBuilder::default();
    if let Some(m) = limits.memory_max {
        memory = memory.limit(m);
        // cgroup v1: memory+swap = the limit, as the kubelet asks runc for, so that the
        // container is OOM-killed at its limit instead of swapping (only where swap is
        // accounted: the file is missing otherwise and libcontainer would fail).
        if ctx.cgroups.is_v1() && ctx.cgroups.v1_swap_accounting() {
            memory = memory.swap(m);
        }
    }
    let mut b = LinuxResourcesBuilder::default()
        .cpu(cpu.build()?)
        .memory(memory.build()?);
    // cgroup v2 only (libcontainer's v1 manager has no unified files).
    if !ctx.cgroups.is_v1() {
        b = b.unified(unified_values(pod));
    }
    if let Some(p) = ctx.cgroups.pod_pids_limit.filter(|p| *p > 0) {
        b = b.pids(LinuxPidsBuilder::default().limit(p).build()?);
    }
    b.build()
}

/// The cgroup v2 files libcontainer writes as given: memory.oom.group (the whole
/// container killed on OOM, unless the pod asks otherwise) and memory.swap.max.
fn unified_values(pod: &PodInfo) -> HashMap<String, String> {
    let mut unified = HashMap::new();
    let single = pod
        .pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SINGLE_PROCESS_OOM_KILL_ANNOTATION))
        .is_some_and(|v| v == "true");
    unified.insert(
        "memory.oom.group".to_string(),
        if single { "0" } else { "1" }.to_string(),
    );
    // libcontainer 0.7 never writes memory.swap.max=0: without it a container swaps
    // instead of being OOM-killed at its limit.
    unified.insert("memory.swap.max".to_string(), "0".to_string());
    unified
}
