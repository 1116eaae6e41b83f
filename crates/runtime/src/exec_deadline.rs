//! An exec into a container that ends at a deadline or when asked (probes' exec, whose
//! `timeoutSeconds` the kubelet enforces): the exec'd process and everything it started
//! are killed then, not only the helper, so nothing of it is left running.
//!
//! Runs in `podhost exec-helper` (single-threaded; libcontainer forks). The daemon asks
//! for the end early with SIGTERM (a prober that is stopped); SIGKILL of the helper
//! would leave the exec'd process behind.

use std::os::fd::AsFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::RuntimeError;
use super::exec::{exit_code, spawn_in_container};

/// The exit status of `exec-helper` when the deadline passed (as timeout(1)'s).
pub const TIMED_OUT_EXIT: i32 = 124;
/// The line `exec-helper` writes on stderr when the deadline passed: with
/// [`TIMED_OUT_EXIT`] it tells a timeout from a command that exits 124 itself.
pub const TIMED_OUT_MARKER: &str = "podhost exec-helper: deadline passed";

/// SIGTERM or SIGINT came before the signals were blocked (while the exec was made).
static END_ASKED_EARLY: AtomicBool = AtomicBool::new(false);

extern "C" fn note_end_asked(_: libc::c_int) {
    END_ASKED_EARLY.store(true, Ordering::SeqCst);
}

/// Until the signals are blocked, SIGTERM/SIGINT only set a flag instead of killing the
/// helper (which would leave the exec'd process behind). A handler, unlike a blocked
/// mask or an ignored disposition, is reset by execve, so the exec'd process does not
/// inherit it.
fn note_end_requests() -> Result<(), RuntimeError> {
    let action = SigAction::new(
        SigHandler::Handler(note_end_asked),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for s in [Signal::SIGTERM, Signal::SIGINT] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { sigaction(s, &action) }
            .map_err(|e| RuntimeError::sys("exec: install the SIGTERM handler", e))?;
    }
    Ok(())
}

/// How a bounded exec ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecEnd {
    /// The command ended on its own with this code (128 + signal when killed by one).
    Exited(i32),
    /// The deadline passed; its process tree (this many processes) was killed.
    TimedOut { killed: usize },
    /// SIGTERM or SIGINT asked for the end; the tree was killed.
    Cancelled { killed: usize },
}

/// Runs `args` in the container with the caller's stdio until it ends, `timeout`
/// passes, or this process gets SIGTERM/SIGINT.
pub fn exec_in_container_within(
    libcontainer_root: &Path,
    container_id: &str,
    args: Vec<String>,
    timeout: Duration,
) -> Result<ExecEnd, RuntimeError> {
    let deadline = Instant::now() + timeout;
    note_end_requests()?;
    let pid = spawn_in_container(libcontainer_root, container_id, args, None)?;
    // Blocked only now: the exec'd process must not inherit a blocked mask. A SIGCHLD
    // before this is not lost: the first waitpid below sees the exit.
    let mut mask = SigSet::empty();
    for s in [Signal::SIGCHLD, Signal::SIGTERM, Signal::SIGINT] {
        mask.add(s);
    }
    let what = |w: &str| format!("exec into {container_id}: {w}");
    mask.thread_block()
        .map_err(|e| RuntimeError::sys(what("block signals"), e))?;
    let signals = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .map_err(|e| RuntimeError::sys(what("signalfd"), e))?;
    if END_ASKED_EARLY.load(Ordering::SeqCst) {
        let killed = end(pid);
        return Ok(ExecEnd::Cancelled { killed });
    }
    loop {
        match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => {}
            Ok(status) => {
                if let Some(code) = exit_code(status) {
                    return Ok(ExecEnd::Exited(code));
                }
            }
            Err(nix::Error::EINTR) => continue,
            Err(e) => return Err(RuntimeError::sys(what("wait"), e)),
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let killed = end(pid);
            return Ok(ExecEnd::TimedOut { killed });
        }
        // At most a minute per wait: PollTimeout is an i32 of milliseconds.
        let wait =
            PollTimeout::try_from(left.min(Duration::from_secs(60))).unwrap_or(PollTimeout::MAX);
        let mut fds = [PollFd::new(signals.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, wait) {
            Ok(_) | Err(nix::Error::EINTR) => {}
            Err(e) => return Err(RuntimeError::sys(what("poll"), e)),
        }
        while let Ok(Some(info)) = signals.read_signal() {
            let signo = i32::try_from(info.ssi_signo).unwrap_or_default();
            if signo == Signal::SIGTERM as i32 || signo == Signal::SIGINT as i32 {
                let killed = end(pid);
                return Ok(ExecEnd::Cancelled { killed });
            }
        }
    }
}

/// Kills the exec'd process's tree and reaps the process.
fn end(pid: Pid) -> usize {
    let killed = super::proc_tree::kill_tree(pid);
    loop {
        match waitpid(pid, None) {
            Err(nix::Error::EINTR) => continue,
            Ok(status) if exit_code(status).is_none() => continue,
            _ => return killed,
        }
    }
}
