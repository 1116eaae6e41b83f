//! The exec'd command: `podhost exec-helper` (single-threaded, so libcontainer may fork
//! there, never in the daemon) runs it in the container with the helper's own stdio,
//! which are pipes to the stream here, or on a terminal (`pty.rs`); the helper exits
//! with the command's code.

use std::path::Path;
use std::process::Stdio;

use super::pty::{ConsoleSocket, Terminal};
use super::request::ExecRequest;
use super::resize::TerminalSize;

/// Starts the command in the container `container_id`: with pipes for the streams the
/// request asks for, or on a terminal of its own for a `tty` request.
pub async fn start(
    podhost_exe: &Path,
    libcontainer_root: &Path,
    container_id: &str,
    request: ExecRequest,
    size: Option<TerminalSize>,
) -> std::io::Result<Started> {
    // As for exec probes: the helper's cgroup writes find the kernel's fast path warm.
    podhost_runtime::cgroup_attach_primer::prime_own_cgroup_for(
        podhost_runtime::cgroup_attach_primer::EXEC_HELPER_PRIMING,
    );
    let mut command = tokio::process::Command::new(podhost_exe);
    command
        .arg("exec-helper")
        .arg("--libcontainer-root")
        .arg(libcontainer_root)
        .arg("--id")
        .arg(container_id)
        .kill_on_drop(true);
    if request.tty {
        return start_on_terminal(command, request, size).await;
    }
    let piped = |on: bool| if on { Stdio::piped() } else { Stdio::null() };
    let child = command
        .arg("--")
        .args(&request.command)
        .stdin(piped(request.stdin))
        .stdout(piped(request.stdout))
        .stderr(piped(request.stderr))
        .spawn()?;
    Ok(Started {
        child,
        request,
        terminal: None,
    })
}

/// The helper with `--console-socket`: its own stdio carries only its own errors (to
/// the daemon's log); the command's go through the terminal it sends back, sized to
/// `size` the moment it arrives — while the command is still being set up, so that it
/// almost always starts with the client's size (the CRI has no earlier point either).
async fn start_on_terminal(
    mut command: tokio::process::Command,
    request: ExecRequest,
    size: Option<TerminalSize>,
) -> std::io::Result<Started> {
    let socket = ConsoleSocket::bind()?;
    let mut child = command
        .arg("--console-socket")
        .arg(socket.path())
        .arg("--")
        .args(&request.command)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()?;
    let master = tokio::select! {
        master = socket.receive() => master?,
        exit = child.wait() => {
            return Err(std::io::Error::other(format!(
                "exec-helper ended ({}) before the command's terminal was ready",
                exit.map(|e| e.to_string()).unwrap_or_else(|e| e.to_string())
            )));
        }
    };
    let terminal = Terminal::new(master)?;
    if let Some(size) = size {
        terminal.resize(size);
    }
    Ok(Started {
        child,
        request,
        terminal: Some(terminal),
    })
}

/// How long a terminal's command waits for the client's first size.
pub const FIRST_SIZE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// An exec whose command runs, once the stream protocol is set up.
pub struct Started {
    pub child: tokio::process::Child,
    pub request: ExecRequest,
    /// The command's terminal, for a `tty` request.
    pub terminal: Option<Terminal>,
}

/// The status both protocols end with: the command's exit (128 + signal when killed)
/// as kubectl reads it, or why it could not be waited for.
pub async fn final_status(
    child: &mut tokio::process::Child,
    command: &[String],
) -> serde_json::Value {
    match child.wait().await {
        Ok(exit) => {
            let code = exit
                .code()
                .or_else(|| std::os::unix::process::ExitStatusExt::signal(&exit).map(|s| 128 + s))
                .unwrap_or(1);
            super::channel::exit_status(command, code)
        }
        Err(e) => super::channel::failure_status(&format!("waiting for the command: {e}")),
    }
}
