//! The shim's whole life, from config to exit record.

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use chrono::Utc;
use libcontainer::container::Container;
use libcontainer::container::builder::ContainerBuilder;
use libcontainer::syscall::syscall::SyscallType;
use nix::sys::signal::{SigHandler, Signal, signal};
use tracing_subscriber::fmt::writer::BoxMakeWriter;

use super::error::ShimError;
use super::kernel;
use super::monitor::report;
use podhost_disk::records::{SHIM_CONFIG_FILE, SHIM_LOG_FILE, STARTED_FILE, StartedRecord};
use podhost_disk::{read_json, write_json_boot_scoped};
use podhost_runtime::cgroup_v2::MemoryEvents;
use podhost_runtime::not_applied::{self, NotApplied, RLIMIT_NOT_APPLIED};
use podhost_runtime::overlay;
use podhost_runtime::shim_config::{ShimConfig, ShimReady};
use podhost_runtime::workload::ContainerExecutor;

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
            // The log exists before the container is reported running (containerd's
            // shim opens it before the start too): `podhost logs` right after Running
            // must not find it missing while the monitor is still being exec'd. The
            // monitor's writer appends to it.
            if let Err(e) = podhost_logs::writer::open_log_file(&cfg.log_path) {
                tracing::warn!(error = %e, "cannot create the container log yet");
            }
            // Boot-scoped: it tells a restarted daemon which shim to adopt.
            if let Err(e) = write_json_boot_scoped(&cfg.bundle.join(STARTED_FILE), &started) {
                tracing::error!(error = %e, "cannot record the start");
            }
            // stdout stays the report pipe: the daemon may be gone (EPIPE is ignored).
            report(&ShimReady::Started(started.clone()));
            if kernel::init_exits_within(started.init_pid, SHORT_CONTAINER_GRACE) {
                // Over at once (a short job, `/bin/true`, an init container with nothing
                // to do): no container lives on to be watched, so the monitor's exec (its
                // start-up and page faults, ~1 ms of CPU) would buy nothing. This
                // process records and reports the exit and releases the container as
                // the monitor does.
                tracing::info!(container = %cfg.container_id, "the container exited before the monitor took over; the shim records its exit");
                return super::monitor::watch(
                    &cfg,
                    started,
                    stdout_r,
                    stderr_r,
                    oom_baseline,
                    || super::monitor::release_after_exit(&cfg),
                );
            }
            // The container runs: the small monitor binary takes over this process (a
            // fraction of this binary's memory for the container's whole life). Only
            // returns when it cannot; this process then monitors the container itself.
            let handed = match super::monitor::own_exe() {
                Ok(podhost_exe) => super::monitor::exec_monitor(
                    config_path,
                    &super::monitor::MonitorState {
                        started: started.clone(),
                        stdout_fd: stdout_r.as_raw_fd(),
                        stderr_fd: stderr_r.as_raw_fd(),
                        oom_baseline,
                        podhost_exe,
                    },
                ),
                Err(e) => e,
            };
            tracing::warn!(container = %cfg.container_id, error = %handed, "the monitor cannot take over; the shim monitors the container itself");
            super::monitor::watch(&cfg, started, stdout_r, stderr_r, oom_baseline, || {
                cleanup(&cfg)
            })
        }
    }
}

/// `podhost shim-cleanup CONFIG`: what the monitor leaves to the full binary once the
/// container exited and its exit is reported: libcontainer's delete and the rootfs.
pub fn cleanup_after_monitor(config_path: &Path) -> i32 {
    let cfg: ShimConfig = match read_json(config_path) {
        Ok(Some(c)) => c,
        _ => return 1,
    };
    init_logging(&cfg);
    cleanup(&cfg);
    0
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
    init_logging(cfg);
}

/// The shim log on stderr and as the tracing writer.
fn init_logging(cfg: &ShimConfig) {
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

/// How long the shim waits for the container's exit, once it runs, before the monitor
/// takes this process over. The exit is reported as it happens either way; a container
/// that lives longer only keeps the shim's larger memory this much longer. A busybox
/// `/bin/true` exits 1-3 ms after the start on a busy 2-core machine.
const SHORT_CONTAINER_GRACE: std::time::Duration = std::time::Duration::from_millis(10);

/// The longest libcontainer may take to create and start the container: a child of it
/// killed midway leaves it waiting forever, and a shim stuck like that would hold the
/// pod in ContainerCreating for good. SIGALRM's default action ends the shim; the
/// daemon then reaps what is left (runtime/lost.rs).
const CREATE_TIMEOUT_SECS: u32 = 60;

fn create_and_start(cfg: &ShimConfig) -> Result<Started, ShimError> {
    // What the container asked for and will run without: recorded before the start is
    // reported, for the daemon to turn into pod events.
    let mut not_applied = Vec::new();
    // Pays the kernel's cgroup-migration wait while the rootfs is mounted, not inside
    // libcontainer's start (see runtime::cgroup_attach_primer).
    let primer = kernel::start_cgroup_primer(cfg);
    super::config_durable::wait_for_durable_config()?;
    mount_rootfs(cfg, &mut not_applied)?;
    // SAFETY: alarm(2) only arms this process's timer (forked children do not inherit
    // it); it is disarmed below once the container runs.
    unsafe { libc::alarm(CREATE_TIMEOUT_SECS) };
    let started = create_and_start_inner(cfg, not_applied, primer);
    // SAFETY: as above; 0 disarms the timer.
    unsafe { libc::alarm(0) };
    started
}

fn create_and_start_inner(
    cfg: &ShimConfig,
    mut not_applied: Vec<NotApplied>,
    primer: Option<podhost_runtime::cgroup_attach_primer::AttachPrimer>,
) -> Result<Started, ShimError> {
    // A damaged program is refused here, before the container exists, with a clear error.
    let seccomp = podhost_runtime::seccomp::read_precompiled(&cfg.bundle.join(SHIM_CONFIG_FILE))
        .map_err(ShimError::ConfigRead)?;
    if let Some(seccomp) = &seccomp {
        seccomp.filter.verify().map_err(ShimError::Seccomp)?;
    }
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
        .with_executor(ContainerExecutor::for_container(seccomp.as_ref()))
        .as_init(&cfg.bundle)
        .with_systemd(false)
        .with_detach(true)
        .build()
        .map_err(ShimError::Create)?;
    // The intermediate process has joined the container's cgroups: no more writes to
    // keep fast.
    kernel::finish_cgroup_primer(cfg, primer);
    let init_pid = container
        .pid()
        .map(|p| p.as_raw())
        .ok_or(ShimError::NoInitPid)?;
    // The init waits for start(): its device rules, score and OOM baseline are set
    // before it runs. Without its device rules it must not run at all.
    confine_devices(cfg)?;
    if let Some(adj) = cfg.oom_score_adj
        && let Err(n) = kernel::write_oom_score_adj(&init_pid.to_string(), adj)
    {
        not_applied.push(n);
    }
    for n in &not_applied {
        tracing::warn!(container = %cfg.container_id, reason = %n.reason, "{}", n.message());
    }
    if let Err(e) = not_applied::record(&cfg.bundle, &not_applied) {
        tracing::error!(error = %e, "cannot record the settings not applied");
    }
    let oom_baseline = kernel::oom_baseline(cfg.cgroup_dir.as_deref());
    // The init is this process's to reap (its subreaper) and is not reaped before the
    // monitor waits, so the pid still names it here: its start time is what lets the
    // daemon tell it from a later process given the same pid.
    let init_start_ticks = podhost_disk::proc_start::read_start_ticks(init_pid);
    if init_start_ticks.is_none() {
        tracing::warn!(container = %cfg.container_id, init_pid, "cannot read the init's start time; the daemon falls back to a weaker check before signalling it");
    }
    container.start().map_err(ShimError::Start)?;
    Ok((
        StartedRecord {
            shim_pid: std::process::id() as i32,
            init_pid,
            started_at: Utc::now(),
            init_start_ticks,
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
    let way = podhost_runtime::userns::rootfs::mount_rootfs(
        ns,
        &cfg.lower_dirs,
        &cfg.bundle,
        &cfg.rootfs,
    )
    .map_err(ShimError::UsernsRootfs)?;
    tracing::info!(
        container = %cfg.container_id,
        ?way,
        base = ns.map.base,
        millis = podhost_model_core::convert::millis(started.elapsed()),
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
    for refused in podhost_runtime::rlimit_host::raise_own_to(&rlimits) {
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
    let confinement = podhost_runtime::devices::confine_container(&cfg.bundle.join("config.json"))
        .map_err(ShimError::Devices)?;
    // One line per start: how the container was confined and what it cost.
    tracing::info!(
        container = %cfg.container_id,
        ?confinement,
        micros = podhost_model_core::convert::micros(started.elapsed()),
        "device rules applied"
    );
    Ok(())
}

pub(super) fn cleanup(cfg: &ShimConfig) {
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

/// Reports `error` to the daemon (its text becomes the container's start failure).
fn report_failure(error: &ShimError) -> i32 {
    report(&ShimReady::Failed {
        message: error.to_string(),
    });
    1
}
