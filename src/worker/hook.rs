//! Performs the core's `RunPreStop`: the exec hook through `podhost exec-helper`
//! (libcontainer never runs in the daemon) or the sleep, and reports how it ended. The
//! core stops waiting at the grace deadline; as the kubelet, the hook is not cancelled then.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;

use super::context::Ctx;
use super::report::{Report, Running};
use crate::model::podsync::PreStop;

/// Runs `c`'s preStop hook for the running instance `run`.
pub async fn run_pre_stop(
    ctx: Arc<Ctx>,
    container: String,
    pre_stop: PreStop,
    command: Option<Vec<String>>,
    run: Running,
    timeout: Duration,
    reports: UnboundedSender<Report>,
) {
    let failure = match (pre_stop, command) {
        (PreStop::Exec, Some(cmd)) => exec(&ctx, &run, &cmd).await,
        (PreStop::Sleep(d), _) => {
            tokio::time::sleep(d.min(timeout)).await;
            None
        }
        _ => None,
    };
    let _ = reports.send(Report::HookEnded { container, failure });
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
