//! The pod-sync core's view of a pod's spec.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, LifecycleHandler, Probe};

use super::context::PodInfo;
use podhost_model::backoff::BackoffPolicy;
use podhost_model::convert::non_negative_u64;
use podhost_model::podsync::{ContainerFacts, ContainerKind, Hook, PodFacts, ProbeFacts};
use podhost_model::resize::{Allocation, ContainerAllocation};

/// The facts the core decides on, from the admitted pod.
pub fn pod_facts(pod: &PodInfo, backoff: BackoffPolicy) -> PodFacts {
    let spec = pod.pod.spec.clone().unwrap_or_default();
    let init_kind = |c: &Container| match c.restart_policy.as_deref() {
        Some("Always") => ContainerKind::Sidecar,
        _ => ContainerKind::Init,
    };
    PodFacts {
        uid: pod.uid.clone(),
        name: pod.name.clone(),
        namespace: pod.namespace.clone(),
        init_containers: spec
            .init_containers
            .iter()
            .flatten()
            .map(|c| container_facts(c, init_kind(c)))
            .collect(),
        containers: spec
            .containers
            .iter()
            .map(|c| container_facts(c, ContainerKind::Regular))
            .collect(),
        ephemeral_containers: Vec::new(),
        restart_policy: pod.policy,
        backoff,
        grace: pod.grace,
        active_deadline: spec
            .active_deadline_seconds
            .map(|s| Duration::from_secs(non_negative_u64(s))),
        generation: pod.pod.metadata.generation,
    }
}

/// The facts of a container of `kind`.
pub fn container_facts(c: &Container, kind: ContainerKind) -> ContainerFacts {
    let lifecycle = c.lifecycle.as_ref();
    ContainerFacts {
        name: c.name.clone(),
        image: c.image.clone().unwrap_or_default(),
        kind,
        pre_stop: hook(lifecycle.and_then(|l| l.pre_stop.as_ref())),
        post_start: hook(lifecycle.and_then(|l| l.post_start.as_ref())),
        startup_probe: c.startup_probe.as_ref().map(probe_facts),
        liveness_probe: c.liveness_probe.as_ref().map(probe_facts),
        readiness_probe: c.readiness_probe.is_some(),
        resources: ContainerAllocation::started_as(Allocation::of(c)),
    }
}

fn probe_facts(p: &Probe) -> ProbeFacts {
    ProbeFacts {
        termination_grace: p
            .termination_grace_period_seconds
            .map(|s| Duration::from_secs(non_negative_u64(s.max(1)))),
    }
}

/// The handler podhost runs for a hook: exec with a command, httpGet, or sleep.
fn hook(handler: Option<&LifecycleHandler>) -> Hook {
    let Some(handler) = handler else {
        return Hook::None;
    };
    if exec_command(handler).is_some() {
        return Hook::Exec;
    }
    if handler.http_get.is_some() {
        return Hook::HttpGet;
    }
    match &handler.sleep {
        Some(s) => Hook::Sleep(Duration::from_secs(non_negative_u64(s.seconds))),
        None => Hook::None,
    }
}

/// The exec command of a hook handler, if it has one.
pub fn exec_command(handler: &LifecycleHandler) -> Option<Vec<String>> {
    handler
        .exec
        .as_ref()?
        .command
        .clone()
        .filter(|v| !v.is_empty())
}
