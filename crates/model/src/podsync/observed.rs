//! What the worker has observed of a pod's containers, and the pure transitions that fold
//! each observation (or each performed action) into it.

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::PodCondition;

use super::super::backoff::Backoff;
use super::super::phase::PodPhase;

/// The pod is terminating: since when, and with what grace (it can only shrink).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TerminationOrder {
    pub since: DateTime<Utc>,
    pub grace: Duration,
}

/// How one container instance ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Termination {
    pub exit_code: i32,
    pub signal: Option<i32>,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    /// A reason the exit code cannot tell (OOMKilled, StartError, ContainerStatusUnknown);
    /// `None` means Completed for 0 and Error otherwise.
    pub reason: Option<String>,
    pub message: Option<String>,
    pub container_id: Option<String>,
}

impl Termination {
    /// How long the instance ran.
    pub fn ran_for(&self) -> Duration {
        (self.finished_at - self.started_at)
            .to_std()
            .unwrap_or_default()
    }

    /// The reason shown: the known one, else by the exit code.
    pub fn shown_reason(&self) -> &str {
        match &self.reason {
            Some(r) => r,
            None if self.exit_code == 0 => "Completed",
            None => "Error",
        }
    }
}

/// Why a start could not go ahead before anything ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// The image is not in the store and could not be pulled.
    Image,
    /// The image is not in the store and may not be pulled (policy Never, `localhost/`).
    ImageNeverPull,
    /// The container cannot be configured (its user, securityContext, image config).
    Config,
}

/// A start that was blocked, and how many times in a row that happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartBlock {
    pub kind: BlockKind,
    pub message: String,
    pub since: DateTime<Utc>,
    /// Consecutive blocked starts of this kind, this one included (≥ 1).
    pub failures: u32,
    /// The image generation when it happened: a loaded image retries at once.
    pub image_generation: u64,
    /// The config generation when it happened: a configuration error is retried at once
    /// when the pod's labels or annotations change.
    pub config_generation: u64,
}

/// A waiting state as it was published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShownWaiting {
    pub reason: String,
    pub message: Option<String>,
}

impl ContainerObserved {
    /// The waiting reason last published.
    pub fn shown_reason(&self) -> Option<&str> {
        self.shown_waiting.as_ref().map(|w| w.reason.as_str())
    }
}

/// The state of the container's current instance.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Instance {
    /// Nothing was started yet (or the previous daemon's attempt left nothing).
    #[default]
    None,
    /// A start action is being performed.
    Starting {
        since: DateTime<Utc>,
    },
    /// The last start was blocked before anything ran.
    Blocked(StartBlock),
    Running {
        started_at: DateTime<Utc>,
    },
    /// It exited; `released` once its shim has cleaned up (cgroup, rootfs), before which
    /// nothing may reuse them.
    Exited {
        termination: Termination,
        released: bool,
    },
}

/// A preStop hook's progress.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum HookProgress {
    #[default]
    NotRun,
    Running {
        since: DateTime<Utc>,
    },
    Ended {
        at: DateTime<Utc>,
        failure: Option<String>,
    },
}

/// How far the stop of the running instance went.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StopProgress {
    /// When the stop began (the `Killing` event); the grace deduction counts from here.
    pub began_at: Option<DateTime<Utc>>,
    pub hook: HookProgress,
    /// When the stop signal was sent, and the grace it was given before SIGKILL.
    pub stop_signal: Option<(DateTime<Utc>, Duration)>,
    pub kill_sent_at: Option<DateTime<Utc>>,
}

pub use super::super::probe::{ProbeKind, ProbeResult};

/// The probe results of the current instance. A new instance starts from the kubelet's
/// initial results: startup Unknown, liveness Success, readiness Failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    pub startup: ProbeResult,
    pub liveness: ProbeResult,
    pub readiness: ProbeResult,
    /// The message of the last failure (for the kill's event).
    pub failure: Option<String>,
}

impl Default for Health {
    fn default() -> Self {
        Self {
            startup: ProbeResult::Unknown,
            liveness: ProbeResult::Success,
            readiness: ProbeResult::Failure,
            failure: None,
        }
    }
}

/// What the worker knows of one container.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerObserved {
    pub name: String,
    /// The attempt number of the current (or next) instance: the restart count shown.
    pub restart_count: u32,
    /// The attempt number the next start uses (one past the last that ran).
    pub next_attempt: u32,
    /// CrashLoopBackOff state, advanced by each start that follows an exit.
    pub backoff: Backoff,
    pub instance: Instance,
    /// How the instance before the current one ended (`lastState`).
    pub last_termination: Option<Termination>,
    pub container_id: Option<String>,
    pub image_id: String,
    pub stop: StopProgress,
    /// Consecutive blocked starts of one kind (kept across the retries in between).
    pub block_streak: Option<(BlockKind, u32)>,
    /// The waiting state last published: a transition's event is recorded once, and a
    /// blocked start's error stays shown while its retry runs (the kubelet's reason cache).
    pub shown_waiting: Option<ShownWaiting>,
    /// The spec's image the current (or last) instance was made from: when the spec names
    /// another, the container's definition changed (the kubelet's container hash).
    /// `None` for an instance a daemon older than this record adopted.
    pub started_image: Option<String>,
    /// The postStart hook of the current instance.
    pub post_start: HookProgress,
    /// Probe results of the current instance.
    pub health: Health,
    /// Probe failures not yet published as `Unhealthy` events.
    pub unhealthy: Vec<(ProbeKind, String)>,
    /// Some instance was published as started: a sidecar no longer holds up the next
    /// init container.
    pub started_once: bool,
    /// The instance's exit is known (its shim reported it) but its record is not yet
    /// durable: it is shown, but the pod's phase does not become terminal on it (a
    /// terminal phase is persisted and never goes back; after a power loss the exit
    /// might be gone and the container count as lost).
    pub exit_unrecorded: bool,
    /// A start begun to replace an instance stopped because its image changed: how that
    /// instance ended. Until its successor runs (or fails to), the status shows it
    /// running, as the kubelet kills and starts such a container in one sync and
    /// publishes no status in between (a Ready pod stays Ready through an image update);
    /// then it becomes the last state.
    pub replacing: Option<Termination>,
}

impl ContainerObserved {
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            ..Default::default()
        }
    }

    /// Nothing of it runs or holds host resources: the pod may finish.
    pub fn is_settled(&self) -> bool {
        match &self.instance {
            Instance::None | Instance::Blocked(_) => true,
            Instance::Exited { released, .. } => *released,
            Instance::Starting { .. } | Instance::Running { .. } => false,
        }
    }

    /// The worker began performing [`Action::Start`](super::Action::Start) with `image`.
    pub fn on_start_begun(&mut self, now: DateTime<Utc>, backoff_after: Backoff, image: &str) {
        let image_changed = self.started_image.as_deref() != Some(image);
        if let Instance::Exited { termination, .. } = std::mem::take(&mut self.instance) {
            // Stopped by the node (not ended by itself) and started again with another
            // image: the kubelet's kill-and-start of a changed definition.
            if image_changed && self.stop.began_at.is_some() {
                self.replacing = Some(termination);
            } else {
                self.last_termination = Some(termination);
            }
        }
        if image_changed {
            // Another image's pull or config failures say nothing of this one's
            // (the kubelet's image back-off is keyed by the image).
            self.block_streak = None;
            self.started_image = Some(image.to_string());
        }
        self.backoff = backoff_after;
        self.instance = Instance::Starting { since: now };
    }

    /// The start was blocked before anything ran; the attempt number is not used up.
    pub fn on_start_blocked(
        &mut self,
        kind: BlockKind,
        message: String,
        now: DateTime<Utc>,
        (image_generation, config_generation): (u64, u64),
    ) {
        let failures = match self.block_streak {
            Some((k, n)) if k == kind => n.saturating_add(1),
            _ => 1,
        };
        self.block_streak = Some((kind, failures));
        self.end_replacement();
        self.instance = Instance::Blocked(StartBlock {
            kind,
            message,
            since: now,
            failures,
            image_generation,
            config_generation,
        });
    }

    /// The shim runs the container's process.
    pub fn on_started(&mut self, attempt: u32, started_at: DateTime<Utc>, container_id: String) {
        self.restart_count = attempt;
        self.next_attempt = attempt.saturating_add(1);
        self.block_streak = None;
        self.container_id = Some(container_id);
        self.end_replacement();
        self.instance = Instance::Running { started_at };
        self.stop = StopProgress::default();
        self.post_start = HookProgress::NotRun;
        self.health = Health::default();
        self.unhealthy.clear();
    }

    /// The worker began performing [`Action::RunPostStart`](super::Action::RunPostStart).
    pub fn on_post_start_begun(&mut self, now: DateTime<Utc>) {
        self.post_start = HookProgress::Running { since: now };
    }

    /// The postStart hook ended (`failure` says why it failed).
    pub fn on_post_start_ended(&mut self, now: DateTime<Utc>, failure: Option<String>) {
        if matches!(self.post_start, HookProgress::Running { .. }) {
            self.post_start = HookProgress::Ended { at: now, failure };
        }
    }

    /// A probe's result changed (after its thresholds); ignored unless an instance runs.
    pub fn on_probe_result(&mut self, kind: ProbeKind, result: ProbeResult, message: String) {
        if !matches!(self.instance, Instance::Running { .. }) {
            return;
        }
        let slot = match kind {
            ProbeKind::Startup => &mut self.health.startup,
            ProbeKind::Liveness => &mut self.health.liveness,
            ProbeKind::Readiness => &mut self.health.readiness,
        };
        if *slot == result {
            return;
        }
        *slot = result;
        if result == ProbeResult::Failure {
            self.health.failure = Some(message.clone());
            self.unhealthy.push((kind, message));
        }
    }

    /// The instance exited (or its start failed, which counts as an exit).
    pub fn on_exited(&mut self, attempt: u32, termination: Termination, released: bool) {
        self.restart_count = attempt;
        self.next_attempt = self.next_attempt.max(attempt.saturating_add(1));
        self.block_streak = None;
        if let Instance::Exited {
            termination: prev, ..
        } = std::mem::take(&mut self.instance)
        {
            self.last_termination = Some(prev);
        }
        self.end_replacement();
        self.instance = Instance::Exited {
            termination,
            released,
        };
        self.exit_unrecorded = false;
    }

    /// The replacing start has an outcome: the replaced instance is the last state.
    fn end_replacement(&mut self) {
        if let Some(replaced) = self.replacing.take() {
            self.last_termination = Some(replaced);
        }
    }

    /// The exit just reported by [`Self::on_exited`] is not yet durable on disk.
    pub fn on_exit_not_yet_recorded(&mut self) {
        self.exit_unrecorded = matches!(self.instance, Instance::Exited { .. });
    }

    /// The exited instance's record is durable.
    pub fn on_exit_recorded(&mut self) {
        self.exit_unrecorded = false;
    }

    /// The exited instance's shim has released the cgroup and rootfs (its record was
    /// durable before: the worker reports the release only after that).
    pub fn on_released(&mut self) {
        if let Instance::Exited { released, .. } = &mut self.instance {
            *released = true;
        }
        self.exit_unrecorded = false;
    }

    /// The worker began performing [`Action::RunPreStop`](super::Action::RunPreStop).
    pub fn on_hook_started(&mut self, now: DateTime<Utc>) {
        self.stop.began_at.get_or_insert(now);
        self.stop.hook = HookProgress::Running { since: now };
    }

    /// The preStop hook ended (`failure` says why it failed). A hook that ends after the
    /// stop signal went out (it timed out) changes nothing.
    pub fn on_hook_ended(&mut self, now: DateTime<Utc>, failure: Option<String>) {
        if self.stop.stop_signal.is_none() {
            self.stop.hook = HookProgress::Ended { at: now, failure };
        }
    }

    /// The worker sent the stop signal (with `grace` before SIGKILL) or SIGKILL.
    pub fn on_signal_sent(&mut self, kind: super::SignalKind, now: DateTime<Utc>) {
        self.stop.began_at.get_or_insert(now);
        match kind {
            super::SignalKind::Stop { grace } => self.stop.stop_signal = Some((now, grace)),
            super::SignalKind::Kill => self.stop.kill_sent_at = Some(now),
        }
    }
}

/// What the worker knows of the pod.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PodObserved {
    /// One per spec init container (sidecars included), in spec order.
    pub init_containers: Vec<ContainerObserved>,
    /// One per spec container, in spec order.
    pub containers: Vec<ContainerObserved>,
    /// One per ephemeral container, in the order they were added.
    pub ephemeral_containers: Vec<ContainerObserved>,
    pub terminating: Option<TerminationOrder>,
    /// Bumped when an image is loaded: image and config back-offs end at once.
    pub image_generation: u64,
    /// Bumped when the pod's labels or annotations change: a start blocked on its
    /// configuration (a downward-API variable, a `subPathExpr` made of one) is retried at
    /// once, as the kubelet syncs a pod when its object changes.
    pub config_generation: u64,
    /// The phase last published (a terminal phase never goes back).
    pub phase: Option<PodPhase>,
    /// The conditions last published (transition times move only on change).
    pub conditions: Vec<PodCondition>,
    /// When the first container status was published (`status.startTime`).
    pub start_time: Option<DateTime<Utc>>,
    /// The pod was evicted (an emptyDir over its sizeLimit, node pressure): when, the
    /// message, and the grace its containers get.
    pub evicted: Option<(DateTime<Utc>, String, Duration)>,
    /// What is wrong with the pod's sandbox (a part missing or failing to repair, see
    /// [`decide_sandbox`](super::decide_sandbox)): the pod is not Ready meanwhile.
    pub sandbox_problem: Option<String>,
    /// The resize condition shown, if a resize is pending or in progress.
    pub resize: Option<super::super::resize::ResizeCondition>,
}

impl PodObserved {
    pub fn new(names: impl IntoIterator<Item = impl AsRef<str>>) -> Self {
        Self {
            containers: names
                .into_iter()
                .map(|n| ContainerObserved::new(n.as_ref()))
                .collect(),
            ..Default::default()
        }
    }

    /// With init containers (sidecars included) before the regular ones.
    pub fn with_init(
        init: impl IntoIterator<Item = impl AsRef<str>>,
        names: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> Self {
        Self {
            init_containers: init
                .into_iter()
                .map(|n| ContainerObserved::new(n.as_ref()))
                .collect(),
            ..Self::new(names)
        }
    }

    pub fn container_mut(&mut self, name: &str) -> Option<&mut ContainerObserved> {
        self.init_containers
            .iter_mut()
            .chain(self.containers.iter_mut())
            .chain(self.ephemeral_containers.iter_mut())
            .find(|c| c.name == name)
    }

    /// Every container: init containers, regular ones, ephemeral ones.
    pub fn all(&self) -> impl Iterator<Item = &ContainerObserved> {
        self.init_containers
            .iter()
            .chain(&self.containers)
            .chain(&self.ephemeral_containers)
    }

    /// The pod terminates with `grace`; a later order can only shorten it.
    pub fn on_terminate(&mut self, now: DateTime<Utc>, grace: Duration) {
        match &mut self.terminating {
            Some(order) => order.grace = order.grace.min(grace),
            None => self.terminating = Some(TerminationOrder { since: now, grace }),
        }
    }

    /// The node evicts the pod (the first eviction stands).
    pub fn on_evicted(&mut self, now: DateTime<Utc>, message: String, grace: Duration) {
        self.evicted.get_or_insert((now, message, grace));
    }

    /// An image was loaded into the store.
    pub fn on_image_loaded(&mut self) {
        self.image_generation = self.image_generation.wrapping_add(1);
    }

    /// The pod's labels or annotations changed.
    pub fn on_metadata_changed(&mut self) {
        self.config_generation = self.config_generation.wrapping_add(1);
    }

    /// The worker published `decision`'s status: remember what a later sync compares to.
    pub fn on_published(&mut self, decision: &super::Decision) {
        self.phase = Some(decision.status.phase);
        self.conditions = decision.status.conditions.clone();
        self.start_time = decision.status.start_time;
        let statuses = decision
            .status
            .init_container_statuses
            .iter()
            .chain(&decision.status.container_statuses);
        let containers = self
            .init_containers
            .iter_mut()
            .chain(self.containers.iter_mut());
        for (c, status) in containers.zip(statuses) {
            let state = status.state.as_ref();
            c.shown_waiting = state.and_then(|s| s.waiting.as_ref()).and_then(|w| {
                Some(ShownWaiting {
                    reason: w.reason.clone()?,
                    message: w.message.clone(),
                })
            });
            c.started_once |= status.started == Some(true);
            c.unhealthy.clear();
        }
    }
}
