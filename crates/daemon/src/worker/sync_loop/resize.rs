//! In-place resize of a running pod (`pods/resize`): the API pod's changed container
//! resources are decided on by [`decide_resize`], allocated, written to the live cgroups
//! in the plan's order, and shown as the containers' `resources` / `allocatedResources`
//! and the pod's resize conditions. A container whose `resizePolicy` says
//! `RestartContainer` for a changed resource is restarted by the pod-sync core with its
//! new resources instead. A resize the node refused (a memory limit below usage) is
//! tried again every [`RETRY_EVERY`].
//!
//! What the cgroups were given is recorded on disk once written (the kubelet's
//! "actuated" resources): a daemon adopting the pod starts from it, and whatever of the
//! pod object's resources it does not hold yet (a resize the previous daemon did not
//! finish) is resized again.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use super::Executor;
use podhost_disk::{read_json, write_json_atomic};
use podhost_model::podsync::ContainerKind;
use podhost_model::resize::{
    Allocation, NodeRoom, ResizeCondition, ResizeDecision, RestartOn, Wanted, decide_resize,
};
use podhost_status::EventKind;

/// The resources the pod's container cgroups were given by a resize, by container name.
pub const APPLIED_FILE: &str = "resized-resources.json";

/// How often a resize the node refused is tried again (the kubelet retries it at each
/// of its pod syncs).
pub const RETRY_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

type AllocatedRecord = BTreeMap<String, Allocation>;

impl Executor {
    /// Takes the resources a previous daemon gave this pod's cgroups, if it resized it:
    /// they have them, whatever the pod object says now (the spec update that follows
    /// resizes them to it).
    pub(super) fn load_allocation(&mut self) {
        let path = self.ctx.layout.pod_dir(&self.pod.uid).join(APPLIED_FILE);
        let record = match read_json::<AllocatedRecord>(&path) {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(pod = %self.pod.name, error = %e, "cannot read the pod's resized resources; taking its spec's");
                return;
            }
        };
        for c in self
            .facts
            .init_containers
            .iter_mut()
            .chain(self.facts.containers.iter_mut())
        {
            if let Some(a) = record.get(&c.name) {
                c.resources.allocated = a.clone();
                c.resources.applied = a.clone();
            }
        }
    }

    /// Resizes the pod to the resources of `pod` (its latest object), if they changed.
    pub(super) fn resize_to(&mut self, pod: &Pod) {
        let Some(spec) = pod.spec.as_ref() else {
            return;
        };
        if self.observed.terminating.is_some() {
            return;
        }
        // Init containers (sidecars included) keep their allocation: resizing them is
        // another feature gate (InPlacePodVerticalScalingInitContainers), which podhost
        // does not implement; asked for, the whole resize is infeasible, and said so.
        let init_resized: Vec<&str> = spec
            .init_containers
            .iter()
            .flatten()
            .filter(|c| {
                self.facts
                    .init_containers
                    .iter()
                    .any(|f| f.name == c.name && f.resources.allocated != Allocation::of(c))
            })
            .map(|c| c.name.as_str())
            .collect();
        if !init_resized.is_empty() {
            let message = format!(
                "podhost does not resize init containers in place (InPlacePodVerticalScalingInitContainers): {}",
                init_resized.join(", ")
            );
            if self
                .observed
                .resize
                .as_ref()
                .and_then(|r| r.message.as_ref())
                != Some(&message)
            {
                self.event(EventKind::Warning, "ResizeInfeasible", message.clone());
            }
            self.observed.resize = Some(ResizeCondition::infeasible(
                message,
                pod.metadata.generation,
            ));
            return;
        }
        let allocated: Vec<(String, Allocation)> = self
            .facts
            .init_containers
            .iter()
            .chain(&self.facts.containers)
            .map(|c| (c.name.clone(), c.resources.allocated.clone()))
            .collect();
        let wanted: Vec<Wanted> = self
            .facts
            .init_containers
            .iter()
            .map(|c| Wanted {
                name: c.name.clone(),
                allocation: c.resources.allocated.clone(),
                restart_on: RestartOn::default(),
            })
            .chain(spec.containers.iter().map(|c| Wanted {
                name: c.name.clone(),
                allocation: Allocation::of(c),
                restart_on: RestartOn::of(c),
            }))
            .collect();
        self.resize(&allocated, &wanted, Some(pod));
    }

    /// Whether a resize the node refused waits to be tried again.
    pub(super) fn resize_failed(&self) -> bool {
        self.resize_reason() == Some("Error")
    }

    fn resize_reason(&self) -> Option<&str> {
        self.observed.resize.as_ref()?.reason.as_deref()
    }

    /// Whether a resize waits to be tried again: refused by the node (`Error`), or not
    /// fitting beside the pods there now (`Deferred`).
    pub(super) fn resize_waiting(&self) -> bool {
        matches!(self.resize_reason(), Some("Error" | "Deferred"))
    }

    /// Tries a waiting resize again; `latest` is the pod's latest object.
    pub(super) fn retry_waiting_resize(&mut self, latest: &Pod) {
        if self.resize_reason() == Some("Deferred") {
            self.resize_to(latest);
        } else {
            self.retry_resize();
        }
    }

    /// Tries a refused resize again: from what the cgroups have to what is allocated
    /// (containers waiting for their restart are left to it).
    fn retry_resize(&mut self) {
        if self.observed.terminating.is_some() {
            return;
        }
        let containers = || {
            self.facts
                .init_containers
                .iter()
                .chain(&self.facts.containers)
        };
        let applied: Vec<(String, Allocation)> = containers()
            .map(|c| (c.name.clone(), c.resources.applied.clone()))
            .collect();
        let wanted: Vec<Wanted> = containers()
            .map(|c| Wanted {
                name: c.name.clone(),
                allocation: if c.resources.restart_pending {
                    c.resources.applied.clone()
                } else {
                    c.resources.allocated.clone()
                },
                restart_on: RestartOn::default(),
            })
            .collect();
        if applied
            .iter()
            .zip(&wanted)
            .all(|((_, a), w)| *a == w.allocation)
        {
            self.observed.resize = None;
            return;
        }
        self.resize(&applied, &wanted, None);
    }

    /// Resizes from `from` to `wanted`: a new resize of `resized` (the pod object asking
    /// for it), or the retry of one allocated already (`None`).
    fn resize(&mut self, from: &[(String, Allocation)], wanted: &[Wanted], resized: Option<&Pod>) {
        let generation = match resized {
            Some(pod) => pod.metadata.generation,
            None => self
                .observed
                .resize
                .as_ref()
                .and_then(|r| r.observed_generation),
        };
        // Infeasible beyond the node's allocatable (the kubelet's check; what other pods
        // hold now would make it Deferred there, which podhost does not yet tell apart).
        let node = self.ctx.admission.node();
        let room = NodeRoom {
            cpu_milli: node.allocatable.cpu_millis,
            memory: node.allocatable.memory_bytes,
        };
        match decide_resize(self.pod.qos, from, wanted, Some(room)) {
            // Nothing to change: an infeasible resize is no longer wanted (a refused one
            // still waits for its retry).
            ResizeDecision::Unchanged => {
                if !self.resize_failed() {
                    self.observed.resize = None;
                }
            }
            ResizeDecision::Infeasible(message) => {
                self.event(EventKind::Warning, "ResizeInfeasible", message.clone());
                self.observed.resize = Some(ResizeCondition::infeasible(message, generation));
            }
            ResizeDecision::Apply { steps, restart } => {
                if let Some(pod) = resized
                    && let Err(short) = self.ctx.admission.resize(
                        &self.pod.uid,
                        pod,
                        &super::super::pod::terminal_pods(&self.ctx),
                    )
                {
                    let short = short.to_string();
                    if self.resize_reason() != Some("Deferred") {
                        self.event(EventKind::Normal, "ResizeDeferred", short.clone());
                    }
                    self.observed.resize = Some(ResizeCondition::deferred(short, generation));
                    return;
                }
                self.allocate(wanted, &restart);
                if !self.ctx.cgroups.can_resize() {
                    self.event(
                        EventKind::Warning,
                        "ResizeNotEnforced",
                        "the pod's new resources are allocated, but this host enforces no \
                         cgroup limits (see podhost validate)"
                            .to_string(),
                    );
                }
                let mut failed = None;
                for step in &steps {
                    if let Err(e) =
                        self.ctx
                            .cgroups
                            .apply_resize_step(self.pod.qos, &self.pod.uid, step)
                    {
                        failed = Some(e.to_string());
                        break;
                    }
                }
                match failed {
                    Some(error) => {
                        tracing::warn!(pod = %self.pod.name, %error, "resize not applied");
                        // Once per refused resize, not at each retry.
                        if !self.resize_failed() {
                            self.event(EventKind::Warning, "ResizeError", error.clone());
                        }
                        self.observed.resize =
                            Some(ResizeCondition::in_progress(Some(error), generation));
                    }
                    None => {
                        self.applied_all_but(&restart);
                        self.save_applied();
                        tracing::info!(pod = %self.pod.name, restarted = ?restart, "pod resized");
                        self.observed.resize = None;
                    }
                }
            }
        }
    }

    /// Takes `wanted` as the pod's allocation; the containers in `restart` are restarted
    /// with it by the core.
    fn allocate(&mut self, wanted: &[Wanted], restart: &[String]) {
        for c in self
            .facts
            .init_containers
            .iter_mut()
            .chain(self.facts.containers.iter_mut())
        {
            if let Some(w) = wanted.iter().find(|w| w.name == c.name) {
                c.resources.allocated = w.allocation.clone();
            }
            c.resources.restart_pending |= restart.contains(&c.name);
        }
    }

    /// Records what the pod's cgroups have now (atomically).
    pub(super) fn save_applied(&self) {
        let record: AllocatedRecord = self
            .facts
            .init_containers
            .iter()
            .chain(&self.facts.containers)
            .map(|c| (c.name.clone(), c.resources.applied.clone()))
            .collect();
        let path = self.ctx.layout.pod_dir(&self.pod.uid).join(APPLIED_FILE);
        if let Err(e) = write_json_atomic(&path, &record) {
            tracing::warn!(pod = %self.pod.name, error = %e, "cannot record the pod's resized resources");
        }
    }

    /// The cgroups of every container but those in `restart` have their allocation now.
    fn applied_all_but(&mut self, restart: &[String]) {
        for c in self.facts.containers.iter_mut() {
            if c.kind == ContainerKind::Regular && !restart.contains(&c.name) {
                c.resources.applied = c.resources.allocated.clone();
            }
        }
    }

    fn event(&self, kind: EventKind, reason: &str, message: String) {
        self.ctx.store.pod_event(
            &self.pod.uid,
            kind,
            reason,
            &format!("pod/{}", self.pod.name),
            message,
        );
    }
}
