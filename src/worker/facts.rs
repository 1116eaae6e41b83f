//! The pod-sync core's view of a pod's spec.

use std::time::Duration;

use k8s_openapi::api::core::v1::Container;

use super::context::PodInfo;
use crate::model::backoff::BackoffPolicy;
use crate::model::podsync::{ContainerFacts, PodFacts, PreStop};

/// The facts the core decides on, from the admitted pod.
pub fn pod_facts(pod: &PodInfo, backoff: BackoffPolicy) -> PodFacts {
    let spec = pod.pod.spec.clone().unwrap_or_default();
    PodFacts {
        uid: pod.uid.clone(),
        name: pod.name.clone(),
        namespace: pod.namespace.clone(),
        containers: spec
            .containers
            .iter()
            .map(|c| ContainerFacts {
                name: c.name.clone(),
                image: c.image.clone().unwrap_or_default(),
                pre_stop: pre_stop(c),
            })
            .collect(),
        restart_policy: pod.policy,
        backoff,
    }
}

/// The preStop handler podhost runs: exec with a command, or sleep.
fn pre_stop(c: &Container) -> PreStop {
    let Some(handler) = c.lifecycle.as_ref().and_then(|l| l.pre_stop.as_ref()) else {
        return PreStop::None;
    };
    if let Some(cmd) = handler.exec.as_ref().and_then(|e| e.command.as_ref())
        && !cmd.is_empty()
    {
        return PreStop::Exec;
    }
    match &handler.sleep {
        Some(s) => PreStop::Sleep(Duration::from_secs(u64::try_from(s.seconds).unwrap_or(0))),
        None => PreStop::None,
    }
}

/// The preStop exec command, if the container has one.
pub fn pre_stop_command(c: &Container) -> Option<Vec<String>> {
    c.lifecycle
        .as_ref()?
        .pre_stop
        .as_ref()?
        .exec
        .as_ref()?
        .command
        .clone()
        .filter(|v| !v.is_empty())
}
