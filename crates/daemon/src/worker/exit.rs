//! Observes a container's end: the exit record becomes a [`Termination`] (OOM victim
//! named, lost containers marked), is kept beside the attempt, and is reported; then the
//! shim's clean-up is awaited and reported.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;

use super::context::{Ctx, PodInfo};
use super::report::{ExitFuture, Report, ReportSender};
use super::termination_message::termination_message;
use podhost_disk::records::{EXIT_FILE, ExitRecord, TERMINATED_FILE};
use podhost_disk::write_json_atomic;
use podhost_model::podsync::{Termination, terminated_state};
use podhost_runtime::shim_client::{ShimExit, ShimGone, record_reported_exit};
use podhost_status::EventKind;

/// How long the shim's clean-up (cgroup and rootfs removal) may take before the next
/// start or the pod's removal goes ahead anyway.
const SHIM_CLEANUP_TIMEOUT: Duration = Duration::from_secs(60);

/// Awaits the exit of attempt `attempt` of `container`, then its record's durability
/// and its shim's clean-up.
pub async fn watch(
    ctx: Arc<Ctx>,
    pod: Arc<PodInfo>,
    container: String,
    attempt: u32,
    exit: ExitFuture,
    reports: ReportSender,
) {
    let ShimExit {
        record,
        recorded,
        gone,
    } = exit.await;
    let termination = describe_termination(&ctx, &pod, &container, attempt, &record).await;
    tracing::info!(pod = %pod.name, container = %container, exit_code = record.exit_code,
        finished_at = %record.finished_at, "container exited");
    // The exit is shown as soon as the shim reports it, possibly before its `exit.json`
    // is durable: what only shows it may be lost in a crash and is derived again. What
    // must survive one waits for the record: the verdict file (written below), the
    // pod's terminal phase (`Report::Recorded`), the next attempt and the removal of
    // the attempt's state (`Report::Released`, sent last).
    let _ = reports.send(Report::Exited {
        container: container.clone(),
        attempt,
        termination: termination.clone(),
        released: false,
        recorded: false,
    });
    let bundle = ctx.layout.attempt_dir(&pod.uid, &container, attempt);
    let mut gone = Some(gone);
    if !recorded.await {
        // The shim did not confirm the record: it died after its report, or its write
        // failed. Once it is gone, the daemon records the exit it was told (and releases
        // what its clean-up would have); a daemon killed before that finds no record and
        // reports the container lost, as before this report existed.
        let finished = await_gone(&pod, &container, gone.take()).await;
        let (b, r) = (bundle.clone(), record.clone());
        if let Err(e) =
            tokio::task::spawn_blocking(move || record_reported_exit(&b, &r, finished)).await
        {
            tracing::warn!(error = %e, pod = %pod.name, container = %container, "recording the reported exit panicked");
        }
    }
    let _ = reports.send(Report::Recorded {
        container: container.clone(),
    });
    let recorded = tokio::task::spawn_blocking(move || record_termination(&bundle, &termination));
    await_gone(&pod, &container, gone).await;
    if let Err(e) = recorded.await {
        tracing::warn!(error = %e, pod = %pod.name, container = %container, "recording the terminated state panicked");
    }
    let _ = reports.send(Report::Released { container });
}

/// Awaits the shim's end (its clean-up), at most [`SHIM_CLEANUP_TIMEOUT`]; whether it
/// ended.
async fn await_gone(pod: &PodInfo, container: &str, gone: Option<ShimGone>) -> bool {
    let Some(gone) = gone else { return true };
    if tokio::time::timeout(SHIM_CLEANUP_TIMEOUT, gone)
        .await
        .is_err()
    {
        tracing::warn!(pod = %pod.name, container = %container,
            "shim clean-up takes over {SHIM_CLEANUP_TIMEOUT:?}; going on");
        return false;
    }
    true
}

/// How the instance ended, as shown: a lost container is `ContainerStatusUnknown`, an
/// OOM kill `OOMKilled` with its victim named (and an event). Kept beside the attempt's
/// records so that a restarted daemon shows the same `lastState`.
pub async fn termination_of(
    ctx: &Ctx,
    pod: &PodInfo,
    container: &str,
    attempt: u32,
    record: &ExitRecord,
) -> Termination {
    let termination = describe_termination(ctx, pod, container, attempt, record).await;
    record_termination(
        &ctx.layout.attempt_dir(&pod.uid, container, attempt),
        &termination,
    );
    termination
}

/// [`termination_of`] without writing the verdict file.
async fn describe_termination(
    ctx: &Ctx,
    pod: &PodInfo,
    container: &str,
    attempt: u32,
    record: &ExitRecord,
) -> Termination {
    let id = podhost_disk::container_id(&pod.uid, container, attempt);
    let (reason, message) = match (&record.unknown, record.oom_killed) {
        (Some(msg), _) => (
            Some("ContainerStatusUnknown".to_string()),
            Some(msg.clone()),
        ),
        (None, true) => {
            let message = oom_message(ctx, pod, container, record).await;
            ctx.store.pod_event(
                &pod.uid,
                EventKind::Warning,
                "OOMKilled",
                &pod.object(container),
                message.clone(),
            );
            (Some("OOMKilled".to_string()), Some(message))
        }
        (None, false) => (None, None),
    };
    // What the container wrote to its terminationMessagePath wins, as in the kubelet.
    let message = match &record.unknown {
        Some(_) => message,
        None => termination_message(ctx, pod, container, attempt, record.exit_code).or(message),
    };
    termination(record, Some(format!("podhost://{id}")), reason, message)
}

/// Keeps the verdict beside the attempt's exit record (temp, fsync, rename), so that a
/// restarted daemon shows the same `lastState`. Blocks on the disk.
fn record_termination(bundle: &Path, termination: &Termination) {
    if bundle.join(EXIT_FILE).exists()
        && let Err(e) = write_json_atomic(
            &bundle.join(TERMINATED_FILE),
            &terminated_state(termination),
        )
    {
        tracing::warn!(error = %e, "cannot record the container's terminated state");
    }
}

/// The termination an exit record describes.
pub fn termination(
    record: &ExitRecord,
    container_id: Option<String>,
    reason: Option<String>,
    message: Option<String>,
) -> Termination {
    Termination {
        exit_code: record.exit_code,
        signal: record.signal,
        started_at: record.started_at,
        finished_at: record.finished_at,
        reason,
        message,
        container_id,
    }
}

/// `OOMKilled: tail (pid 142) at memory limit 32Mi, peak 32Mi`: the victim as the kernel
/// named it (when its report arrives within a second), the limit and the peak.
async fn oom_message(ctx: &Ctx, pod: &PodInfo, container: &str, record: &ExitRecord) -> String {
    let cgroup = ctx.cgroups.container_path(pod.qos, &pod.uid, container);
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
    let victim = ctx
        .oom_victims
        .wait_for(&suffix, since, Duration::from_secs(1))
        .await;
    let mut msg = String::from("OOMKilled:");
    if let Some(v) = victim {
        msg.push_str(&format!(" {} (pid {})", v.comm, v.pid));
    }
    let fmt = |b: u64| podhost_model::quantity::format_bytes(i64::try_from(b).unwrap_or(i64::MAX));
    match record.memory_max {
        Some(max) => msg.push_str(&format!(" at memory limit {}", fmt(max))),
        None => msg.push_str(" with no memory limit of its own"),
    }
    if let Some(peak) = record.memory_peak {
        msg.push_str(&format!(", peak {}", fmt(peak)));
    }
    msg
}
