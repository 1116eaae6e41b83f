//! Picks up where a previous daemon left off: each container's newest attempt dir tells
//! whether it runs (its shim is adopted) or how it ended; the attempt before it gives
//! `lastState`, and the pod's record its published phase and conditions.

use k8s_openapi::api::core::v1::ContainerState;

use super::context::{Ctx, PodInfo};
use super::exit::{termination, termination_of};
use super::report::{ExitFuture, Running};
use podhost_disk::read_json;
use podhost_disk::records::{EXIT_FILE, ExitRecord, TERMINATED_FILE};
use podhost_disk::{attempts, container_id};
use podhost_model::backoff::Backoff;
use podhost_model::k8s_time::from_k8s;
use podhost_model::phase::PodPhase;
use podhost_model::podsync::{
    ContainerKind, ContainerObserved, PodFacts, PodObserved, Termination,
};
use podhost_runtime::shim_client::{self, Adopted};
use podhost_runtime::signals::parse_signal;

/// A container found running: what the sync loop must keep and await.
pub struct AdoptedRun {
    pub container: String,
    pub run: Running,
    pub exit: ExitFuture,
}

/// The observed state of `pod` as the disk and the live shims tell it.
pub async fn adopt_pod(
    ctx: &Ctx,
    pod: &PodInfo,
    facts: &PodFacts,
) -> (PodObserved, Vec<AdoptedRun>) {
    let mut observed = PodObserved::with_init(
        facts.init_containers.iter().map(|c| c.name.clone()),
        facts.containers.iter().map(|c| c.name.clone()),
    );
    observed.ephemeral_containers = facts
        .ephemeral_containers
        .iter()
        .map(|c| ContainerObserved::new(&c.name))
        .collect();
    if let Some(record) = ctx.store.get(&pod.uid) {
        let status = record.status;
        observed.phase = status.phase.as_deref().and_then(phase_of);
        observed.conditions = status.conditions.unwrap_or_default();
        observed.start_time = status.start_time.as_ref().map(from_k8s);
        // An evicted pod stays evicted across daemon restarts (its containers may be
        // gone already: nothing may start them again until its manifest changes).
        if observed.phase == Some(PodPhase::Failed) && status.reason.as_deref() == Some("Evicted") {
            observed.on_evicted(
                chrono::Utc::now(),
                status.message.unwrap_or_default(),
                podhost_model::podsync::EVICTION_GRACE,
            );
        }
    }
    let mut running = Vec::new();
    for c in observed
        .init_containers
        .iter_mut()
        .chain(observed.containers.iter_mut())
        .chain(observed.ephemeral_containers.iter_mut())
    {
        if let Some(run) = adopt_container(ctx, pod, c).await {
            running.push(run);
        }
    }
    // Regular containers ran: the pod was initialized, so every sidecar had started (a
    // restarted sidecar must not hold the pod back in initialization again).
    if observed.containers.iter().any(|c| c.next_attempt > 0) {
        for (spec, c) in facts
            .init_containers
            .iter()
            .zip(&mut observed.init_containers)
        {
            c.started_once |= spec.kind == ContainerKind::Sidecar;
        }
    }
    (observed, running)
}

fn phase_of(s: &str) -> Option<PodPhase> {
    [
        PodPhase::Pending,
        PodPhase::Running,
        PodPhase::Succeeded,
        PodPhase::Failed,
    ]
    .into_iter()
    .find(|p| p.as_str() == s)
}

async fn adopt_container(
    ctx: &Ctx,
    pod: &PodInfo,
    c: &mut ContainerObserved,
) -> Option<AdoptedRun> {
    let dir = ctx.layout.container_dir(&pod.uid, &c.name);
    loop {
        let &last = attempts(&dir).last()?;
        let bundle = ctx.layout.attempt_dir(&pod.uid, &c.name, last);
        let adopted = shim_client::adopt(&bundle).await;
        if matches!(adopted, Adopted::NeverStarted) {
            // Its dir is gone: the attempt before it (if any) is the newest.
            continue;
        }
        c.backoff = Backoff::after_restarts(&ctx.backoff, last);
        c.next_attempt = last.saturating_add(1);
        c.restart_count = last;
        c.image_id = std::fs::read_to_string(bundle.join(podhost_disk::records::IMAGE_REF_FILE))
            .unwrap_or_default()
            .trim()
            .to_string();
        // Absent in attempts made before the record existed: taken as unchanged.
        c.started_image =
            std::fs::read_to_string(bundle.join(podhost_disk::records::IMAGE_NAME_FILE))
                .ok()
                .filter(|image| !image.is_empty());
        if last > 0 {
            c.last_termination = recorded_end(ctx, pod, &c.name, last - 1);
        }
        let id = container_id(&pod.uid, &c.name, last);
        return match adopted {
            Adopted::Running(handle) => {
                tracing::info!(pod = %pod.name, container = %c.name, pid = handle.started.init_pid, "adopted running container");
                c.on_started(last, handle.started.started_at, format!("podhost://{id}"));
                let run = Running {
                    started: handle.started.clone(),
                    init: handle.init.clone(),
                    attempt: last,
                    container_id: id,
                    stop_signal: stop_signal_of(&bundle),
                };
                Some(AdoptedRun {
                    container: c.name.clone(),
                    run,
                    exit: Box::pin(handle.wait()),
                })
            }
            Adopted::Exited(record) => {
                c.container_id = Some(format!("podhost://{id}"));
                let end = termination_of(ctx, pod, &c.name, last, &record).await;
                c.on_exited(last, end, true);
                None
            }
            Adopted::NeverStarted => None,
        };
    }
}

/// How attempt `attempt` ended, as it was shown (its verdict file), else as its exit
/// record says.
fn recorded_end(ctx: &Ctx, pod: &PodInfo, container: &str, attempt: u32) -> Option<Termination> {
    let bundle = ctx.layout.attempt_dir(&pod.uid, container, attempt);
    let id = Some(format!(
        "podhost://{}",
        container_id(&pod.uid, container, attempt)
    ));
    if let Ok(Some(state)) = read_json::<ContainerState>(&bundle.join(TERMINATED_FILE))
        && let Some(t) = state.terminated
    {
        let started = t.started_at.as_ref().map(from_k8s).unwrap_or_default();
        return Some(Termination {
            exit_code: t.exit_code,
            signal: t.signal,
            started_at: started,
            finished_at: t.finished_at.as_ref().map(from_k8s).unwrap_or(started),
            reason: t.reason,
            message: t.message,
            container_id: t.container_id.or(id),
        });
    }
    let record = read_json::<ExitRecord>(&bundle.join(EXIT_FILE)).ok()??;
    let (reason, message) = match (&record.unknown, record.oom_killed) {
        (Some(msg), _) => (
            Some("ContainerStatusUnknown".to_string()),
            Some(msg.clone()),
        ),
        (None, true) => (Some("OOMKilled".to_string()), None),
        (None, false) => (None, None),
    };
    Some(termination(&record, id, reason, message))
}

/// The stop signal of an adopted container, as `prepare_attempt` recorded it.
fn stop_signal_of(bundle: &std::path::Path) -> nix::sys::signal::Signal {
    std::fs::read_to_string(bundle.join("stop-signal"))
        .ok()
        .and_then(|s| parse_signal(&s))
        .unwrap_or(nix::sys::signal::Signal::SIGTERM)
}
