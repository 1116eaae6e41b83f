//! The exec'd command: `podhost exec-helper` (single-threaded, so libcontainer may fork
//! there, never in the daemon) runs it in the container with the helper's own stdio,
//! which are pipes to the stream here; the helper exits with the command's code.

use std::path::Path;
use std::process::Stdio;

use super::request::ExecRequest;

/// Starts the command in the container `container_id`.
pub fn spawn(
    podhost_exe: &Path,
    libcontainer_root: &Path,
    container_id: &str,
    request: &ExecRequest,
) -> std::io::Result<tokio::process::Child> {
    let piped = |on: bool| if on { Stdio::piped() } else { Stdio::null() };
    tokio::process::Command::new(podhost_exe)
        .arg("exec-helper")
        .arg("--libcontainer-root")
        .arg(libcontainer_root)
        .arg("--id")
        .arg(container_id)
        .arg("--")
        .args(&request.command)
        .stdin(piped(request.stdin))
        .stdout(piped(request.stdout))
        // Without a terminal stderr is its own stream; with one (no pty is made yet)
        // it goes where stdout goes.
        .stderr(piped(request.stderr || request.tty))
        .kill_on_drop(true)
        .spawn()
}
