//! A handle on one process named by a pid that was read earlier (a record, a cgroup's
//! process list, a /proc listing): signals reach that process or nobody.
//!
//! A stored pid names whatever process has that number now. A container's init may have
//! exited and been reaped by its shim long before the daemon acts on `started.json`, and
//! its number given to any process of the host; kill(2) would then signal a stranger,
//! and kill(0) or kill(-1) a process group or every process. So no stored number is
//! signalled as such: a handle opens a pidfd (which names one process for as long as it
//! is open), checks through /proc that this process is the wanted one (for a recorded
//! process: its start time, see `disk::proc_start`), and proves the check was about the
//! pidfd's process by a signal-0 probe through the pidfd afterwards (a process that still
//! exists, if only as a zombie, still holds its pid, so /proc showed it). Signals then go
//! through the pidfd: once the process is reaped they fail with ESRCH, which is
//! [`Delivery::Gone`], never another process.
//!
//! Kernels before 5.3 have no pidfd_open: the handle then repeats the check right
//! before each kill(2), which leaves open only the microseconds between the two.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use nix::sys::signal::Signal;
use nix::unistd::Pid;

use super::sys::{Kernel, LinuxKernel};
use podhost_disk::proc_start;
use podhost_disk::records::StartedRecord;

/// Why a handle could not be opened or a signal not be sent.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProcessError {
    /// A stored pid of 0 or below: kill(2) would take it for a process group or for
    /// every process.
    #[error(
        "pid {pid} of {what} is not a process id (0 and negative numbers name process groups or every process); the record holding it is damaged: remove it"
    )]
    NotAPid { pid: i32, what: String },
    /// A system call on the process failed otherwise than "no such process".
    #[error("{call} for pid {pid} ({what}): {source}")]
    Sys {
        call: &'static str,
        pid: i32,
        what: String,
        #[source]
        source: nix::Error,
    },
}

/// What became of a signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// The wanted process got it.
    Sent,
    /// The wanted process is gone (reaped, or its pid now names another process):
    /// nothing was signalled.
    Gone,
}

/// How the recorded process is told from a later one with its pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartCheck {
    /// Its start, in clock ticks after boot, as its parent recorded it: exact.
    Ticks(u64),
    /// Records of shims older than the start field only say when the start was
    /// recorded: a process that started after that (beyond [`proc_start::START_SLACK`])
    /// is another one. Weaker: a pid reused within the slack is not told apart.
    NotAfter(DateTime<Utc>),
}

impl StartCheck {
    /// The check a shim's start record allows.
    pub fn of(record: &StartedRecord) -> Self {
        match record.init_start_ticks {
            Some(ticks) => Self::Ticks(ticks),
            None => Self::NotAfter(record.started_at),
        }
    }

    /// Whether the recorded process still runs at `pid` (never a later one with its pid).
    pub fn still_runs(&self, pid: i32) -> bool {
        self.matches(&LinuxKernel, pid)
    }

    /// Whether the process now at `pid` is the recorded one, as /proc tells it.
    fn matches(&self, kernel: &dyn Kernel, pid: i32) -> bool {
        let Some(start) = read_start_ticks(kernel, pid) else {
            return false;
        };
        match *self {
            Self::Ticks(recorded) => start == recorded,
            Self::NotAfter(recorded_at) => {
                let Some(boot) = kernel
                    .read_file("/proc/stat".as_ref())
                    .ok()
                    .and_then(|t| proc_start::boot_time(&t))
                else {
                    // Unknown: never signal a process that may be a stranger.
                    return false;
                };
                let started = proc_start::wall_time(boot, start, proc_start::ticks_per_second());
                let latest = std::time::SystemTime::from(recorded_at) + proc_start::START_SLACK;
                started <= latest
            }
        }
    }
}

fn read_start_ticks(kernel: &dyn Kernel, pid: i32) -> Option<u64> {
    let stat = kernel
        .read_file(format!("/proc/{pid}/stat").as_ref())
        .ok()?;
    proc_start::start_ticks(&stat)
}

/// Decides whether the process now at a pid is the wanted one, from /proc (through
/// the kernel it is given).
pub type IsIt = dyn Fn(&dyn Kernel, i32) -> bool + Send + Sync;

/// One process, opened from a pid that was read earlier. Clones share the pidfd.
#[derive(Clone)]
pub struct ProcessHandle {
    pid: i32,
    /// What the process is to the one who asked ("the init of <container>").
    what: Arc<str>,
    target: Arc<Target>,
}

enum Target {
    /// A pidfd on the wanted process.
    Pinned(OwnedFd),
    /// No pidfds on this kernel: the check is repeated right before each kill(2).
    Unpinned(Box<IsIt>),
    /// The wanted process is gone: never signalled.
    Gone,
}

impl std::fmt::Debug for ProcessHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let target = match *self.target {
            Target::Pinned(_) => "pinned",
            Target::Unpinned(_) => "unpinned",
            Target::Gone => "gone",
        };
        f.debug_struct("ProcessHandle")
            .field("pid", &self.pid)
            .field("what", &self.what)
            .field("target", &target)
            .finish()
    }
}

impl ProcessHandle {
    /// The init of the container that `record` describes.
    pub fn for_init(record: &StartedRecord, what: &str) -> Result<Self, ProcessError> {
        Self::recorded_with(&LinuxKernel, record.init_pid, StartCheck::of(record), what)
    }

    /// The process recorded at `pid` with `start`, through `kernel`.
    pub fn recorded_with(
        kernel: &dyn Kernel,
        pid: i32,
        start: StartCheck,
        what: &str,
    ) -> Result<Self, ProcessError> {
        Self::open_if_with(kernel, pid, what, move |k, pid| start.matches(k, pid))
    }

    /// The process now at `pid`, if `is_it` says it is the wanted one.
    pub fn open_if(
        pid: i32,
        what: &str,
        is_it: impl Fn(&dyn Kernel, i32) -> bool + Send + Sync + 'static,
    ) -> Result<Self, ProcessError> {
        Self::open_if_with(&LinuxKernel, pid, what, is_it)
    }

    /// [`Self::open_if`] through `kernel`. `is_it` runs once the pidfd is open; a
    /// probe through the pidfd afterwards proves that what it read was that process.
    pub fn open_if_with(
        kernel: &dyn Kernel,
        pid: i32,
        what: &str,
        is_it: impl Fn(&dyn Kernel, i32) -> bool + Send + Sync + 'static,
    ) -> Result<Self, ProcessError> {
        if pid <= 0 {
            return Err(ProcessError::NotAPid {
                pid,
                what: what.to_string(),
            });
        }
        let handle = |target| Self {
            pid,
            what: Arc::from(what),
            target: Arc::new(target),
        };
        let sys = |call, source| ProcessError::Sys {
            call,
            pid,
            what: what.to_string(),
            source,
        };
        let fd = match kernel.pidfd_open(Pid::from_raw(pid)) {
            Ok(fd) => fd,
            Err(nix::Error::ESRCH) => return Ok(handle(Target::Gone)),
            Err(nix::Error::ENOSYS) => {
                let target = if is_it(kernel, pid) {
                    Target::Unpinned(Box::new(is_it))
                } else {
                    Target::Gone
                };
                return Ok(handle(target));
            }
            Err(e) => return Err(sys("pidfd_open", e)),
        };
        if !is_it(kernel, pid) {
            tracing::debug!(pid, what, "the process at this pid is not the one wanted");
            return Ok(handle(Target::Gone));
        }
        match kernel.pidfd_send_signal(fd.as_fd(), None) {
            Ok(()) => Ok(handle(Target::Pinned(fd))),
            // Reaped between the open and the check: /proc may have shown a successor.
            Err(nix::Error::ESRCH) => Ok(handle(Target::Gone)),
            Err(e) => Err(sys("pidfd_send_signal (probe)", e)),
        }
    }

    /// A handle that signals nothing: for a process that could not be opened (the
    /// reason is logged where that happened).
    pub fn gone(pid: i32, what: &str) -> Self {
        Self {
            pid,
            what: Arc::from(what),
            target: Arc::new(Target::Gone),
        }
    }

    /// The pid the handle was opened from (for logs; never to be signalled).
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Whether the wanted process was already gone when the handle was opened.
    pub fn is_gone(&self) -> bool {
        matches!(*self.target, Target::Gone)
    }

    /// Whether the wanted process still exists (a zombie does).
    pub fn is_alive(&self) -> bool {
        self.is_alive_with(&LinuxKernel)
    }

    /// [`Self::is_alive`] through `kernel` (the one the handle was opened with).
    pub fn is_alive_with(&self, kernel: &dyn Kernel) -> bool {
        match &*self.target {
            Target::Gone => false,
            Target::Pinned(fd) => kernel.pidfd_send_signal(fd.as_fd(), None).is_ok(),
            Target::Unpinned(is_it) => is_it(kernel, self.pid),
        }
    }

    /// Sends `signal` to the wanted process, if it still exists.
    pub fn signal(&self, signal: Signal) -> Result<Delivery, ProcessError> {
        self.signal_with(&LinuxKernel, signal)
    }

    /// [`Self::signal`] through `kernel` (the one the handle was opened with).
    pub fn signal_with(
        &self,
        kernel: &dyn Kernel,
        signal: Signal,
    ) -> Result<Delivery, ProcessError> {
        let sent = match &*self.target {
            Target::Gone => return Ok(Delivery::Gone),
            Target::Pinned(fd) => kernel.pidfd_send_signal(fd.as_fd(), Some(signal)),
            Target::Unpinned(is_it) => {
                if !is_it(kernel, self.pid) {
                    return Ok(Delivery::Gone);
                }
                kernel.kill(Pid::from_raw(self.pid), Some(signal))
            }
        };
        match sent {
            Ok(()) => Ok(Delivery::Sent),
            Err(nix::Error::ESRCH) => Ok(Delivery::Gone),
            Err(source) => Err(ProcessError::Sys {
                call: "signal",
                pid: self.pid,
                what: self.what.to_string(),
                source,
            }),
        }
    }
}

#[cfg(test)]
#[path = "process_handle_tests.rs"]
mod tests;
