//! The pod's status as a sync leaves it: container states, phase (the kubelet's
//! `getPhase`) and the standard conditions.

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, PodCondition,
};

use super::super::k8s_time::to_k8s;
use super::super::phase::{ContainerSummary, PodPhase, pod_phase};
use super::super::resize::{self, ResizeCondition};
use super::action::Decision;
use super::health::{ready, started};
use super::init::InitProgress;
use super::observed::{ContainerObserved, Instance, PodObserved, Termination};
use super::{ContainerFacts, ContainerKind, DEADLINE_MESSAGE, PodFacts, StopCause};

/// The part of `v1.PodStatus` the core owns.
#[derive(Debug, Clone, PartialEq)]
pub struct PodStatusView {
    pub phase: PodPhase,
    pub conditions: Vec<PodCondition>,
    pub container_statuses: Vec<ContainerStatus>,
    pub init_container_statuses: Vec<ContainerStatus>,
    pub ephemeral_container_statuses: Vec<ContainerStatus>,
    pub start_time: Option<DateTime<Utc>>,
    /// `status.reason` and `status.message` (DeadlineExceeded).
    pub reason: Option<String>,
    pub message: Option<String>,
    /// `status.observedGeneration`: the generation of the pod object this status is of.
    pub observed_generation: Option<i64>,
}

impl Default for PodStatusView {
    fn default() -> Self {
        Self {
            phase: PodPhase::Pending,
            conditions: Vec::new(),
            container_statuses: Vec::new(),
            init_container_statuses: Vec::new(),
            ephemeral_container_statuses: Vec::new(),
            start_time: None,
            reason: None,
            message: None,
            observed_generation: None,
        }
    }
}

pub(super) fn waiting(reason: &str, message: Option<String>) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.to_string()),
            message,
        }),
        ..Default::default()
    }
}

/// The waiting reasons of a blocked start, which stay shown while its retry runs.
const BLOCKED_START_REASONS: [&str; 4] = [
    "CreateContainerConfigError",
    "ErrImageNeverPull",
    "ErrImagePull",
    "ImagePullBackOff",
];

/// A start in progress: `creating` (see [`creating`]), unless it retries a blocked start.
/// Then the block's error stays shown until the retry has an outcome, as the kubelet's
/// reason cache keeps it from one sync to the next, so that a reader never sees the error
/// flicker to `ContainerCreating` and back at each retry.
pub(super) fn starting(obs: &ContainerObserved, creating: &str) -> ContainerState {
    match &obs.shown_waiting {
        Some(shown) if BLOCKED_START_REASONS.contains(&shown.reason.as_str()) => {
            waiting(&shown.reason, shown.message.clone())
        }
        _ => waiting(creating, None),
    }
}

/// The waiting reason of a container that has no instance yet: the kubelet's default
/// state, `PodInitializing` for every container of a pod with init containers (its own
/// init containers included), else `ContainerCreating`.
pub(super) fn creating(pod: &PodFacts) -> &'static str {
    if pod.init_containers.is_empty() {
        "ContainerCreating"
    } else {
        "PodInitializing"
    }
}

pub(super) fn running(started_at: DateTime<Utc>) -> ContainerState {
    ContainerState {
        running: Some(ContainerStateRunning {
            started_at: Some(to_k8s(started_at)),
        }),
        ..Default::default()
    }
}

/// The terminated state an ended instance shows.
pub fn terminated_state(t: &Termination) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: t.exit_code,
            signal: t.signal,
            reason: Some(t.shown_reason().to_string()),
            message: t.message.clone(),
            started_at: Some(to_k8s(t.started_at)),
            finished_at: Some(to_k8s(t.finished_at)),
            container_id: t.container_id.clone(),
        }),
        ..Default::default()
    }
}

fn container_status(
    spec: &ContainerFacts,
    obs: &ContainerObserved,
    state: &ContainerState,
) -> ContainerStatus {
    let running = state.running.is_some();
    let (started, ready) = match spec.kind {
        ContainerKind::Init => (running, completed_ok(state)),
        ContainerKind::Regular | ContainerKind::Sidecar | ContainerKind::Ephemeral => {
            (running && started(spec, obs), running && ready(spec, obs))
        }
    };
    // While an exited instance waits for its restart, its end is the last state (not
    // while it is still shown running, being replaced for a changed definition).
    let last = match &obs.instance {
        Instance::Exited { termination, .. }
            if state.terminated.is_none() && state.running.is_none() =>
        {
            Some(termination)
        }
        _ => obs.last_termination.as_ref(),
    };
    ContainerStatus {
        name: spec.name.clone(),
        image: shown_image(spec, obs),
        image_id: obs.image_id.clone(),
        container_id: obs.container_id.clone(),
        ready,
        started: Some(started),
        restart_count: i32::try_from(obs.restart_count).unwrap_or(i32::MAX),
        state: Some(state.clone()),
        last_state: last.map(terminated_state),
        // In-place resize: what the container was given and what its cgroups have.
        allocated_resources: (spec.kind != ContainerKind::Ephemeral)
            .then(|| spec.resources.allocated.allocated_requests())
            .flatten(),
        resources: (spec.kind != ContainerKind::Ephemeral)
            .then(|| spec.resources.applied.requirements()),
        ..Default::default()
    }
}

/// The image shown: the one the instance that runs or ran was made from (the kubelet
/// shows the runtime container's), else the spec's.
fn shown_image(spec: &ContainerFacts, obs: &ContainerObserved) -> String {
    match (&obs.instance, &obs.started_image) {
        (Instance::Running { .. } | Instance::Exited { .. }, Some(image)) => image.clone(),
        _ => spec.image.clone(),
    }
}

fn summary(obs: &ContainerObserved, state: &ContainerState) -> ContainerSummary {
    if state.running.is_some() {
        return ContainerSummary::Running;
    }
    if let Some(t) = &state.terminated {
        return ContainerSummary::Terminated {
            exit_code: t.exit_code,
        };
    }
    let last_exit = match &obs.instance {
        Instance::Exited { termination, .. } => Some(termination.exit_code),
        _ => obs.last_termination.as_ref().map(|t| t.exit_code),
    };
    ContainerSummary::Waiting { last_exit }
}

fn completed_ok(state: &ContainerState) -> bool {
    state
        .terminated
        .as_ref()
        .is_some_and(|t| t.exit_code == 0 && t.reason.as_deref() == Some("Completed"))
}

fn statuses(
    specs: &[ContainerFacts],
    observed: &[ContainerObserved],
    states: &[ContainerState],
) -> Vec<ContainerStatus> {
    specs
        .iter()
        .zip(observed)
        .zip(states)
        .map(|((spec, obs), state)| container_status(spec, obs, state))
        .collect()
}

pub(super) fn pod_status(
    pod: &PodFacts,
    observed: &PodObserved,
    decision: &Decision,
    init: &InitProgress,
    cause: Option<StopCause>,
    now: DateTime<Utc>,
) -> PodStatusView {
    let container_statuses = statuses(
        &pod.containers,
        &observed.containers,
        &decision.container_states,
    );
    let init_container_statuses = statuses(
        &pod.init_containers,
        &observed.init_containers,
        &decision.init_container_states,
    );
    let ephemeral_container_statuses = statuses(
        &pod.ephemeral_containers,
        &observed.ephemeral_containers,
        &decision.ephemeral_container_states,
    );
    let summaries: Vec<ContainerSummary> = pod
        .containers
        .iter()
        .zip(&observed.containers)
        .zip(&decision.container_states)
        .map(|((spec, obs), state)| {
            if super::container::stopped_for_change(spec, obs) {
                ContainerSummary::Running
            } else {
                summary(obs, state)
            }
        })
        .collect();
    let computed = match (cause, init) {
        (Some(StopCause::Deadline | StopCause::InitFailed | StopCause::Evicted), _)
        | (_, InitProgress::Failed { .. }) => PodPhase::Failed,
        (_, InitProgress::Running) => PodPhase::Pending,
        _ => pod_phase(pod.restart_policy, &summaries),
    };
    // An exit whose record is not yet durable is shown, but the pod does not become
    // terminal on it until it is (a terminal phase is persisted and final).
    let unrecorded = observed
        .init_containers
        .iter()
        .chain(&observed.containers)
        .any(|c| c.exit_unrecorded);
    // A terminal phase never goes back (the kubelet's rule).
    let phase = match observed.phase {
        Some(p @ (PodPhase::Succeeded | PodPhase::Failed)) => p,
        last if unrecorded && matches!(computed, PodPhase::Succeeded | PodPhase::Failed) => {
            last.unwrap_or(PodPhase::Running)
        }
        _ => computed,
    };
    let (reason, message) = match cause {
        Some(StopCause::Deadline) => (
            Some("DeadlineExceeded".to_string()),
            Some(DEADLINE_MESSAGE.to_string()),
        ),
        Some(StopCause::Evicted) => (
            Some("Evicted".to_string()),
            observed.evicted.as_ref().map(|(_, m, _)| m.clone()),
        ),
        _ => (None, None),
    };
    let sidecars_ready = pod
        .init_containers
        .iter()
        .zip(&init_container_statuses)
        .filter(|(spec, _)| spec.kind == ContainerKind::Sidecar)
        .all(|(_, s)| s.ready);
    let containers_ready = !container_statuses.is_empty()
        && container_statuses.iter().all(|c| c.ready)
        && sidecars_ready;
    // A sandbox part missing (its network gone under it) makes the pod unready even
    // without a readiness probe to notice: Services stop sending it traffic.
    let sandbox_ready = observed.sandbox_problem.is_none();
    let start_time = observed.start_time.or(Some(now));
    let mut values = vec![
        ("PodScheduled", true),
        ("Initialized", *init == InitProgress::Done),
        ("ContainersReady", containers_ready),
        ("Ready", containers_ready && sandbox_ready),
        ("PodReadyToStartContainers", sandbox_ready),
    ];
    if cause == Some(StopCause::Evicted) {
        // The kubelet's mark of a pod it terminated itself.
        values.push(("DisruptionTarget", true));
    }
    let mut conditions = conditions(&observed.conditions, &values, now);
    explain_conditions(
        &mut conditions,
        pod,
        &init_container_statuses,
        &container_statuses,
        phase,
    );
    if let Some((_, message, _)) = observed
        .evicted
        .as_ref()
        .filter(|_| cause == Some(StopCause::Evicted))
        && let Some(c) = conditions
            .iter_mut()
            .find(|c| c.type_ == "DisruptionTarget")
    {
        c.reason = Some("TerminationByKubelet".to_string());
        c.message = Some(message.clone());
    }
    for c in &mut conditions {
        let explained = matches!(c.type_.as_str(), "Ready" | "PodReadyToStartContainers");
        if explained && c.status == "False" {
            if let Some(problem) = &observed.sandbox_problem {
                c.reason = Some("PodSandboxNotReady".to_string());
                c.message = Some(problem.clone());
            }
        } else if explained && c.reason.as_deref() == Some("PodSandboxNotReady") {
            c.reason = None;
            c.message = None;
        }
    }
    // The kubelet marks each condition it owns with the generation it was computed
    // from (PodObservedGenerationTracking, GA since 1.35); a condition written by
    // someone else (a readiness gate's) keeps its own.
    if let Some(generation) = pod.generation {
        for c in &mut conditions {
            if KUBELET_CONDITIONS.contains(&c.type_.as_str()) {
                c.observed_generation = Some(generation);
            }
        }
    }
    resize_condition(&mut conditions, observed.resize.as_ref(), now);
    PodStatusView {
        phase,
        conditions,
        container_statuses,
        init_container_statuses,
        ephemeral_container_statuses,
        start_time,
        reason,
        message,
        observed_generation: pod.generation,
    }
}

/// The resize condition shown (kept with its transition time while it stays the same),
/// and no other: a done resize removes both.
fn resize_condition(
    conditions: &mut Vec<PodCondition>,
    shown: Option<&ResizeCondition>,
    now: DateTime<Utc>,
) {
    let previous = conditions
        .iter()
        .find(|c| shown.is_some_and(|s| c.type_ == s.type_))
        .and_then(|c| c.last_transition_time.clone());
    conditions.retain(|c| c.type_ != resize::PENDING && c.type_ != resize::IN_PROGRESS);
    if let Some(s) = shown {
        conditions.push(PodCondition {
            type_: s.type_.to_string(),
            status: "True".to_string(),
            reason: s.reason.clone(),
            message: s.message.clone(),
            observed_generation: s.observed_generation,
            last_transition_time: Some(previous.unwrap_or_else(|| to_k8s(now))),
            ..Default::default()
        });
    }
}

/// The pod conditions the node owns.
const KUBELET_CONDITIONS: [&str; 6] = [
    "PodScheduled",
    "Initialized",
    "ContainersReady",
    "Ready",
    "PodReadyToStartContainers",
    "DisruptionTarget",
];

/// The kubelet's reason and message on each False condition it owns (its status
/// manager's `generate.go`): which init containers have not completed (or, for a
/// sidecar, started), which containers are not ready; `PodCompleted` once the pod
/// succeeded. A True condition carries neither.
fn explain_conditions(
    conditions: &mut [PodCondition],
    pod: &PodFacts,
    init_statuses: &[ContainerStatus],
    statuses: &[ContainerStatus],
    phase: PodPhase,
) {
    let incomplete: Vec<&str> = pod
        .init_containers
        .iter()
        .zip(init_statuses)
        .filter(|(spec, s)| match spec.kind {
            ContainerKind::Sidecar => s.started != Some(true),
            _ => !completed_ok(s.state.as_ref().unwrap_or(&ContainerState::default())),
        })
        .map(|(spec, _)| spec.name.as_str())
        .collect();
    let unready: Vec<&str> = pod
        .init_containers
        .iter()
        .zip(init_statuses)
        .filter(|(spec, _)| spec.kind == ContainerKind::Sidecar)
        .chain(pod.containers.iter().zip(statuses))
        .filter(|(_, s)| !s.ready)
        .map(|(spec, _)| spec.name.as_str())
        .collect();
    let listed = |what: &str, names: &[&str]| {
        format!("containers with {what} status: [{}]", names.join(" "))
    };
    for c in conditions.iter_mut() {
        let (reason, message) = match (c.type_.as_str(), c.status.as_str()) {
            ("Initialized" | "ContainersReady" | "Ready", "True") => (None, None),
            ("Initialized", _) if !incomplete.is_empty() => (
                Some("ContainersNotInitialized"),
                Some(listed("incomplete", &incomplete)),
            ),
            ("ContainersReady" | "Ready", _) if phase == PodPhase::Succeeded => {
                (Some("PodCompleted"), None)
            }
            ("ContainersReady" | "Ready", _) if !unready.is_empty() => (
                Some("ContainersNotReady"),
                Some(listed("unready", &unready)),
            ),
            _ => continue,
        };
        c.reason = reason.map(str::to_string);
        c.message = message;
    }
}

/// The conditions with these values; a condition's transition time moves only when its
/// status changes.
pub fn conditions(
    previous: &[PodCondition],
    values: &[(&str, bool)],
    now: DateTime<Utc>,
) -> Vec<PodCondition> {
    let mut out = previous.to_vec();
    for (kind, ok) in values {
        let value = if *ok { "True" } else { "False" };
        match out.iter_mut().find(|c| c.type_ == *kind) {
            Some(c) if c.status == value => {}
            Some(c) => {
                c.status = value.to_string();
                c.last_transition_time = Some(to_k8s(now));
            }
            None => out.push(PodCondition {
                type_: (*kind).to_string(),
                status: value.to_string(),
                last_transition_time: Some(to_k8s(now)),
                ..Default::default()
            }),
        }
    }
    out
}
