//! Takes the kernel's cgroup-migration grace period off a container start's critical path.
//!
//! Every write to a `cgroup.procs` file, in any hierarchy (v1 or v2, even one that moves
//! a process where it already is), takes the kernel's one global threadgroup rwsem for
//! writing. That is a per-cpu rwsem: the first writer after a quiet spell waits for a
//! whole RCU grace period before it may proceed, and writers that follow within about
//! one more grace period pass at once. Measured on the 2-core dev VM (kernel 6.18): the
//! first write 6–24 ms (median ~12), one right after it 0.03–0.2 ms, one 10 ms after the
//! last still fast, one 20–40 ms after it slow again.
//!
//! libcontainer's intermediate process makes such writes in the middle of every start
//! (it joins the container's cgroups), on cgroup v2 the shim does too (it moves into its
//! leaf), so each start used to wait out a grace period. The primer makes the first write
//! itself, on its own thread, as soon as the shim starts, while the shim mounts the
//! rootfs and libcontainer forks; then it writes again every [`PERIOD`] so that the
//! kernel stays in its "writers recently" state until the start is done. libcontainer's
//! writes then pass at once. A cgroup2 hierarchy mounted with `favordynmods` has no such
//! wait at all; the primer then costs a few microseconds per write.
//!
//! The thread only makes raw `write(2)` calls on a descriptor opened beforehand and
//! sleeps: it allocates nothing and holds no lock while libcontainer forks, so the forked
//! child never inherits a lock the thread held.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::RuntimeError;

/// How often the primer writes again: well inside the ~10–20 ms the kernel keeps its
/// fast path after a writer.
pub const PERIOD: Duration = Duration::from_millis(4);

/// The longest the primer keeps writing when nobody stops it (a start stuck in
/// libcontainer): it is an optimisation, never a load on the host.
pub const LONGEST: Duration = Duration::from_secs(2);

/// How long the daemon keeps the fast path warm for a `podhost exec-helper` it spawns
/// (exec probes, `kubectl exec`): the helper's start up to libcontainer's cgroup
/// writes, with room for a loaded host.
pub const EXEC_HELPER_PRIMING: Duration = Duration::from_millis(100);

/// Where the primer thread is: started (its own start-up, which may allocate, done),
/// then the first write's outcome, 0 or the errno.
#[derive(Default)]
struct FirstWrite {
    state: Mutex<ThreadState>,
    changed: Condvar,
}

#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum ThreadState {
    #[default]
    Spawned,
    Running,
    Written(i32),
}

impl FirstWrite {
    fn set(&self, state: ThreadState) {
        let mut slot = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *slot = state;
        self.changed.notify_all();
    }

    fn wait_while(&self, pending: impl Fn(ThreadState) -> bool) -> ThreadState {
        let guard = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *self
            .changed
            .wait_while(guard, |s| pending(*s))
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A running primer (see the module doc); [`AttachPrimer::finish`] stops it.
pub struct AttachPrimer {
    procs: PathBuf,
    stop: Arc<AtomicBool>,
    first: Arc<FirstWrite>,
}

impl AttachPrimer {
    /// Moves this process into the cgroup whose `cgroup.procs` is `procs` (the cgroup it
    /// is already in makes the move a no-op) on a thread of its own, then keeps writing
    /// until [`AttachPrimer::finish`] or [`LONGEST`].
    pub fn start(procs: &Path) -> Result<Self, RuntimeError> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(procs)
            .map_err(|source| RuntimeError::Io {
                what: "opening",
                path: procs.to_path_buf(),
                source,
            })?;
        Self::start_on(file, procs)
    }

    /// [`AttachPrimer::start`] on `procs` opened for writing as `file`.
    fn start_on(mut file: File, procs: &Path) -> Result<Self, RuntimeError> {
        let pid = std::process::id().to_string().into_bytes();
        let stop = Arc::new(AtomicBool::new(false));
        let first = Arc::new(FirstWrite::default());
        let (thread_stop, thread_first) = (stop.clone(), first.clone());
        std::thread::Builder::new()
            .name("cgroup-primer".into())
            .spawn(move || prime(&mut file, &pid, &thread_stop, &thread_first, LONGEST))
            .map_err(|source| RuntimeError::Io {
                what: "starting the cgroup primer thread for",
                path: procs.to_path_buf(),
                source,
            })?;
        // The caller forks next (libcontainer): the thread's own start-up, which may
        // allocate, is over before that.
        first.wait_while(|s| s == ThreadState::Spawned);
        Ok(Self {
            procs: procs.to_path_buf(),
            stop,
            first,
        })
    }

    /// Stops the writes and waits for the first one (the move) to have been made: after
    /// this the process is in the cgroup, or the error says why not. Never waits for a
    /// later write; the thread ends by itself.
    pub fn finish(&self) -> Result<(), RuntimeError> {
        self.stop.store(true, Ordering::Relaxed);
        match self
            .first
            .wait_while(|s| !matches!(s, ThreadState::Written(_)))
        {
            ThreadState::Written(errno) if errno != 0 => Err(RuntimeError::Io {
                what: "moving the process into",
                path: self.procs.clone(),
                source: std::io::Error::from_raw_os_error(errno),
            }),
            _ => Ok(()),
        }
    }
}

impl Drop for AttachPrimer {
    /// A start that failed midway stops the writes too.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The primer thread: the first write, reported; then one per [`PERIOD`] until stopped,
/// `longest` or an error.
fn prime(file: &mut File, pid: &[u8], stop: &AtomicBool, first: &FirstWrite, longest: Duration) {
    let errno = |r: std::io::Result<()>| match r {
        Ok(()) => 0,
        Err(e) => e.raw_os_error().unwrap_or(libc::EIO),
    };
    first.set(ThreadState::Running);
    let outcome = errno(file.write_all(pid));
    first.set(ThreadState::Written(outcome));
    if outcome != 0 {
        return;
    }
    let until = Instant::now() + longest;
    while !stop.load(Ordering::Relaxed) && Instant::now() < until {
        std::thread::sleep(PERIOD);
        if errno(file.write_all(pid)) != 0 {
            return;
        }
    }
}

/// A primer on this process's own cgroup (a no-op move), for a process about to start
/// one that will write a `cgroup.procs` soon: the daemon, before it prepares a bundle
/// and spawns its shim. `None` where it cannot start (said at debug level: it only
/// loses the head start).
pub fn prime_own_cgroup() -> Option<AttachPrimer> {
    let procs = own_cgroup_procs()?;
    AttachPrimer::start(&procs)
        .inspect_err(|e| tracing::debug!(error = %e, "the cgroup primer cannot start"))
        .ok()
}

/// Primes this process's own cgroup for `longest`, with nobody to stop it: for a
/// process whose cgroup write happens in a child it does not follow (the daemon before
/// it spawns `podhost exec-helper`, whose libcontainer joins the container's cgroups a
/// few milliseconds later). Silent where it cannot start: it only loses the head start.
pub fn prime_own_cgroup_for(longest: Duration) {
    let Some(procs) = own_cgroup_procs() else {
        return;
    };
    let Ok(mut file) = std::fs::OpenOptions::new().write(true).open(&procs) else {
        return;
    };
    let pid = std::process::id().to_string().into_bytes();
    let spawned = std::thread::Builder::new()
        .name("cgroup-primer".into())
        .spawn(move || {
            let (stop, first) = (AtomicBool::new(false), FirstWrite::default());
            prime(&mut file, &pid, &stop, &first, longest);
        });
    if let Err(e) = spawned {
        tracing::debug!(error = %e, "the cgroup primer cannot start");
    }
}

/// `cgroup.procs` of this process's own cgroup in one mounted hierarchy (cgroup2 at
/// /sys/fs/cgroup or /sys/fs/cgroup/unified, else the first v1 one found): writing its
/// own pid there moves nothing. `None` where none is found (no cgroupfs mounted).
pub fn own_cgroup_procs() -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    own_cgroup_procs_in(&text, Path::new(super::cgroup_v2::MOUNT))
}

/// [`own_cgroup_procs`] over `/proc/self/cgroup`'s text and the cgroup mount point:
/// the cgroup2 line first (at the mount, or at `unified/` on a hybrid host), then the v1
/// lines in their order; the first `cgroup.procs` that exists.
pub fn own_cgroup_procs_in(proc_self_cgroup: &str, mount: &Path) -> Option<PathBuf> {
    let mut v2 = Vec::new();
    let mut v1 = Vec::new();
    for line in proc_self_cgroup.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let rel = path.trim_start_matches('/');
        if controllers.is_empty() {
            v2.push(mount.join(rel).join("cgroup.procs"));
            v2.push(mount.join("unified").join(rel).join("cgroup.procs"));
        } else {
            let hierarchy = controllers.trim_start_matches("name=");
            v1.push(mount.join(hierarchy).join(rel).join("cgroup.procs"));
        }
    }
    v2.into_iter().chain(v1).find(|p| p.is_file())
}

#[cfg(test)]
#[path = "cgroup_attach_primer_tests.rs"]
mod tests;
