//! The facts of a pod's spec the core decides on (the worker derives them from the spec).

use std::time::Duration;

use super::super::backoff::BackoffPolicy;
use super::super::resize::ContainerAllocation;
use super::super::restart::RestartPolicy;

/// A lifecycle hook's handler (`lifecycle.postStart` / `lifecycle.preStop`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    None,
    /// An exec handler, run in the container by the worker.
    Exec,
    /// An httpGet handler, run by the worker against the container.
    HttpGet,
    /// A sleep handler of this long (a preStop sleep is bounded by the grace period).
    Sleep(Duration),
}

impl Hook {
    pub fn is_some(self) -> bool {
        self != Self::None
    }
}

/// Where a container sits in the pod's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerKind {
    /// `spec.containers`.
    Regular,
    /// `spec.initContainers` without a restart policy: runs to completion, one by one.
    Init,
    /// `spec.initContainers` with `restartPolicy: Always`: started in order, kept running,
    /// stopped last.
    Sidecar,
    /// `spec.ephemeralContainers` (`podhost debug`): started once, never restarted.
    Ephemeral,
}

/// A liveness or startup probe, as far as the core is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProbeFacts {
    /// The probe-level `terminationGracePeriodSeconds`: the grace of the kill its failure
    /// causes (the pod's when unset).
    pub termination_grace: Option<Duration>,
}

/// The facts of one container's spec the core decides on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerFacts {
    pub name: String,
    pub image: String,
    pub kind: ContainerKind,
    pub pre_stop: Hook,
    pub post_start: Hook,
    pub startup_probe: Option<ProbeFacts>,
    pub liveness_probe: Option<ProbeFacts>,
    pub readiness_probe: bool,
    /// Its resources as allocated and applied (in-place resize).
    pub resources: ContainerAllocation,
}

impl ContainerFacts {
    /// A regular container with no hooks and no probes.
    pub fn new(name: &str, image: &str) -> Self {
        Self {
            name: name.to_string(),
            image: image.to_string(),
            kind: ContainerKind::Regular,
            pre_stop: Hook::None,
            post_start: Hook::None,
            startup_probe: None,
            liveness_probe: None,
            readiness_probe: false,
            resources: ContainerAllocation::default(),
        }
    }
}

/// The facts of the pod's spec the core decides on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodFacts {
    pub uid: String,
    pub name: String,
    pub namespace: String,
    /// `spec.initContainers` (init containers and sidecars), in spec order.
    pub init_containers: Vec<ContainerFacts>,
    /// Regular containers, in spec order.
    pub containers: Vec<ContainerFacts>,
    /// Ephemeral containers, in the order they were added.
    pub ephemeral_containers: Vec<ContainerFacts>,
    pub restart_policy: RestartPolicy,
    pub backoff: BackoffPolicy,
    /// `terminationGracePeriodSeconds` (≥ 1 s): the grace of kills the pod itself causes
    /// (probe and postStart failures, an exceeded deadline, a finished Job-like pod).
    pub grace: Duration,
    /// `activeDeadlineSeconds`, counted from `status.startTime`.
    pub active_deadline: Option<Duration>,
    /// `metadata.generation` of the pod object whose spec the worker follows: the
    /// status's `observedGeneration` and its conditions' (None: a pod without one, such
    /// as a static pod's manifest, shows none).
    pub generation: Option<i64>,
}

impl PodFacts {
    /// The restart policy of a container of this pod: sidecars always restart, init
    /// containers restart on failure unless the pod says Never.
    pub fn restart_policy_of(&self, kind: ContainerKind) -> RestartPolicy {
        match (kind, self.restart_policy) {
            (ContainerKind::Sidecar, _) => RestartPolicy::Always,
            (ContainerKind::Ephemeral, _) => RestartPolicy::Never,
            (ContainerKind::Init, RestartPolicy::Always) => RestartPolicy::OnFailure,
            (_, policy) => policy,
        }
    }
}
