//! Container termination exactly as the kubelet: preStop (its time deducted from the
//! grace period), then the stop signal with at least 2 s, then SIGKILL.

use std::future::Future;
use std::process::Stdio;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Container;
use nix::sys::signal::Signal;

use super::context::{Ctx, PodInfo};
use crate::disk::records::StartedRecord;
use crate::model::grace::stop_grace_after_hook;
use crate::runtime::signals;
use crate::status::EventKind;

/// A running container as the kill sequence needs it.
#[derive(Debug, Clone)]
pub struct Running {
    pub started: StartedRecord,
    pub container_id: String,
    pub stop_signal: Signal,
}

/// How a preStop hook ended (`R`: what the container's exit future gives).
enum HookOutcome<R> {
    Done,
    Failed(String),
    TimedOut,
    ContainerExited(R),
}

/// Stops a running container within `grace`; `exit` resolves when it has exited, and
/// its output is returned.
pub async fn stop_container<F, R>(
    ctx: &Ctx,
    pod: &PodInfo,
    c: &Container,
    run: &Running,
    grace: Duration,
    exit: &mut F,
) -> R
where
    F: Future<Output = R> + Unpin,
{
    let object = pod.object(&c.name);
    ctx.store.pod_event(
        &pod.uid,
        EventKind::Normal,
        "Killing",
        &object,
        format!("Stopping container {}", c.name),
    );
    let began = Instant::now();
    let mut stop_grace = grace;
    if let Some(cmd) = pre_stop_command(c) {
        match run_hook(ctx, run, cmd, grace, exit).await {
            HookOutcome::ContainerExited(rec) => return rec,
            HookOutcome::Done => {}
            HookOutcome::Failed(msg) => ctx.store.pod_event(
                &pod.uid,
                EventKind::Warning,
                "FailedPreStopHook",
                &object,
                format!("PreStopHook failed: {msg}"),
            ),
            HookOutcome::TimedOut => ctx.store.pod_event(
                &pod.uid,
                EventKind::Warning,
                "FailedPreStopHook",
                &object,
                format!(
                    "PreStop hook not completed in grace period ({}s)",
                    grace.as_secs()
                ),
            ),
        }
        stop_grace = stop_grace_after_hook(grace, began.elapsed());
    } else if let Some(sleep) = pre_stop_sleep(c) {
        tokio::select! {
            rec = &mut *exit => return rec,
            _ = tokio::time::sleep(sleep.min(grace)) => {}
        }
        stop_grace = stop_grace_after_hook(grace, began.elapsed());
    }
    let pid = run.started.init_pid;
    tracing::info!(container = %run.container_id, pid, signal = %run.stop_signal, grace = ?stop_grace, "sending stop signal");
    if let Err(e) = signals::send(pid, run.stop_signal) {
        tracing::warn!(error = %e, pid, "stop signal failed");
    }
    tokio::select! {
        rec = &mut *exit => return rec,
        _ = tokio::time::sleep(stop_grace) => {}
    }
    tracing::info!(container = %run.container_id, pid, "grace period over, sending SIGKILL");
    if let Err(e) = signals::send(pid, Signal::SIGKILL) {
        tracing::warn!(error = %e, pid, "SIGKILL failed");
    }
    exit.await
}

fn pre_stop_command(c: &Container) -> Option<Vec<String>> {
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

fn pre_stop_sleep(c: &Container) -> Option<Duration> {
    let secs = c
        .lifecycle
        .as_ref()?
        .pre_stop
        .as_ref()?
        .sleep
        .as_ref()?
        .seconds;
    Some(Duration::from_secs(secs.max(0) as u64))
}

/// Runs the exec hook through `podhost exec-helper` (libcontainer never runs in the
/// daemon), bounded by `grace`; the container exiting first ends the wait.
async fn run_hook<F, R>(
    ctx: &Ctx,
    run: &Running,
    cmd: Vec<String>,
    grace: Duration,
    exit: &mut F,
) -> HookOutcome<R>
where
    F: Future<Output = R> + Unpin,
{
    let child = tokio::process::Command::new(&ctx.exe)
        .arg("exec-helper")
        .arg("--libcontainer-root")
        .arg(ctx.layout.libcontainer_root())
        .arg("--id")
        .arg(&run.container_id)
        .arg("--")
        .args(&cmd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let child = match child {
        Ok(c) => c,
        Err(e) => return HookOutcome::Failed(format!("cannot run exec helper: {e}")),
    };
    let output = child.wait_with_output();
    tokio::select! {
        rec = &mut *exit => HookOutcome::ContainerExited(rec),
        _ = tokio::time::sleep(grace) => HookOutcome::TimedOut,
        out = output => match out {
            Ok(o) if o.status.success() => HookOutcome::Done,
            Ok(o) => {
                let mut text = String::from_utf8_lossy(&o.stdout).into_owned();
                text.push_str(&String::from_utf8_lossy(&o.stderr));
                let text: String = text.trim().chars().take(1024).collect();
                HookOutcome::Failed(format!(
                    "{:?} exited with {}: {text}",
                    cmd,
                    o.status.code().map(|c| c.to_string()).unwrap_or_else(|| "a signal".into())
                ))
            }
            Err(e) => HookOutcome::Failed(e.to_string()),
        },
    }
}
