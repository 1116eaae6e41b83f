//! The pod sandbox's lifecycle — its cgroup, namespaces, volumes, network and DNS files —
//! decided from observed facts, as the kubelet's `computePodActions` decides
//! `CreateSandbox` / `KillPod` through `podSandboxChanged`.
//!
//! One deliberate difference from the kubelet: a sandbox is never torn down while a
//! container of the pod may run. The kubelet kills such a pod and creates a new sandbox
//! ("Pod sandbox changed, it will be killed and re-created"); a node agent restarted
//! under running pods must not, since its own restart is the usual cause of a step that
//! fails once (a volume walk racing a container, the Node's podCIDR not read yet). So a
//! part that is missing or fails is repaired alone, retried with back-off, and reported
//! (a Warning event, `PodReadyToStartContainers` and `Ready` false); only a sandbox of
//! which no container runs is recreated.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

/// One part of the sandbox, in the order it is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SandboxStep {
    /// The pod's cgroup with its pod-level limits.
    Cgroup,
    /// The pinned namespaces and /dev/shm (and the pause process of a shared PID
    /// namespace).
    Namespaces,
    /// emptyDir and content volumes.
    Volumes,
    /// The pod's interface, addresses, routes and hostPorts.
    Network,
    /// resolv.conf, hosts and hostname.
    DnsFiles,
}

impl SandboxStep {
    pub const ALL: [Self; 5] = [
        Self::Cgroup,
        Self::Namespaces,
        Self::Volumes,
        Self::Network,
        Self::DnsFiles,
    ];

    /// The step as events name it.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Cgroup => "cgroup",
            Self::Namespaces => "namespaces",
            Self::Volumes => "volumes",
            Self::Network => "network",
            Self::DnsFiles => "DNS files",
        }
    }

    /// The steps that must be in place before this one runs.
    fn needs(self) -> &'static [Self] {
        match self {
            Self::Cgroup | Self::Namespaces => &[],
            Self::Volumes => &[Self::Namespaces],
            Self::Network => &[Self::Namespaces],
            // The hosts file holds the pod's addresses.
            Self::DnsFiles => &[Self::Namespaces, Self::Network],
        }
    }
}

/// What is known of one step.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum StepState {
    /// Not checked by this daemon yet (a fresh pod, or one adopted at start).
    #[default]
    Unknown,
    /// In place: set up or checked.
    Ready,
    /// Checked and found missing (what is missing).
    Missing(String),
    /// Setting it up failed `failures` times in a row, the last at `at`.
    Failed {
        failures: u32,
        at: DateTime<Utc>,
        message: String,
    },
    /// It waits for something outside the pod (the Node's podCIDR), with the reason;
    /// retried when that arrives.
    Waiting(String),
}

/// The facts a sandbox decision is made from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SandboxObserved {
    pub steps: BTreeMap<SandboxStep, StepState>,
    /// A container of the pod may run: a live shim, or an attempt without its exit
    /// record. Conservative on purpose: only a pod of which nothing can run is recreated.
    pub containers_may_run: bool,
    /// The pod is being killed: its containers stop first (with their grace), then the
    /// whole sandbox is released; nothing is repaired meanwhile.
    pub terminating: bool,
}

/// What the worker does next with the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SandboxPlan {
    /// Release what is left of the sandbox (network, namespaces) before setting it up
    /// anew: only when no container can run.
    pub recreate: bool,
    /// The steps to (re)run now, in order; the worker stops at the first failure.
    pub run: Vec<SandboxStep>,
    /// Ask again at this time (a failed step's back-off ends).
    pub wake_at: Option<DateTime<Utc>>,
    /// Every part is in place.
    pub ready: bool,
    /// What is wrong, for the pod's status (`PodReadyToStartContainers`, `Ready`).
    pub problem: Option<String>,
}

impl SandboxObserved {
    /// A sandbox no daemon has looked at yet (a fresh pod or one just adopted).
    pub fn unknown(containers_may_run: bool) -> Self {
        Self {
            steps: SandboxStep::ALL
                .into_iter()
                .map(|s| (s, StepState::Unknown))
                .collect(),
            containers_may_run,
            terminating: false,
        }
    }

    pub fn state(&self, step: SandboxStep) -> &StepState {
        static UNKNOWN: StepState = StepState::Unknown;
        self.steps.get(&step).unwrap_or(&UNKNOWN)
    }

    /// The step was set up, or checked and found in place.
    pub fn on_ready(&mut self, step: SandboxStep) {
        self.steps.insert(step, StepState::Ready);
    }

    /// A check found the step's part missing.
    pub fn on_missing(&mut self, step: SandboxStep, what: String) {
        self.steps.insert(step, StepState::Missing(what));
    }

    /// Setting the step up failed.
    pub fn on_failed(&mut self, step: SandboxStep, at: DateTime<Utc>, message: String) {
        let failures = match self.state(step) {
            StepState::Failed { failures, .. } => failures.saturating_add(1),
            _ => 1,
        };
        self.steps.insert(
            step,
            StepState::Failed {
                failures,
                at,
                message,
            },
        );
    }

    /// The step waits for the node (the pod CIDR).
    pub fn on_waiting(&mut self, step: SandboxStep, reason: String) {
        self.steps.insert(step, StepState::Waiting(reason));
    }

    /// What the node awaited arrived: waiting steps run again at once.
    pub fn on_node_ready(&mut self) {
        for state in self.steps.values_mut() {
            if matches!(state, StepState::Waiting(_)) {
                *state = StepState::Unknown;
            }
        }
    }

    /// The sandbox was released for a recreation: every step starts over.
    pub fn on_recreated(&mut self) {
        for state in self.steps.values_mut() {
            *state = StepState::Unknown;
        }
    }
}

/// The back-off before a failed step runs again: 1 s doubling per failure, at most
/// 2 minutes (the kubelet retries a failed sandbox on its pod worker's back-off).
pub fn step_backoff(failures: u32) -> Duration {
    const MAX: Duration = Duration::from_secs(120);
    let doublings = failures.saturating_sub(1).min(7);
    Duration::from_secs(1u64 << doublings).min(MAX)
}

/// The decision: see the module documentation.
pub fn decide_sandbox(observed: &SandboxObserved, now: DateTime<Utc>) -> SandboxPlan {
    let mut plan = SandboxPlan {
        problem: problem(observed),
        ..SandboxPlan::default()
    };
    plan.ready = SandboxStep::ALL
        .iter()
        .all(|s| *observed.state(*s) == StepState::Ready);
    if observed.terminating || plan.ready {
        // Being killed: containers first, then everything is released; a repair now
        // would only be undone.
        return plan;
    }
    let namespaces_lost = matches!(
        observed.state(SandboxStep::Namespaces),
        StepState::Missing(_)
    );
    if namespaces_lost && !observed.containers_may_run {
        // Nothing runs in what is left: start over, as the kubelet's CreateSandbox.
        plan.recreate = true;
        plan.run = SandboxStep::ALL.to_vec();
        return plan;
    }
    let mut ready_or_running: Vec<SandboxStep> = Vec::new();
    for step in SandboxStep::ALL {
        let needs_met = step
            .needs()
            .iter()
            .all(|n| *observed.state(*n) == StepState::Ready || ready_or_running.contains(n));
        let due = match observed.state(step) {
            StepState::Ready => {
                ready_or_running.push(step);
                continue;
            }
            // New namespaces would split the pod: the running containers keep theirs
            // (their processes hold them) and the sandbox is recreated once none runs.
            StepState::Missing(_) if step == SandboxStep::Namespaces => false,
            StepState::Unknown | StepState::Missing(_) => true,
            StepState::Waiting(_) => false,
            StepState::Failed { failures, at, .. } => {
                let retry_at = *at + chrono_duration(step_backoff(*failures));
                if retry_at > now {
                    plan.wake_at = Some(plan.wake_at.map_or(retry_at, |w| w.min(retry_at)));
                    false
                } else {
                    true
                }
            }
        };
        if due && needs_met {
            plan.run.push(step);
            ready_or_running.push(step);
        }
    }
    plan
}

/// The first part that is not in place, as the pod's status tells it; `None` while
/// every part is ready or simply not checked yet.
fn problem(observed: &SandboxObserved) -> Option<String> {
    SandboxStep::ALL
        .into_iter()
        .find_map(|step| match observed.state(step) {
            StepState::Missing(what) => Some(format!("{} missing: {what}", step.describe())),
            StepState::Failed { message, .. } => {
                Some(format!("{} failed: {message}", step.describe()))
            }
            StepState::Waiting(reason) => Some(format!("{}: {reason}", step.describe())),
            StepState::Unknown | StepState::Ready => None,
        })
}

fn chrono_duration(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

/// How the worker answers a step that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureResponse {
    /// A Warning event naming the step, and that step alone again after its back-off;
    /// everything else stays as it is.
    RetryStep { after: Duration },
    /// The step waits for the node (no event storm, no teardown): `Pending` with the
    /// reason until the node is ready.
    WaitForNode,
}

/// Why a step failed, as far as the decision cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The node itself is not ready for it yet (cluster mode: the Node's podCIDR).
    NodeNotReady,
    /// Anything else.
    Error,
}

/// The answer to a failed step: never a teardown — a pod whose containers run keeps
/// its sandbox, and a fresh pod's steps are idempotent, so retrying the one that failed
/// is enough.
pub fn on_step_failure(kind: FailureKind, failures: u32) -> FailureResponse {
    match kind {
        FailureKind::NodeNotReady => FailureResponse::WaitForNode,
        FailureKind::Error => FailureResponse::RetryStep {
            after: step_backoff(failures),
        },
    }
}
