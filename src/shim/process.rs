//! The shim's whole life, from config to exit record.

use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::Duration;

use chrono::Utc;
use libcontainer::container::Container;
use libcontainer::container::builder::ContainerBuilder;
use libcontainer::syscall::syscall::SyscallType;
use nix::sys::signal::{SigHandler, Signal, signal};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::Pid;
use tracing_subscriber::fmt::writer::BoxMakeWriter;

use super::error::ShimError;
use super::kernel;
use crate::disk::records::{EXIT_FILE, ExitRecord, SHIM_LOG_FILE, STARTED_FILE, StartedRecord};
use crate::disk::{read_json, write_json_atomic};
use crate::runtime::cgroup_v2::MemoryEvents;
use crate::runtime::not_applied::{self, NotApplied, RLIMIT_NOT_APPLIED};
use crate::runtime::overlay;
use crate::runtime::shim_config::{ShimConfig, ShimReady};
use crate::runtime::workload::ContainerExecutor;

/// Runs the shim for the config at `config_path`; returns the process exit code.
pub fn run(config_path: &Path) -> i32 {
    let cfg: ShimConfig = match read_json(config_path) {
        Ok(Some(c)) => c,
        Ok(None) => {
            return report_failure(&ShimError::ConfigMissing {
                path: config_path.to_path_buf(),
            });
        }
        Err(e) => return report_failure(&ShimError::ConfigRead(e)),
    };
    detach_from_daemon(&cfg);
    kernel::settle_shim(&cfg);
    tracing::info!(container = %cfg.container_id, "shim starting");
    match create_and_start(&cfg) {
        Err(e) => {
            tracing::error!(container = %cfg.container_id, error = %e, "start failed");
            cleanup(&cfg);
            report_failure(&e)
        }
        Ok((started, stdout_r, stderr_r, oom_baseline)) => {
            if let Err(e) = write_json_atomic(&cfg.bundle.join(STARTED_FILE), &started) {
                tracing::error!(error = %e, "cannot record the start");
            }
            // stdout stays the report pipe: the daemon may be gone (EPIPE is ignored).
            report(&ShimReady::Started(started.clone()));
            let log_path = cfg.log_path.clone();
            let log_opts = crate::logs::WriterOptions {
                rotation: cfg.log_rotation,
                drop_record: Some(cfg.bundle.join(crate::logs::LOG_DROPS_FILE)),
            };
            let (done_tx, done_rx) = std::sync::mpsc::channel();
            // The only thread the shim ever has (it may start one more to compress
            // rotated logs); libcontainer is not called while it copies.
            let log_thread = std::thread::spawn(move || {
                let drained = done_tx.clone();
                let copied = crate::logs::copy_streams(
                    stdout_r,
                    stderr_r,
                    &log_path,
                    &log_opts,
                    None,
                    move || {
                        let _ = drained.send(());
                    },
                );
                if let Err(e) = copied {
                    tracing::error!(error = %e, "log copy failed");
                }
                // Second signal: queued compressions are done too.
                let _ = done_tx.send(());
            });
            let (exit_code, sig) = reap_until(started.init_pid);
            let finished_at = Utc::now();
            // The pid namespace is gone, so the pipes close; don't wait forever if a
            // stray process outside it kept them.
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
            if let Err(e) = write_json_atomic(&cfg.bundle.join(EXIT_FILE), &record) {
                tracing::error!(error = %e, "cannot record the exit");
            }
            report(&ShimReady::Exited(record));
            tracing::info!(container = %cfg.container_id, exit_code, "container exited");
            cleanup(&cfg);
            // Let a compression of a rotated log finish (bounded), so no `.tmp` is left;
            // not when a stray process still holds the pipes (the copy never ended).
            if drained && done_rx.recv_timeout(Duration::from_secs(10)).is_ok() {
                let _ = log_thread.join();
            }
            0
        }
    }
}

/// New session, subreaper, immune to the daemon's SIGHUP/SIGPIPE, own log file on stderr.
fn detach_from_daemon(cfg: &ShimConfig) {
    let _ = nix::unistd::setsid();
    // SAFETY: prctl(PR_SET_CHILD_SUBREAPER) takes plain integer arguments and only
    // changes this process's attributes.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
    // SAFETY: SIG_IGN installs no handler code; it is always sound.
    unsafe {
        let _ = signal(Signal::SIGPIPE, SigHandler::SigIgn);
        let _ = signal(Signal::SIGHUP, SigHandler::SigIgn);
    }
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(cfg.bundle.join(SHIM_LOG_FILE))
        .ok();
    if let Some(f) = &log {
        let _ = nix::unistd::dup2_stderr(f);
    }
    // Logs go to the log file's own descriptor, not to fd 2: libcontainer logs from the
    // container's init too (seccomp warnings, before the exec), where fd 2 is already
    // the container's stderr, and those lines must not land in the container's log.
    let writer = match log {
        Some(f) => BoxMakeWriter::new(std::sync::Mutex::new(f)),
        None => BoxMakeWriter::new(std::io::stderr),
    };
    let _ = tracing_subscriber::fmt()
        .with_writer(writer)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("PODHOST_SHIM_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .try_init();
}

type Started = (StartedRecord, OwnedFd, OwnedFd, Option<MemoryEvents>);

/// The longest libcontainer may take to create and start the container: a child of it
/// killed midway leaves it waiting forever, and a shim stuck like that would hold the
/// pod in ContainerCreating for good. SIGALRM's default action ends the shim; the
/// daemon then reaps what is left (runtime/lost.rs).
const CREATE_TIMEOUT_SECS: u32 = 60;

fn create_and_start(cfg: &ShimConfig) -> Result<Started, ShimError> {
    // What the container asked for and will run without: recorded before the start is
    // reported, for the daemon to turn into pod events.
    let mut not_applied = Vec::new();
    mount_rootfs(cfg, &mut not_applied)?;
    // SAFETY: alarm(2) only arms this process's timer (forked children do not inherit
    // it); it is disarmed below once the container runs.
    unsafe { libc::alarm(CREATE_TIMEOUT_SECS) };
    let started = create_and_start_inner(cfg, not_applied);
    // SAFETY: as above; 0 disarms the timer.
    unsafe { libc::alarm(0) };
    started
}

fn create_and_start_inner(
    cfg: &ShimConfig,
    mut not_applied: Vec<NotApplied>,
) -> Result<Started, ShimError> {
    let (stdout_r, stdout_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(ShimError::Pipe)?;
    let (stderr_r, stderr_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(ShimError::Pipe)?;
    let stdin = File::open("/dev/null").map_err(ShimError::DevNull)?;
    let mut container = ContainerBuilder::new(cfg.container_id.clone(), SyscallType::default())
        .with_root_path(&cfg.libcontainer_root)
        .and_then(|b| b.validate_id())
        .map_err(ShimError::Create)?
        .with_stdin(OwnedFd::from(stdin))
        .with_stdout(stdout_w)
        .with_stderr(stderr_w)
        .with_executor(ContainerExecutor::for_container())
        .as_init(&cfg.bundle)
        .with_systemd(false)
        .with_detach(true)
        .build()
        .map_err(ShimError::Create)?;
    let init_pid = container
        .pid()
        .map(|p| p.as_raw())
        .ok_or(ShimError::NoInitPid)?;
    // The init waits for start(): its device rules, score and OOM baseline are set
    // before it runs. Without its device rules it must not run at all.
    confine_devices(cfg)?;
    if let Some(adj) = cfg.oom_score_adj {
        if let Err(n) = kernel::write_oom_score_adj(&init_pid.to_string(), adj) {
            not_applied.push(n);
        }
    }
    for n in &not_applied {
        tracing::warn!(container = %cfg.container_id, reason = %n.reason, "{}", n.message());
    }
    if let Err(e) = not_applied::record(&cfg.bundle, &not_applied) {
        tracing::error!(error = %e, "cannot record the settings not applied");
    }
    let oom_baseline = kernel::oom_baseline(cfg.cgroup_dir.as_deref());
    container.start().map_err(ShimError::Start)?;
    Ok((
        StartedRecord {
            shim_pid: std::process::id() as i32,
            init_pid,
            started_at: Utc::now(),
        },
        stdout_r,
        stderr_r,
        oom_baseline,
    ))
}

/// The overlay rootfs; in a pod's user namespace with its snapshots made the pod's
/// (the way taken is logged: idmapped mounts or chowned copies).
fn mount_rootfs(cfg: &ShimConfig, not_applied: &mut Vec<NotApplied>) -> Result<(), ShimError> {
    let Some(ns) = &cfg.userns else {
        return overlay::mount_rootfs(&cfg.lower_dirs, &cfg.bundle, &cfg.rootfs)
            .map_err(ShimError::Rootfs);
    };
    raise_own_rlimits(cfg, not_applied);
    let started = std::time::Instant::now();
    let way =
        crate::runtime::userns::rootfs::mount_rootfs(ns, &cfg.lower_dirs, &cfg.bundle, &cfg.rootfs)
            .map_err(ShimError::UsernsRootfs)?;
    tracing::info!(
        container = %cfg.container_id,
        ?way,
        base = ns.map.base,
        millis = crate::model::convert::millis(started.elapsed()),
        "user-namespaced rootfs mounted"
    );
    Ok(())
}

/// The container's rlimits on the shim itself before it enters the pod's user
/// namespace (see `rlimit_host::raise_own_to`); refusals are recorded as not applied.
fn raise_own_rlimits(cfg: &ShimConfig, not_applied: &mut Vec<NotApplied>) {
    let Ok(spec) = oci_spec::runtime::Spec::load(cfg.bundle.join("config.json")) else {
        return;
    };
    let rlimits = spec
        .process()
        .as_ref()
        .and_then(|p| p.rlimits().clone())
        .unwrap_or_default();
    for refused in crate::runtime::rlimit_host::raise_own_to(&rlimits) {
        let r = &refused.rlimit;
        not_applied.push(NotApplied {
            reason: RLIMIT_NOT_APPLIED.into(),
            setting: format!("{:?}", r.typ()),
            wanted: format!("{}:{}", r.soft(), r.hard()),
            actual: match refused.current {
                Some((soft, hard)) => format!("at most {soft}:{hard}"),
                None => "an unknown limit".into(),
            },
            why: format!(
                "the shim cannot raise its own limit before joining the pod's user \
                 namespace ({}); raising a hard limit needs CAP_SYS_RESOURCE",
                refused.error
            ),
        });
    }
}

/// Applies the container's device rules to its cgroup (see runtime/devices).
fn confine_devices(cfg: &ShimConfig) -> Result<(), ShimError> {
    let started = std::time::Instant::now();
    let confinement = crate::runtime::devices::confine_container(&cfg.bundle.join("config.json"))
        .map_err(ShimError::Devices)?;
    // One line per start: how the container was confined and what it cost.
    tracing::info!(
        container = %cfg.container_id,
        ?confinement,
        micros = crate::model::convert::micros(started.elapsed()),
        "device rules applied"
    );
    Ok(())
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

fn cleanup(cfg: &ShimConfig) {
    let dir = cfg.libcontainer_root.join(&cfg.container_id);
    if dir.exists() {
        match Container::load(dir) {
            Ok(mut c) => {
                if let Err(e) = c.delete(true) {
                    tracing::warn!(error = %e, "libcontainer delete failed");
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot load container state for delete"),
        }
    }
    if let Err(e) = overlay::unmount_rootfs(&cfg.rootfs) {
        tracing::warn!(error = %e, "rootfs unmount failed");
    }
}

fn report(ready: &ShimReady) {
    let mut line = serde_json::to_vec(ready).unwrap_or_default();
    line.push(b'\n');
    let mut out = std::io::stdout();
    let _ = out.write_all(&line).and_then(|_| out.flush());
}

/// Reports `error` to the daemon (its text becomes the container's start failure).
fn report_failure(error: &ShimError) -> i32 {
    report(&ShimReady::Failed {
        message: error.to_string(),
    });
    1
}
