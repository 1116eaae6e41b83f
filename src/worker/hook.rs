//! Performs the core's `RunPostStart` and `RunPreStop`: an exec handler through `podhost
//! exec-helper` (libcontainer never runs in the daemon), an httpGet handler, or a sleep,
//! and reports how it ended. As the kubelet, an exec hook has no timeout of its own: the
//! core stops waiting for a preStop at the grace deadline, and a hook still running when
//! its container is gone is aborted with the pod's tasks.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::LifecycleHandler;
use tokio::sync::mpsc::UnboundedSender;

use super::context::{Ctx, PodInfo};
use super::facts::exec_command;
use super::report::{Report, Running};

/// Which hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookPoint {
    PostStart,
    /// A preStop: a sleep is bounded by this timeout (the grace period).
    PreStop {
        timeout: Duration,
    },
}

/// Runs `handler` for the running instance `run` and reports how it ended.
pub async fn run_hook(
    ctx: Arc<Ctx>,
    pod: Arc<PodInfo>,
    container: String,
    point: HookPoint,
    handler: LifecycleHandler,
    run: Running,
    reports: UnboundedSender<Report>,
) {
    let failure = handle(&ctx, &pod, &handler, &run, point).await;
    let report = match point {
        HookPoint::PostStart => Report::PostStartEnded { container, failure },
        HookPoint::PreStop { .. } => Report::HookEnded { container, failure },
    };
    let _ = reports.send(report);
}

async fn handle(
    ctx: &Ctx,
    pod: &PodInfo,
    handler: &LifecycleHandler,
    run: &Running,
    point: HookPoint,
) -> Option<String> {
    if let Some(cmd) = exec_command(handler) {
        return exec(ctx, run, &cmd).await;
    }
    if let Some(get) = &handler.http_get {
        return super::hook_http::http_get(ctx, pod, get).await;
    }
    if let Some(sleep) = &handler.sleep {
        let mut d = Duration::from_secs(crate::model::convert::non_negative_u64(sleep.seconds));
        if let HookPoint::PreStop { timeout } = point {
            d = d.min(timeout);
        }
        tokio::time::sleep(d).await;
    }
    None
}

/// Runs `cmd` in the container; `Some(why)` when it failed.
async fn exec(ctx: &Ctx, run: &Running, cmd: &[String]) -> Option<String> {
    let child = tokio::process::Command::new(&ctx.exe)
        .arg("exec-helper")
        .arg("--libcontainer-root")
        .arg(ctx.layout.libcontainer_root())
        .arg("--id")
        .arg(&run.container_id)
        .arg("--")
        .args(cmd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let child = match child {
        Ok(c) => c,
        Err(e) => return Some(format!("cannot run exec helper: {e}")),
    };
    match child.wait_with_output().await {
        Ok(o) if o.status.success() => None,
        Ok(o) => {
            let mut text = String::from_utf8_lossy(&o.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&o.stderr));
            let text: String = text.trim().chars().take(1024).collect();
            let how = o
                .status
                .code()
                .map(|c| c.to_string())
                .unwrap_or_else(|| "a signal".into());
            Some(format!("{cmd:?} exited with {how}: {text}"))
        }
        Err(e) => Some(e.to_string()),
    }
}
