//! One container's life inside its pod: adopt or start, wait, restart with
//! CrashLoopBackOff, and stop when the pod terminates.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use k8s_openapi::api::core::v1::{Container, ContainerState};
use tokio::sync::watch;

use super::context::{Ctx, PodInfo};
use super::kill::{Running, stop_container};
use super::prepare::prepare_attempt;
use super::state::{ContainerView, running, terminated, waiting};
use crate::disk::records::IMAGE_REF_FILE;
use crate::disk::records::{EXIT_FILE, ExitRecord, TERMINATED_FILE};
use crate::disk::{attempts, container_id};
use crate::disk::{read_json, write_json_atomic};
use crate::model::backoff::Backoff;
use crate::runtime::shim_client::{self, Adopted, ShimGone, ShimHandle};
use crate::status::EventKind;

/// The pod worker's order: `Some(grace)` once the pod terminates.
pub type TermRx = watch::Receiver<Option<Duration>>;

type ExitFuture = Pin<Box<dyn std::future::Future<Output = (ExitRecord, ShimGone)> + Send>>;

enum Step {
    Start,
    Wait(Running, ExitFuture),
    Exited {
        record: ExitRecord,
        reason: Option<&'static str>,
        message: Option<String>,
        /// The shim's clean-up, awaited before the container is started again.
        gone: Option<ShimGone>,
    },
    Done,
}

/// How long the shim's clean-up (cgroup and rootfs removal) may take before the next
/// start or the pod's removal goes ahead anyway.
const SHIM_CLEANUP_TIMEOUT: Duration = Duration::from_secs(60);

/// Supervises container `c` of `pod` until the pod terminates (or, for a container that
/// is not restarted, until it has exited).
pub async fn supervise(ctx: Arc<Ctx>, pod: Arc<PodInfo>, c: Container, mut term: TermRx) {
    let mut sup = Supervisor {
        view: ContainerView::new(
            &c.name,
            c.image.as_deref().unwrap_or_default(),
            "ContainerCreating",
        ),
        next_attempt: 0,
        backoff: Backoff::default(),
        image_backoff: Backoff::default(),
        config_backoff: Backoff::default(),
        lease: None,
        ctx,
        pod,
        c,
    };
    let mut step = sup.adopt().await;
    loop {
        step = match step {
            Step::Start => sup.start(&mut term).await,
            Step::Wait(run, exit) => sup.wait(run, exit, &mut term).await,
            Step::Exited {
                record,
                reason,
                message,
                gone,
            } => {
                sup.after_exit(record, reason, message, gone, &mut term)
                    .await
            }
            Step::Done => return,
        };
    }
}

struct Supervisor {
    ctx: Arc<Ctx>,
    pod: Arc<PodInfo>,
    c: Container,
    view: ContainerView,
    /// The attempt number of the next start; also the restart count it will have.
    next_attempt: u32,
    backoff: Backoff,
    image_backoff: Backoff,
    /// Between tries of a container that cannot be configured.
    config_backoff: Backoff,
    /// Keeps the image from image GC while this container may use it.
    lease: Option<crate::image::gc::ImageLease>,
}

fn terminating(term: &TermRx) -> Option<Duration> {
    *term.borrow()
}

impl Supervisor {
    fn publish(&self) {
        self.view.publish(&self.ctx.store, &self.pod.uid);
    }

    fn event(&self, kind: EventKind, reason: &str, message: String) {
        self.ctx.store.pod_event(
            &self.pod.uid,
            kind,
            reason,
            &self.pod.object(&self.c.name),
            message,
        );
    }

    /// Picks up where a previous daemon left off: the newest attempt dir tells, and the
    /// attempt before it gives `lastState`.
    async fn adopt(&mut self) -> Step {
        let dir = self.ctx.layout.container_dir(&self.pod.uid, &self.c.name);
        loop {
            let Some(&last) = attempts(&dir).last() else {
                self.publish();
                return Step::Start;
            };
            let bundle = self
                .ctx
                .layout
                .attempt_dir(&self.pod.uid, &self.c.name, last);
            let adopted = shim_client::adopt(&bundle).await;
            if matches!(adopted, Adopted::NeverStarted) {
                // Its dir is gone: the attempt before it (if any) is the newest.
                continue;
            }
            self.next_attempt = last + 1;
            self.view.restart_count = last as i32;
            // Rebuild the back-off as it stood after `last` restarts.
            for _ in 0..last {
                self.backoff.next_delay(&self.ctx.backoff, Duration::ZERO);
            }
            let id = container_id(&self.pod.uid, &self.c.name, last);
            self.view.container_id = Some(format!("podhost://{id}"));
            self.view.image_id = std::fs::read_to_string(bundle.join(IMAGE_REF_FILE))
                .unwrap_or_default()
                .trim()
                .to_string();
            if last > 0 {
                self.view.last_state = self.recorded_end(last - 1);
            }
            return match adopted {
                Adopted::Running(handle) => {
                    tracing::info!(pod = %self.pod.name, container = %self.c.name, pid = handle.started.init_pid, "adopted running container");
                    self.view.state = running(handle.started.started_at);
                    self.publish();
                    let run = Running {
                        started: handle.started.clone(),
                        container_id: id,
                        stop_signal: stop_signal_of(&bundle),
                    };
                    Step::Wait(run, wait_boxed(*handle))
                }
                Adopted::Exited(record) => Step::Exited {
                    record,
                    reason: None,
                    message: None,
                    gone: None,
                },
                Adopted::NeverStarted => unreachable!("handled above"),
            };
        }
    }

    /// The terminated state attempt `attempt` ended with, as it was shown (its verdict
    /// file), else as its exit record says.
    fn recorded_end(&self, attempt: u32) -> Option<ContainerState> {
        let bundle = self
            .ctx
            .layout
            .attempt_dir(&self.pod.uid, &self.c.name, attempt);
        if let Ok(Some(state)) = read_json::<ContainerState>(&bundle.join(TERMINATED_FILE)) {
            return Some(state);
        }
        let record = read_json::<ExitRecord>(&bundle.join(EXIT_FILE)).ok()??;
        let id = container_id(&self.pod.uid, &self.c.name, attempt);
        let (reason, message) = verdict_of(&record);
        Some(terminated(
            &record,
            Some(format!("podhost://{id}")),
            reason,
            message,
        ))
    }

    async fn start(&mut self, term: &mut watch::Receiver<Option<Duration>>) -> Step {
        if terminating(term).is_some() {
            return Step::Done;
        }
        let image_ref = self.c.image.clone().unwrap_or_default();
        // Held for the container's whole life: image GC never takes an image a
        // starting (or exited, not yet collected) container selected (kubernetes#18140).
        if self.lease.is_none() {
            self.lease = Some(self.ctx.leases.lease(&image_ref));
        }
        let image = match self.ensure_image(&image_ref).await {
            Ok(img) => img,
            Err(message) => return self.image_missing(message, term).await,
        };
        self.image_backoff = Backoff::default();
        let _ = self.ctx.images.touch(&image.reference);
        self.view.image_id = image.manifest_digest.clone();
        let attempt = self.next_attempt;
        let id = container_id(&self.pod.uid, &self.c.name, attempt);
        // Off the async threads: it reads the image's files and writes the bundle.
        let prepared = {
            let (ctx, pod, c) = (self.ctx.clone(), self.pod.clone(), self.c.clone());
            tokio::task::spawn_blocking(move || prepare_attempt(&ctx, &pod, &c, &image, attempt))
                .await
                .unwrap_or_else(|e| {
                    Err(crate::runtime::RuntimeError::Spec {
                        container: self.c.name.clone(),
                        message: format!("preparing the container panicked: {e}"),
                    })
                })
        };
        let prepared = match prepared {
            Ok(p) => p,
            Err(e) => return self.config_error(attempt, e.to_string(), term).await,
        };
        self.config_backoff = Backoff::default();
        self.next_attempt += 1;
        match shim_client::spawn(&self.ctx.exe, &prepared.shim).await {
            Ok(handle) => {
                self.view.restart_count = attempt as i32;
                self.view.container_id = Some(format!("podhost://{id}"));
                self.view.state = running(handle.started.started_at);
                self.publish();
                self.event(
                    EventKind::Normal,
                    "Started",
                    format!("Started container {}", self.c.name),
                );
                // What the shim could not apply (e.g. oom_score_adj without CAP_SYS_RESOURCE).
                for n in crate::runtime::not_applied::read(&handle.bundle) {
                    self.event(EventKind::Warning, &n.reason, n.message());
                }
                let run = Running {
                    started: handle.started.clone(),
                    container_id: id,
                    stop_signal: prepared.stop_signal,
                };
                Step::Wait(run, wait_boxed(handle))
            }
            Err(e) => {
                self.event(EventKind::Warning, "Failed", format!("Error: {e}"));
                self.start_failed(attempt, "StartError", e.to_string())
            }
        }
    }

    /// The container cannot be configured (its user, securityContext or image): as the
    /// kubelet, it stays Waiting with `CreateContainerConfigError` — not an exit, not a
    /// restart — and the start is tried again after a back-off (10 s doubling to the
    /// crash-loop maximum), or at once when an image is loaded.
    async fn config_error(
        &mut self,
        attempt: u32,
        message: String,
        term: &mut watch::Receiver<Option<Duration>>,
    ) -> Step {
        // Nothing ran in it; the number is used by the next try.
        let dir = self
            .ctx
            .layout
            .attempt_dir(&self.pod.uid, &self.c.name, attempt);
        if let Err(e) = std::fs::remove_dir_all(&dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(error = %e, dir = %dir.display(), "cannot remove an unused attempt dir");
        }
        let delay = match self
            .config_backoff
            .next_delay(&self.ctx.backoff, Duration::ZERO)
        {
            d if d.is_zero() => self.ctx.backoff.initial,
            d => d,
        };
        self.view.state = waiting("CreateContainerConfigError", Some(message.clone()));
        self.publish();
        self.event(EventKind::Warning, "Failed", format!("Error: {message}"));
        let mut images = self.ctx.images_changed.clone();
        tokio::select! {
            _ = term.wait_for(|t| t.is_some()) => Step::Done,
            _ = images.changed() => Step::Start,
            _ = tokio::time::sleep(delay) => Step::Start,
        }
    }

    /// A start that failed counts as an exit with code 128 (as containerd reports it), so
    /// the restart policy and back-off apply.
    fn start_failed(&mut self, attempt: u32, reason: &'static str, message: String) -> Step {
        self.view.restart_count = attempt as i32;
        let now = Utc::now();
        let record = ExitRecord {
            exit_code: 128,
            signal: None,
            started_at: now,
            finished_at: now,
            ..Default::default()
        };
        // The attempt counts as a restart: its end is recorded as a shim's would be, so
        // that a restarted daemon neither loses it nor takes the number again.
        let bundle = self
            .ctx
            .layout
            .attempt_dir(&self.pod.uid, &self.c.name, attempt);
        if bundle.exists()
            && let Err(e) = write_json_atomic(&bundle.join(EXIT_FILE), &record)
        {
            tracing::warn!(error = %e, "cannot record a failed start");
        }
        Step::Exited {
            record,
            reason: Some(reason),
            message: Some(message),
            gone: None,
        }
    }

    /// The image per imagePullPolicy: Always pulls, IfNotPresent pulls when missing,
    /// Never only uses the store. Errors are the status message.
    async fn ensure_image(&self, image_ref: &str) -> Result<crate::image::ResolvedImage, String> {
        let resolve = || {
            let images = self.ctx.images.clone();
            let lookup = image_ref.to_string();
            async move {
                tokio::task::spawn_blocking(move || images.resolve(&lookup))
                    .await
                    .map_err(|e| e.to_string())
                    .and_then(|r| r.map_err(|e| e.to_string()))
            }
        };
        let present = resolve().await;
        // A localhost/ image (podman's convention) is local only: never pulled,
        // whatever the policy says or `:latest` implies.
        let local_only = crate::image::is_local_only(image_ref);
        let policy = match self.c.image_pull_policy.as_deref() {
            _ if local_only => "Never",
            Some(p) => p,
            None => "IfNotPresent",
        };
        let pull = match policy {
            "Always" => true,
            "Never" => false,
            _ => present.is_err(),
        };
        if !pull {
            return present.map_err(|_| match local_only {
                true => format!(
                    "Container image is not present: {}",
                    crate::image::local_only_hint(image_ref)
                ),
                false => format!(
                    "Container image \"{image_ref}\" is not present with pull policy of {policy}"
                ),
            });
        }
        self.event(
            EventKind::Normal,
            "Pulling",
            format!("Pulling image \"{image_ref}\""),
        );
        let started = std::time::Instant::now();
        match self.ctx.puller.pull(image_ref, None).await {
            Ok(reference) => {
                self.event(
                    EventKind::Normal,
                    "Pulled",
                    format!(
                        "Successfully pulled image \"{reference}\" in {:.3}s",
                        started.elapsed().as_secs_f64()
                    ),
                );
                resolve().await
            }
            Err(e) => Err(format!("Failed to pull image \"{image_ref}\": {e}")),
        }
    }

    /// The image is not usable: ErrImagePull (or ErrImageNeverPull), then
    /// ImagePullBackOff until the next attempt, with the kubelet's back-off. Loading an
    /// image through the daemon ends the wait at once.
    async fn image_missing(
        &mut self,
        message: String,
        term: &mut watch::Receiver<Option<Duration>>,
    ) -> Step {
        let image_ref = self.c.image.clone().unwrap_or_default();
        let never = self.c.image_pull_policy.as_deref() == Some("Never")
            || crate::image::is_local_only(&image_ref);
        let delay = match self
            .image_backoff
            .next_delay(&self.ctx.backoff, Duration::ZERO)
        {
            d if d.is_zero() => self.ctx.backoff.initial,
            d => d,
        };
        self.view.state = waiting(
            if never {
                "ErrImageNeverPull"
            } else {
                "ErrImagePull"
            },
            Some(message.clone()),
        );
        self.publish();
        self.event(EventKind::Warning, "Failed", message.clone());
        let mut images = self.ctx.images_changed.clone();
        let shown = Duration::from_secs(1).min(delay);
        tokio::select! {
            _ = term.wait_for(|t| t.is_some()) => return Step::Done,
            _ = images.changed() => return Step::Start,
            _ = tokio::time::sleep(shown) => {}
        }
        if !never {
            self.view.state = waiting(
                "ImagePullBackOff",
                Some(format!("Back-off pulling image \"{image_ref}\": {message}")),
            );
            self.publish();
            self.event(
                EventKind::Normal,
                "BackOff",
                format!("Back-off pulling image \"{image_ref}\""),
            );
        }
        tokio::select! {
            _ = term.wait_for(|t| t.is_some()) => Step::Done,
            _ = images.changed() => Step::Start,
            _ = tokio::time::sleep(delay.saturating_sub(shown)) => Step::Start,
        }
    }

    async fn wait(
        &mut self,
        run: Running,
        mut exit: ExitFuture,
        term: &mut watch::Receiver<Option<Duration>>,
    ) -> Step {
        let (record, gone) = tokio::select! {
            rec = &mut exit => rec,
            Ok(grace) = wait_terminating(term) => {
                stop_container(&self.ctx, &self.pod, &self.c, &run, grace, &mut exit).await
            }
        };
        Step::Exited {
            record,
            reason: None,
            message: None,
            gone: Some(gone),
        }
    }

    /// `OOMKilled: tail (pid 142) at memory limit 32Mi, peak 32Mi`: the victim as the
    /// kernel named it (when its report arrives within a second), the limit and the peak.
    async fn oom_message(&self, record: &ExitRecord) -> String {
        let cgroup = self
            .ctx
            .cgroups
            .container_path(self.pod.qos, &self.pod.uid, &self.c.name);
        let suffix = cgroup
            .find("/kubepods")
            .map(|i| cgroup[i..].to_string())
            .unwrap_or(cgroup);
        let ran_for = (Utc::now() - record.started_at)
            .to_std()
            .unwrap_or_default();
        let since = std::time::Instant::now()
            .checked_sub(ran_for)
            .unwrap_or_else(std::time::Instant::now);
        let victim = self
            .ctx
            .oom_victims
            .wait_for(&suffix, since, Duration::from_secs(1))
            .await;
        let mut msg = String::from("OOMKilled:");
        if let Some(v) = victim {
            msg.push_str(&format!(" {} (pid {})", v.comm, v.pid));
        }
        let fmt = |b: u64| crate::model::quantity::format_bytes(b as i64);
        match record.memory_max {
            Some(max) => msg.push_str(&format!(" at memory limit {}", fmt(max))),
            None => msg.push_str(" with no memory limit of its own"),
        }
        if let Some(peak) = record.memory_peak {
            msg.push_str(&format!(", peak {}", fmt(peak)));
        }
        msg
    }

    /// Keeps the terminated state as shown beside the attempt's records, for `lastState`
    /// after a daemon restart. Not for a start that failed: that attempt dir may be gone.
    fn record_end(&self, state: &ContainerState) {
        let attempt = self.view.restart_count.max(0) as u32;
        let bundle = self
            .ctx
            .layout
            .attempt_dir(&self.pod.uid, &self.c.name, attempt);
        if !bundle.join(EXIT_FILE).exists() {
            return;
        }
        if let Err(e) = write_json_atomic(&bundle.join(TERMINATED_FILE), state) {
            tracing::warn!(error = %e, "cannot record the container's terminated state");
        }
    }

    async fn after_exit(
        &mut self,
        record: ExitRecord,
        reason: Option<&'static str>,
        message: Option<String>,
        gone: Option<ShimGone>,
        term: &mut watch::Receiver<Option<Duration>>,
    ) -> Step {
        let (reason, message) = match (reason, record.oom_killed) {
            (None, _) if record.unknown.is_some() => verdict_of(&record),
            (None, true) => {
                let message = self.oom_message(&record).await;
                self.event(EventKind::Warning, "OOMKilled", message.clone());
                (Some("OOMKilled"), Some(message))
            }
            other => (other.0, message),
        };
        let state = terminated(&record, self.view.container_id.clone(), reason, message);
        self.record_end(&state);
        tracing::info!(pod = %self.pod.name, container = %self.c.name, exit_code = record.exit_code,
            finished_at = %record.finished_at, "container exited");
        // The exit is visible at once; then the shim must have released the cgroup and
        // rootfs before anything reuses them (a restart, or the pod's removal).
        self.view.state = state.clone();
        self.publish();
        if let Some(gone) = gone {
            if tokio::time::timeout(SHIM_CLEANUP_TIMEOUT, gone)
                .await
                .is_err()
            {
                tracing::warn!(pod = %self.pod.name, container = %self.c.name,
                    "shim clean-up takes over {SHIM_CLEANUP_TIMEOUT:?}; going on");
            }
        }
        if terminating(term).is_some() || !self.pod.policy.should_restart(record.exit_code) {
            return Step::Done;
        }
        let ran_for = (record.finished_at - record.started_at)
            .to_std()
            .unwrap_or_default();
        let delay = self.backoff.next_delay(&self.ctx.backoff, ran_for);
        let since_exit = (Utc::now() - record.finished_at)
            .to_std()
            .unwrap_or_default();
        let wait = delay.saturating_sub(since_exit);
        self.view.last_state = Some(state);
        if wait.is_zero() {
            return Step::Start;
        }
        let msg = format!(
            "back-off {}s restarting failed container={} pod={}_{}({})",
            delay.as_secs(),
            self.c.name,
            self.pod.name,
            self.pod.namespace,
            self.pod.uid
        );
        self.view.state = waiting("CrashLoopBackOff", Some(msg.clone()));
        self.publish();
        self.event(EventKind::Warning, "BackOff", msg);
        tokio::select! {
            _ = term.wait_for(|t| t.is_some()) => Step::Done,
            _ = tokio::time::sleep(wait) => Step::Start,
        }
    }
}

/// The reason and message of an exit record that carries no daemon verdict: a lost
/// container is `ContainerStatusUnknown`, an OOM kill `OOMKilled`, else by the code.
fn verdict_of(record: &ExitRecord) -> (Option<&'static str>, Option<String>) {
    match (&record.unknown, record.oom_killed) {
        (Some(msg), _) => (Some("ContainerStatusUnknown"), Some(msg.clone())),
        (None, true) => (Some("OOMKilled"), None),
        (None, false) => (None, None),
    }
}

/// Resolves with the grace period once the pod terminates.
async fn wait_terminating(term: &mut TermRx) -> Result<Duration, watch::error::RecvError> {
    let grace = term.wait_for(|t| t.is_some()).await?;
    Ok(grace.unwrap_or_default())
}

fn wait_boxed(handle: ShimHandle) -> ExitFuture {
    Box::pin(handle.wait())
}

/// The stop signal of an adopted container, as `prepare_attempt` recorded it.
fn stop_signal_of(bundle: &std::path::Path) -> nix::sys::signal::Signal {
    std::fs::read_to_string(bundle.join("stop-signal"))
        .ok()
        .and_then(|s| crate::runtime::signals::parse_signal(&s))
        .unwrap_or(nix::sys::signal::Signal::SIGTERM)
}
