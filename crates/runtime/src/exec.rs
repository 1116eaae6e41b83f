//! Running a command inside a live container (libcontainer tenant exec).
//!
//! Forks: call it only from a single-threaded process (`podhost exec-helper`, the CLI's
//! `podhost exec`), never from the tokio daemon.
//!
//! The process runs as the container's own process does: its user, groups,
//! capabilities, no_new_privs, AppArmor profile, cwd, env and rlimits, taken from the
//! container's config.json (libcontainer's own defaults for an exec are root with the
//! bounding set), with the container's seccomp filter loaded by podhost's executor
//! (libcontainer 0.7's tenant path drops it; see `workload.rs`), and in the container's
//! user namespace: libcontainer 0.7's tenant path never joins one (its list of
//! namespaces to join leaves `user` out), so an exec into a `hostUsers: false` pod would
//! run as the host's root. This process joins it first; libcontainer's processes are
//! its children and inherit it.

use std::path::{Path, PathBuf};

use libcontainer::container::Container;
use libcontainer::container::builder::ContainerBuilder;
use libcontainer::syscall::syscall::SyscallType;
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::Pid;

use oci_spec::runtime::LinuxCapabilities;

use super::RuntimeError;
use super::seccomp::{FILTER_LOADING_CAPS, PrecompiledSeccomp, read_precompiled};
use super::workload::{ContainerExecutor, ExecConfinement, FilterToLoad};

/// The container's precompiled filter, from the shim config in its bundle (None for a
/// container without one, or a bundle made before filters were precompiled).
fn precompiled_of(bundle: &Path) -> Option<PrecompiledSeccomp> {
    let config = bundle.join(podhost_disk::records::SHIM_CONFIG_FILE);
    read_precompiled(&config).unwrap_or_else(|e| {
        tracing::warn!(file = %config.display(), error = %e, "cannot read the container's shim config for its seccomp filter");
        None
    })
}

/// The exec'd process's capabilities while it loads the filter: the container's plus
/// FILTER_LOADING_CAPS in bounding, effective and permitted.
fn with_filter_loading_caps(caps: &LinuxCapabilities) -> LinuxCapabilities {
    let mut wider = caps.clone();
    let add = |set: &Option<oci_spec::runtime::Capabilities>| {
        let mut set = set.clone().unwrap_or_default();
        set.extend(FILTER_LOADING_CAPS);
        Some(set)
    };
    wider
        .set_bounding(add(caps.bounding()))
        .set_effective(add(caps.effective()))
        .set_permitted(add(caps.permitted()));
    wider
}

/// Joins the user namespace of the container's init when it is not this process's own.
/// Needs a single-threaded caller (setns(2) refuses CLONE_NEWUSER otherwise).
fn join_user_namespace_of(init_pid: i32, container_id: &str) -> Result<(), RuntimeError> {
    let theirs = format!("/proc/{init_pid}/ns/user");
    let same = |a: &str, b: &str| -> Result<bool, RuntimeError> {
        let stat = |p: &str| {
            nix::sys::stat::stat(p)
                .map_err(|e| RuntimeError::sys(format!("exec into {container_id}: stat {p}"), e))
        };
        let (a, b) = (stat(a)?, stat(b)?);
        Ok((a.st_dev, a.st_ino) == (b.st_dev, b.st_ino))
    };
    if same("/proc/self/ns/user", &theirs)? {
        return Ok(());
    }
    let ns = std::fs::File::open(&theirs)
        .map_err(|e| RuntimeError::io("open the container's user namespace", &theirs, e))?;
    nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWUSER).map_err(|e| {
        RuntimeError::sys(
            format!("exec into {container_id}: join its user namespace ({theirs})"),
            e,
        )
    })
}

/// Takes the exec'd process's rlimits while still privileged on the host, then joins
/// the container's user namespace (both no-ops for a container in the host's).
fn enter_user_namespace_of(plan: &ExecPlan, container_id: &str) -> Result<(), RuntimeError> {
    for refused in super::rlimit_host::raise_own_to(&plan.rlimits) {
        tracing::warn!(rlimit = ?refused.rlimit.typ(), error = %refused.error, container = container_id, "cannot raise the exec helper's rlimit; the exec may fail");
    }
    join_user_namespace_of(plan.init_pid, container_id)
}

/// What an exec needs once its process file is written.
struct ExecPlan {
    /// The process spec libcontainer reads (in the bundle; removed once started).
    process_file: PathBuf,
    /// What the executor applies that libcontainer will not.
    confinement: Option<ExecConfinement>,
    /// The container's init, whose user namespace the exec joins.
    init_pid: i32,
    /// The process's rlimits.
    rlimits: Vec<oci_spec::runtime::PosixRlimit>,
}

/// Writes the exec'd process's spec: the container's own process with `args`, on a
/// terminal of its own when `terminal`.
fn exec_process_file(
    libcontainer_root: &Path,
    container_id: &str,
    args: Vec<String>,
    terminal: bool,
) -> Result<ExecPlan, RuntimeError> {
    let err = |e: &dyn std::fmt::Display| {
        RuntimeError::Libcontainer(format!("exec into {container_id}: {e}"))
    };
    let container = Container::load(libcontainer_root.join(container_id)).map_err(|e| err(&e))?;
    let init_pid = container
        .pid()
        .ok_or_else(|| err(&"libcontainer has no init pid for it"))?
        .as_raw();
    let config = container.bundle().join("config.json");
    let spec = oci_spec::runtime::Spec::load(&config).map_err(|e| err(&e))?;
    let mut process = spec.process().clone().unwrap_or_default();
    process.set_args(Some(args)).set_terminal(Some(terminal));
    let confinement = match precompiled_of(container.bundle()) {
        // The daemon's program; config.json's capabilities already hold the loading
        // ones when the filter loads without no_new_privs.
        Some(precompiled) => {
            if let Some(own) = &precompiled.restore_capabilities {
                process.set_capabilities(Some(with_filter_loading_caps(own)));
            }
            Some(ExecConfinement {
                seccomp: FilterToLoad::Program(precompiled.filter),
                restore_capabilities: precompiled.restore_capabilities,
            })
        }
        // A bundle made before filters were precompiled: the filter is in config.json.
        None => spec
            .linux()
            .as_ref()
            .and_then(|l| l.seccomp().clone())
            .map(|seccomp| {
                // With no_new_privs the filter loads unprivileged, as in the container.
                let needs_caps = process.no_new_privileges() != Some(true);
                let restore_capabilities = match process.capabilities() {
                    Some(caps) if needs_caps => {
                        let original = caps.clone();
                        process.set_capabilities(Some(with_filter_loading_caps(&original)));
                        Some(original)
                    }
                    _ => None,
                };
                ExecConfinement {
                    seccomp: FilterToLoad::Compile(seccomp),
                    restore_capabilities,
                }
            }),
    };
    let path = container
        .bundle()
        .join(format!("exec-process-{}.json", std::process::id()));
    let bytes = serde_json::to_vec(&process).map_err(|e| err(&e))?;
    podhost_disk::write_atomic(&path, &bytes)?;
    Ok(ExecPlan {
        process_file: path,
        confinement,
        init_pid,
        rlimits: process.rlimits().clone().unwrap_or_default(),
    })
}

/// Runs `args` in the container with the caller's stdio (or, with `console_socket`, on
/// a new terminal whose master goes to that socket), waits, and returns the exit code
/// (128 + signal when killed by one).
pub fn exec_in_container(
    libcontainer_root: &Path,
    container_id: &str,
    args: Vec<String>,
    console_socket: Option<&Path>,
) -> Result<i32, RuntimeError> {
    let pid = spawn_in_container(libcontainer_root, container_id, args, console_socket)?;
    loop {
        match waitpid(pid, None) {
            Ok(status) => match exit_code(status) {
                Some(code) => return Ok(code),
                None => continue,
            },
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

/// The exit code a wait status means (128 + signal for a kill); `None` while it runs.
pub(super) fn exit_code(status: WaitStatus) -> Option<i32> {
    match status {
        WaitStatus::Exited(_, code) => Some(code),
        WaitStatus::Signaled(_, sig, _) => Some(128 + sig as i32),
        _ => None,
    }
}

/// Starts `args` in the container with the caller's stdio; returns the process, a
/// child of this one, for the caller to wait for.
///
/// With `console_socket` the process gets a terminal as runc's `exec -t` gives one:
/// libcontainer opens a pty in the container's own devpts (so `tty` names a path that
/// exists in there), makes its slave the process's stdio and controlling terminal
/// (setsid, TIOCSCTTY) and sends the master over the unix socket at that path.
pub(super) fn spawn_in_container(
    libcontainer_root: &Path,
    container_id: &str,
    args: Vec<String>,
    console_socket: Option<&Path>,
) -> Result<Pid, RuntimeError> {
    let plan = exec_process_file(
        libcontainer_root,
        container_id,
        args,
        console_socket.is_some(),
    )?;
    if let Err(e) = enter_user_namespace_of(&plan, container_id) {
        let _ = std::fs::remove_file(&plan.process_file);
        return Err(e);
    }
    let process_file = plan.process_file;
    let built = ContainerBuilder::new(container_id.to_string(), SyscallType::default())
        .with_root_path(libcontainer_root)
        .map_err(|e| RuntimeError::Libcontainer(format!("exec into {container_id}: {e}")))?
        .with_executor(ContainerExecutor::for_exec(plan.confinement))
        .with_console_socket(console_socket)
        .as_tenant()
        .with_process(Some(&process_file))
        .with_detach(true)
        .build();
    let _ = std::fs::remove_file(&process_file);
    let pid =
        built.map_err(|e| RuntimeError::Libcontainer(format!("exec into {container_id}: {e}")))?;
    Ok(Pid::from_raw(pid.as_raw()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_spec::runtime::Capability;

    #[test]
    fn filter_loading_caps_are_added_to_bounding_effective_and_permitted_only() {
        let caps = oci_spec::runtime::LinuxCapabilitiesBuilder::default()
            .bounding([Capability::Chown, Capability::Setpcap])
            .effective([Capability::Chown])
            .permitted([Capability::Chown])
            .build()
            .unwrap();
        let mut caps = caps;
        caps.set_inheritable(None).set_ambient(None);
        let wider = with_filter_loading_caps(&caps);
        for set in [wider.bounding(), wider.effective(), wider.permitted()] {
            let set = set.as_ref().unwrap();
            assert!(set.contains(&Capability::Chown));
            assert!(set.contains(&Capability::SysAdmin));
            assert!(set.contains(&Capability::Setpcap));
            assert_eq!(set.len(), 3);
        }
        assert!(wider.inheritable().is_none());
        assert!(wider.ambient().is_none());
    }
}
