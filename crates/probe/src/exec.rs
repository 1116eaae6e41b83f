//! exec: the command runs in the container through `podhost exec-helper`; exit 0 is
//! success. With a timeout the helper kills the command and everything it started at
//! the deadline; a prober dropped mid-probe sends the helper SIGTERM, which does the
//! same. The daemon's own wait is bounded too, a little past the helper's deadline.

use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::Signal;

use super::{HandlerTarget, ProbeError};
use podhost_model::probe::Outcome;
use podhost_runtime::exec_deadline::{TIMED_OUT_EXIT, TIMED_OUT_MARKER};
use podhost_runtime::process_handle::ProcessHandle;

/// How long past its deadline the helper may take to kill and reap before the daemon
/// gives up on it (and SIGKILLs it).
const HELPER_SLACK: Duration = Duration::from_secs(5);
/// What of the command's output becomes the message (the kubelet's limit).
const MAX_OUTPUT: usize = 10 * 1024;

/// Sends SIGTERM to the helper if the probe is dropped before the helper was reaped.
/// Through a pidfd: a dropped tokio child is reaped in the background, after which its
/// pid may be another process's.
struct CancelOnDrop(Option<ProcessHandle>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(helper) = self.0.take() {
            let _ = helper.signal(Signal::SIGTERM);
        }
    }
}

pub async fn run(target: &HandlerTarget, command: &[String], timeout: Option<Duration>) -> Outcome {
    let mut helper = tokio::process::Command::new(&target.exe);
    helper
        .arg("exec-helper")
        .arg("--libcontainer-root")
        .arg(&target.libcontainer_root)
        .arg("--id")
        .arg(&target.container_id);
    if let Some(t) = timeout {
        helper.arg("--timeout-ms").arg(t.as_millis().to_string());
    }
    helper
        .arg("--")
        .args(command)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // The helper's libcontainer joins the container's cgroups a few milliseconds after
    // it starts: the kernel's grace period for that begins now (cgroup_attach_primer).
    podhost_runtime::cgroup_attach_primer::prime_own_cgroup_for(
        podhost_runtime::cgroup_attach_primer::EXEC_HELPER_PRIMING,
    );
    let child = match helper.spawn() {
        Ok(c) => c,
        Err(source) => {
            return Outcome::Unknown(
                ProbeError::Helper {
                    exe: target.exe.clone(),
                    source,
                }
                .to_string(),
            );
        }
    };
    // Not waited for yet, the child keeps its pid: the process there is the helper.
    let mut cancel = CancelOnDrop(
        child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(|pid| ProcessHandle::open_if(pid, "the exec helper", |_, _| true).ok()),
    );
    let helper = cancel.0.clone();
    let waited = match timeout {
        Some(t) => tokio::time::timeout(t + HELPER_SLACK, child.wait_with_output()).await,
        None => Ok(child.wait_with_output().await),
    };
    let output = match waited {
        Ok(Ok(o)) => {
            cancel.0 = None;
            o
        }
        Ok(Err(e)) => {
            cancel.0 = None;
            return Outcome::Unknown(format!("waiting for exec-helper: {e}"));
        }
        Err(_) => {
            // The helper did not end past its own deadline: kill it (the drop guard
            // asked it nicely first would be too late now).
            cancel.0 = None;
            if let Some(helper) = helper {
                let _ = helper.signal(Signal::SIGKILL);
            }
            return timed_out(command);
        }
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    let code = output.status.code();
    if code == Some(TIMED_OUT_EXIT) && stderr.lines().any(|l| l.starts_with(TIMED_OUT_MARKER)) {
        return timed_out(command);
    }
    if output.status.success() {
        return Outcome::Success;
    }
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&stderr);
    let text: String = text.chars().take(MAX_OUTPUT).collect();
    let how = code.map_or_else(|| "a signal".to_string(), |c| c.to_string());
    Outcome::Failure(format!(
        "command {:?} exited with {how}: {}",
        command.join(" "),
        text.trim()
    ))
}

fn timed_out(command: &[String]) -> Outcome {
    Outcome::Failure(format!("command {:?} timed out", command.join(" ")))
}
