//! The pod's shared pid namespace (`shareProcessNamespace: true`).
//!
//! A pid namespace cannot be kept alive by a bind mount alone: once its PID 1 exits,
//! the kernel kills every process in it and no new one may enter. So a pod that shares
//! one gets a PID 1 of its own, `podhost pause` (the kubelet's pause container): the
//! sandbox helper unshares a pid namespace, forks, and the child execs `podhost pause`,
//! which only reaps the orphans it inherits and waits for SIGTERM. The namespace is
//! pinned at `<pod>/ns/pid` and joined by path in every container's spec; the pause
//! process's pid is kept in `<pod>/ns/pause.pid` so the sandbox's release stops it.

use std::path::{Path, PathBuf};

use nix::mount::MsFlags;
use nix::sched::CloneFlags;
use nix::sys::signal::{SigHandler, Signal, signal};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;

use super::RuntimeError;
use super::process_handle::ProcessHandle;
use super::sys::{Kernel, LinuxKernel};

/// The pinned namespace, under the pod's ns dir.
pub fn pid_ns_path(ns_dir: &Path) -> PathBuf {
    ns_dir.join("pid")
}

fn pid_file(ns_dir: &Path) -> PathBuf {
    ns_dir.join("pause.pid")
}

/// In the sandbox helper: a new pid namespace whose PID 1 is `exe pause`; returns the
/// pause process's pid (as the host sees it) once it runs in the namespace.
pub fn start(
    kernel: &dyn Kernel,
    exe: &Path,
    ns_dir: &Path,
    cgroup_leaf: Option<&Path>,
) -> Result<i32, RuntimeError> {
    let child = spawn(kernel, exe, ns_dir)?;
    pin(kernel, ns_dir, child, cgroup_leaf)
}

/// Unshares a pid namespace and forks `exe pause` into it as its PID 1 (in a pod's
/// user namespace, the namespace is owned by it); returns its host pid.
pub fn spawn(kernel: &dyn Kernel, exe: &Path, ns_dir: &Path) -> Result<Pid, RuntimeError> {
    kernel
        .unshare(CloneFlags::CLONE_NEWPID)
        .map_err(|e| RuntimeError::sys("unshare a pid namespace", e))?;
    // A path with a NUL byte cannot be passed to exec: EINVAL, as the kernel would say.
    let exe_c = std::ffi::CString::new(exe.as_os_str().as_encoded_bytes())
        .map_err(|_| RuntimeError::sys("podhost path", nix::Error::EINVAL))?;
    // The pod's ns dir on the command line: `ps` tells which pod a pause process holds
    // (and a test's clean-up finds it by its temp dir).
    let ns_dir_c = std::ffi::CString::new(ns_dir.as_os_str().as_encoded_bytes())
        .map_err(|_| RuntimeError::sys("ns dir path", nix::Error::EINVAL))?;
    let args = [exe_c.clone(), c"pause".into(), c"--ns-dir".into(), ns_dir_c];
    // The helper is single-threaded here (its netlink runtime is gone), as
    // spawn_detached requires.
    kernel
        .spawn_detached(&exe_c, &args)
        .map_err(|e| RuntimeError::sys("fork the pause process", e))
}

/// Pins the pause process `child`'s pid namespace at `<ns_dir>/pid`, records its pid
/// and moves it to `cgroup_leaf` (done with the host's privileges).
pub fn pin(
    kernel: &dyn Kernel,
    ns_dir: &Path,
    child: Pid,
    cgroup_leaf: Option<&Path>,
) -> Result<i32, RuntimeError> {
    if let Some(leaf) = cgroup_leaf {
        let _ = kernel.write_file(&leaf.join("cgroup.procs"), &child.as_raw().to_string());
    }
    let target = pid_ns_path(ns_dir);
    std::fs::File::create(&target).map_err(|e| RuntimeError::io("create", &target, e))?;
    let source = PathBuf::from(format!("/proc/{}/ns/pid", child.as_raw()));
    kernel
        .mount(Some(&source), &target, None, MsFlags::MS_BIND, None)
        .map_err(|e| {
            let _ = kernel.kill(child, Some(Signal::SIGKILL));
            RuntimeError::sys(
                format!("bind {} to {}", source.display(), target.display()),
                e,
            )
        })?;
    podhost_disk::write_atomic(&pid_file(ns_dir), child.as_raw().to_string().as_bytes())?;
    Ok(child.as_raw())
}

/// Whether the pod's pause process still runs as PID 1 of the pinned namespace.
pub fn alive(ns_dir: &Path) -> bool {
    running_pause(ns_dir).is_some()
}

/// The pause process's pid, if the recorded pid is still the process in the pinned
/// namespace (a recycled pid is never taken for it).
fn running_pause(ns_dir: &Path) -> Option<Pid> {
    let pid: i32 = std::fs::read_to_string(pid_file(ns_dir))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    is_pause(ns_dir, pid).then(|| Pid::from_raw(pid))
}

/// Whether the process now at `pid` runs in the pinned pid namespace of `ns_dir`.
fn is_pause(ns_dir: &Path, pid: i32) -> bool {
    let (Ok(pinned), Ok(theirs)) = (
        nix::sys::stat::stat(&pid_ns_path(ns_dir)),
        nix::sys::stat::stat(format!("/proc/{pid}/ns/pid").as_str()),
    ) else {
        return false;
    };
    pinned.st_ino == theirs.st_ino && pinned.st_dev == theirs.st_dev
}

/// Stops the pause process (its namespace dies with it) and forgets it.
pub fn stop(ns_dir: &Path) {
    stop_with(&LinuxKernel, ns_dir);
}

/// [`stop`] through `kernel`.
pub fn stop_with(kernel: &dyn Kernel, ns_dir: &Path) {
    if let Some(pid) = running_pause(ns_dir) {
        // Checked again through a pidfd: between the look and the kill the pause may
        // have died and its pid gone to another process.
        let dir = ns_dir.to_path_buf();
        let pause = ProcessHandle::open_if_with(
            kernel,
            pid.as_raw(),
            "the pod's pause process",
            move |_, pid| is_pause(&dir, pid),
        );
        match pause.map(|p| p.signal_with(kernel, Signal::SIGKILL)) {
            Ok(Ok(_)) => {}
            Ok(Err(e)) | Err(e) => {
                tracing::warn!(error = %e, "cannot stop the pod's pause process")
            }
        }
    }
    let _ = std::fs::remove_file(pid_file(ns_dir));
}

/// `podhost pause`: PID 1 of a shared pid namespace. Reaps whatever is reparented to
/// it and exits on SIGTERM or SIGINT.
pub fn run() -> i32 {
    extern "C" fn quit(_: libc::c_int) {
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(0) }
    }
    // SAFETY: the handler only calls _exit, which is async-signal-safe.
    unsafe {
        let _ = signal(Signal::SIGTERM, SigHandler::Handler(quit));
        let _ = signal(Signal::SIGINT, SigHandler::Handler(quit));
        let _ = signal(Signal::SIGHUP, SigHandler::SigIgn);
        let _ = signal(Signal::SIGPIPE, SigHandler::SigIgn);
    }
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::__WALL)) {
            Ok(_) => continue,
            Err(nix::Error::EINTR) => continue,
            // No children: sleep until a signal (an orphan's SIGCHLD or SIGTERM).
            Err(_) => {
                nix::unistd::pause();
            }
        }
    }
}
