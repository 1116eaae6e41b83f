//! The hidden helper commands the daemon execs: `sandbox` (a pod's namespaces) and
//! `exec-helper` (a hook's exec into a container). `shim` and `pause` dispatch straight
//! to their modules.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// What `podhost sandbox` is asked to create (its flags).
#[derive(Debug, clap::Args)]
pub struct SandboxArgs {
    #[arg(long)]
    pub ns_dir: PathBuf,
    #[arg(long)]
    pub hostname: String,
    #[arg(long)]
    pub host_network: bool,
    #[arg(long)]
    pub host_ipc: bool,
    #[arg(long)]
    pub shared_pid: bool,
    #[arg(long)]
    pub pause_cgroup: Option<PathBuf>,
    /// hostUsers: false: the first host ID of the pod's block of 65536.
    #[arg(long)]
    pub userns_base: Option<u32>,
}

/// `sandbox`: creates the pod's shared namespaces (and its pause process).
pub fn sandbox(args: SandboxArgs) -> Result<i32> {
    let shape = crate::runtime::sandbox::SandboxShape {
        host_network: args.host_network,
        host_ipc: args.host_ipc,
        shared_pid: args.shared_pid,
        userns: args
            .userns_base
            .map(|base| crate::runtime::userns::IdMap { base }),
    };
    let exe = std::env::current_exe().context("locating the podhost binary")?;
    crate::runtime::sandbox::create_in_helper(
        &args.ns_dir,
        &args.hostname,
        shape,
        &exe,
        args.pause_cgroup.as_deref(),
    )?;
    Ok(0)
}

/// `exec-helper`: runs `command` in the container and returns its exit code; with a
/// timeout, kills it and all it started at the deadline (or on SIGTERM).
pub fn exec_helper(
    libcontainer_root: &Path,
    id: &str,
    timeout_ms: Option<u64>,
    console_socket: Option<&Path>,
    command: Vec<String>,
) -> Result<i32> {
    use crate::runtime::exec_deadline::{self, ExecEnd};
    let Some(ms) = timeout_ms else {
        return Ok(crate::runtime::exec::exec_in_container(
            libcontainer_root,
            id,
            command,
            console_socket,
        )?);
    };
    let timeout = std::time::Duration::from_millis(ms);
    match exec_deadline::exec_in_container_within(libcontainer_root, id, command, timeout)? {
        ExecEnd::Exited(code) => Ok(code),
        ExecEnd::TimedOut { killed } => {
            eprintln!(
                "{} after {ms} ms ({killed} processes killed)",
                exec_deadline::TIMED_OUT_MARKER
            );
            Ok(exec_deadline::TIMED_OUT_EXIT)
        }
        ExecEnd::Cancelled { killed } => {
            eprintln!("podhost exec-helper: cancelled ({killed} processes killed)");
            Ok(128 + 15)
        }
    }
}

/// `podhost mount-propagation`: the createContainer hook (runs in the container's mount
/// namespace, before pivot_root; its stdin is the container's state, unused).
pub fn mount_propagation(rootfs: &Path, entries: &[String]) -> Result<i32> {
    use crate::runtime::mount_propagation::{apply, parse_entries};
    let entries = parse_entries(entries)?;
    apply(rootfs, &entries)?;
    Ok(0)
}
