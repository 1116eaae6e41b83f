//! Running a command inside a live container (libcontainer tenant exec).
//!
//! Forks: call it only from a single-threaded process (`podhost exec-helper`, the CLI's
//! `podhost exec`), never from the tokio daemon.

use std::path::Path;

use libcontainer::container::builder::ContainerBuilder;
use libcontainer::syscall::syscall::SyscallType;
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::Pid;

use super::RuntimeError;

/// Runs `args` in the container with the caller's stdio, waits, and returns the exit code
/// (128 + signal when killed by one).
pub fn exec_in_container(
    libcontainer_root: &Path,
    container_id: &str,
    args: Vec<String>,
) -> Result<i32, RuntimeError> {
    let pid = ContainerBuilder::new(container_id.to_string(), SyscallType::default())
        .with_root_path(libcontainer_root)
        .map_err(|e| RuntimeError::Libcontainer(format!("exec into {container_id}: {e}")))?
        .as_tenant()
        .with_container_args(args)
        .with_detach(true)
        .build()
        .map_err(|e| RuntimeError::Libcontainer(format!("exec into {container_id}: {e}")))?;
    let pid = Pid::from_raw(pid.as_raw());
    loop {
        match waitpid(pid, None) {
            Ok(WaitStatus::Exited(_, code)) => return Ok(code),
            Ok(WaitStatus::Signaled(_, sig, _)) => return Ok(128 + sig as i32),
            Ok(_) => continue,
            Err(nix::Error::EINTR) => continue,
            Err(e) => {
                return Err(RuntimeError::sys(
                    format!("wait for exec in {container_id}"),
                    e,
                ));
            }
        }
    }
}
