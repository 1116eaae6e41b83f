//! The shim's second half, from the container's start to its exit record: copy its
//! stdout/stderr into the CRI log, reap it, record and report its exit.
//!
//! The full podhost binary (31 MB, libcontainer and all) is needed to create a
//! container, not to watch it: once the container runs, the shim execs the small
//! `podhost-monitor` binary in place (same pid, still the subreaper and the parent of
//! the container's init, same report pipe and shim log), which runs [`watch`]. Its
//! pages are shared between all monitors, and it dirties few of its own: that is the
//! per-container cost that stays for the container's whole life. After the exit is
//! reported, the monitor releases the container itself (runtime::lost::release_container:
//! cgroup, rootfs, libcontainer's state dir). A container that is over within the shim's
//! short grace (`SHORT_CONTAINER_GRACE` in process.rs) is watched by the shim itself,
//! with this module's [`watch`]: the monitor's exec would buy nothing.
//!
//! argv of the monitor: `podhost-monitor shim CONFIG STATE_JSON` — `shim` and the config
//! path where the daemon and tools look for them (`runtime::shim_client::is_our_shim`).

use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::Utc;
use nix::sys::signal::{SigHandler, Signal, signal};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use super::kernel;
use podhost_disk::records::{EXIT_FILE, ExitRecord, StartedRecord};
use podhost_disk::{read_json, write_json_atomic};
use podhost_runtime::cgroup_v2::MemoryEvents;
use podhost_runtime::shim_config::{ShimConfig, ShimReady};

/// The monitor binary's file name, next to the podhost binary.
pub const MONITOR_EXE: &str = "podhost-monitor";

/// What the shim hands to the monitor on its command line.
#[derive(Debug, Serialize, Deserialize)]
pub struct MonitorState {
    pub started: StartedRecord,
    /// The read ends of the container's stdout and stderr pipes (inherited).
    pub stdout_fd: RawFd,
    pub stderr_fd: RawFd,
    pub oom_baseline: Option<MemoryEvents>,
    /// The full binary. This monitor releases the container itself after the exit;
    /// monitors of versions before 2026-11-25 exec'd `podhost shim-cleanup` from it.
    pub podhost_exe: PathBuf,
}

/// Why the monitor could not take over (the shim then watches the container itself).
#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    #[error("no monitor binary at {0}")]
    Missing(PathBuf),
    #[error("cannot find the podhost binary: {0}")]
    OwnExe(#[source] std::io::Error),
    #[error("cannot keep the log pipe {fd} open across exec: {source}")]
    Inherit {
        fd: RawFd,
        #[source]
        source: nix::Error,
    },
    #[error("cannot encode the monitor's state: {0}")]
    Encode(#[source] serde_json::Error),
    #[error("exec {path}: {source}")]
    Exec {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("usage: {MONITOR_EXE} shim CONFIG STATE_JSON (started by `podhost shim` only)")]
    Usage,
    #[error("reading the shim config {path}: {reason}")]
    Config { path: PathBuf, reason: String },
    #[error("decoding the monitor's state: {0}")]
    Decode(#[source] serde_json::Error),
}

/// Where the monitor is looked for: see `runtime::helper_exe::find`.
fn find_monitor() -> Result<PathBuf, MonitorError> {
    let exe = std::env::current_exe().map_err(MonitorError::OwnExe)?;
    podhost_runtime::helper_exe::find(&exe, MONITOR_EXE)
        .ok_or_else(|| MonitorError::Missing(exe.with_file_name(MONITOR_EXE)))
}

/// The binary this shim runs (podhost-shim or podhost), for the monitor's cleanup exec.
pub fn own_exe() -> Result<PathBuf, MonitorError> {
    std::env::current_exe().map_err(MonitorError::OwnExe)
}

/// Replaces this process (the shim, single-threaded at this point) with the monitor.
/// Returns only on failure.
pub fn exec_monitor(config_path: &Path, state: &MonitorState) -> MonitorError {
    let run = || -> Result<std::convert::Infallible, MonitorError> {
        let monitor = find_monitor()?;
        for fd in [state.stdout_fd, state.stderr_fd] {
            // SAFETY: the fds are the shim's own open pipe ends, alive for this call.
            let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
            nix::fcntl::fcntl(
                borrowed,
                nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
            )
            .map_err(|source| MonitorError::Inherit { fd, source })?;
        }
        let encoded = serde_json::to_string(state).map_err(MonitorError::Encode)?;
        let source = std::process::Command::new(&monitor)
            .arg("shim")
            .arg(config_path)
            .arg(encoded)
            .exec();
        Err(MonitorError::Exec {
            path: monitor,
            source,
        })
    };
    match run() {
        Ok(never) => match never {},
        Err(e) => e,
    }
}

/// `podhost-monitor shim CONFIG STATE_JSON`: watches the container until it exits.
pub fn monitor_main(args: &[String]) -> i32 {
    // std resets SIGPIPE for the programs it execs: the daemon may be gone, and a
    // write to the report pipe must not kill the monitor; nor the daemon's SIGHUP.
    // SAFETY: SIG_IGN installs no handler code; it is always sound.
    unsafe {
        let _ = signal(Signal::SIGPIPE, SigHandler::SigIgn);
        let _ = signal(Signal::SIGHUP, SigHandler::SigIgn);
    }
    // fd 2 is the shim log (the shim set it up before the exec).
    let _ = tracing::subscriber::set_global_default(super::monitor_log::StderrLog);
    match monitor_setup(args) {
        Ok((_config_path, cfg, state)) => {
            // SAFETY: the shim passed these fds to us open (CLOEXEC cleared) and owns
            // them nowhere else any more: the exec replaced it.
            let (stdout_r, stderr_r) = unsafe {
                (
                    OwnedFd::from_raw_fd(state.stdout_fd),
                    OwnedFd::from_raw_fd(state.stderr_fd),
                )
            };
            watch(
                &cfg,
                state.started,
                stdout_r,
                stderr_r,
                state.oom_baseline,
                || release_after_exit(&cfg),
            )
        }
        Err(e) => {
            // Without its config the monitor cannot know the container: the daemon
            // finds a dead shim and reaps what is left (runtime/lost.rs).
            tracing::error!(error = %e, "the monitor cannot start");
            1
        }
    }
}

fn monitor_setup(args: &[String]) -> Result<(PathBuf, ShimConfig, MonitorState), MonitorError> {
    let [_, shim, config, state] = args else {
        return Err(MonitorError::Usage);
    };
    if shim != "shim" {
        return Err(MonitorError::Usage);
    }
    let config_path = PathBuf::from(config);
    let cfg: ShimConfig = match read_json(&config_path) {
        Ok(Some(c)) => c,
        Ok(None) => {
            return Err(MonitorError::Config {
                path: config_path,
                reason: "missing".into(),
            });
        }
        Err(e) => {
            return Err(MonitorError::Config {
                path: config_path,
                reason: e.to_string(),
            });
        }
    };
    let state: MonitorState = serde_json::from_str(state).map_err(MonitorError::Decode)?;
    Ok((config_path, cfg, state))
}

/// After the exit: what libcontainer's delete would do (cgroup, state dir) and the
/// rootfs unmount, in this process. It used to exec the full binary's `shim-cleanup`
/// for libcontainer's delete: an exec of a 14 MB binary and libcgroups' dozen mountinfo
/// reads per container (that command stays for monitors started by older versions).
pub(super) fn release_after_exit(cfg: &ShimConfig) {
    let released = podhost_runtime::lost::release_container(&cfg.bundle);
    if released.killed > 0 || released.survivors > 0 {
        tracing::warn!(container = %cfg.container_id, ?released, "processes outlived the container's init; killed");
    }
}

/// Copies the container's output into its log, reaps it, records and reports its exit,
/// then lets queued log compressions finish and runs `cleanup`. Returns the exit code
/// of the shim process.
pub fn watch(
    cfg: &ShimConfig,
    started: StartedRecord,
    stdout_r: OwnedFd,
    stderr_r: OwnedFd,
    oom_baseline: Option<MemoryEvents>,
    cleanup: impl FnOnce(),
) -> i32 {
    let log_path = cfg.log_path.clone();
    let log_opts = podhost_logs::WriterOptions {
        rotation: cfg.log_rotation,
        drop_record: Some(cfg.bundle.join(podhost_logs::LOG_DROPS_FILE)),
    };
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    // The only thread besides this one (it may start one more to compress rotated logs).
    let log_thread = std::thread::spawn(move || {
        let drained = done_tx.clone();
        let copied =
            podhost_logs::copy_streams(stdout_r, stderr_r, &log_path, &log_opts, None, move || {
                let _ = drained.send(());
            });
        if let Err(e) = copied {
            tracing::error!(error = %e, "log copy failed");
        }
        // Second signal: queued compressions are done too.
        let _ = done_tx.send(());
    });
    let (exit_code, sig) = reap_until(started.init_pid);
    let finished_at = Utc::now();
    // The pid namespace is gone, so the pipes close; don't wait forever if a stray
    // process outside it kept them.
    let drained = done_rx.recv_timeout(Duration::from_secs(5)).is_ok();
    let (oom_killed, memory_peak, memory_max) =
        kernel::oom_verdict(cfg.cgroup_dir.as_deref(), oom_baseline);
    let record = ExitRecord {
        exit_code,
        signal: sig,
        started_at: started.started_at,
        finished_at,
        oom_killed,
        memory_peak,
        memory_max,
        unknown: None,
    };
    // The daemon learns the exit first and shows it; the two fsyncs of the record
    // (0.5-11 ms on this disk under load: most of the exit -> status time) run while it
    // does. Whatever must survive a crash waits for `Recorded` (or, without it, for this
    // process's end; see worker/exit.rs), so a monitor killed in between loses nothing:
    // the daemon records the exit it was told itself.
    report(&ShimReady::Exited(record.clone()));
    stop_here_for_tests();
    match write_json_atomic(&cfg.bundle.join(EXIT_FILE), &record) {
        Ok(()) => report(&ShimReady::Recorded),
        Err(e) => tracing::error!(error = %e, "cannot record the exit"),
    }
    tracing::info!(container = %cfg.container_id, exit_code, "container exited");
    // Let a compression of a rotated log finish (bounded), so no `.tmp` is left; not
    // when a stray process still holds the pipes (the copy never ended).
    if drained && done_rx.recv_timeout(Duration::from_secs(10)).is_ok() {
        let _ = log_thread.join();
    }
    cleanup();
    0
}

/// Debug builds only: with `PODHOST_TEST_MONITOR_STOP_AFTER_REPORT` set (inherited from
/// the daemon), the monitor stops itself (SIGSTOP) between reporting the exit and
/// recording it, so that tests can kill it or the daemon in that window.
fn stop_here_for_tests() {
    #[cfg(debug_assertions)]
    if std::env::var_os("PODHOST_TEST_MONITOR_STOP_AFTER_REPORT").is_some() {
        let _ = nix::sys::signal::raise(Signal::SIGSTOP);
    }
}

/// Reaps every child (we are the subreaper) until the init process's status is known.
fn reap_until(init_pid: i32) -> (i32, Option<i32>) {
    loop {
        match waitpid(Pid::from_raw(-1), None) {
            Ok(WaitStatus::Exited(pid, code)) if pid.as_raw() == init_pid => return (code, None),
            Ok(WaitStatus::Signaled(pid, sig, _)) if pid.as_raw() == init_pid => {
                return (128 + sig as i32, Some(sig as i32));
            }
            Ok(_) | Err(nix::Error::EINTR) => continue,
            Err(e) => {
                tracing::error!(error = %e, "waitpid failed; init status unknown");
                return (137, None);
            }
        }
    }
}

/// One JSON line on stdout, the report pipe to the daemon.
pub(super) fn report(ready: &ShimReady) {
    let mut line = serde_json::to_vec(ready).unwrap_or_default();
    line.push(b'\n');
    let mut out = std::io::stdout();
    let _ = out.write_all(&line).and_then(|_| out.flush());
}
