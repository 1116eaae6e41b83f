//! Running a command inside a live container (libcontainer tenant exec).
//!
//! Forks: call it only from a single-threaded process (`podhost exec-helper`, the CLI's
//! `podhost exec`), never from the tokio daemon.
//!
//! The process runs as the container's own process does: its user, groups,
//! capabilities, no_new_privs, AppArmor profile, cwd, env and rlimits, taken from the
//! container's config.json (libcontainer's own defaults for an exec are root with the
//! bounding set). libcontainer 0.7 does not apply the container's seccomp filter to an
//! exec'd process; that gap is documented in the README.

use std::path::{Path, PathBuf};

use libcontainer::container::Container;
use libcontainer::container::builder::ContainerBuilder;
use libcontainer::syscall::syscall::SyscallType;
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::Pid;

use super::RuntimeError;

/// Writes the exec'd process's spec: the container's own process with `args`; returns
/// its path (in the bundle, removed once the process is started).
fn exec_process_file(
    libcontainer_root: &Path,
    container_id: &str,
    args: Vec<String>,
) -> Result<PathBuf, RuntimeError> {
    let err = |e: &dyn std::fmt::Display| {
        RuntimeError::Libcontainer(format!("exec into {container_id}: {e}"))
    };
    let container = Container::load(libcontainer_root.join(container_id)).map_err(|e| err(&e))?;
    let config = container.bundle().join("config.json");
    let spec = oci_spec::runtime::Spec::load(&config).map_err(|e| err(&e))?;
    let mut process = spec.process().clone().unwrap_or_default();
    process.set_args(Some(args)).set_terminal(Some(false));
    let path = container
        .bundle()
        .join(format!("exec-process-{}.json", std::process::id()));
    let bytes = serde_json::to_vec(&process).map_err(|e| err(&e))?;
    super::fsutil::write_atomic(&path, &bytes)?;
    Ok(path)
}

/// Runs `args` in the container with the caller's stdio, waits, and returns the exit code
/// (128 + signal when killed by one).
pub fn exec_in_container(
    libcontainer_root: &Path,
    container_id: &str,
    args: Vec<String>,
) -> Result<i32, RuntimeError> {
    let process_file = exec_process_file(libcontainer_root, container_id, args)?;
    let built = ContainerBuilder::new(container_id.to_string(), SyscallType::default())
        .with_root_path(libcontainer_root)
        .map_err(|e| RuntimeError::Libcontainer(format!("exec into {container_id}: {e}")))?
        .as_tenant()
        .with_process(Some(&process_file))
        .with_detach(true)
        .build();
    let _ = std::fs::remove_file(&process_file);
    let pid =
        built.map_err(|e| RuntimeError::Libcontainer(format!("exec into {container_id}: {e}")))?;
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
