//! The daemon's side of a shim: spawn it, learn of the start, and await the exit without
//! polling (the child's exit, or a pidfd for a shim adopted after a daemon restart).

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use chrono::Utc;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use tokio::io::unix::AsyncFd;

use super::RuntimeError;
use super::lost::reap_lost_container;
use super::process_handle::ProcessHandle;
use super::shim_config::{CONFIG_DURABLE, ShimConfig, ShimReady};
use podhost_disk::records::{
    EXIT_FILE, ExitRecord, SHIM_CONFIG_FILE, SHIM_PID_FILE, STARTED_FILE, StartedRecord,
};
use podhost_disk::{PendingDurability, read_json, write_json_atomic, write_json_durable_later};

/// The safety-net look at a running container's exit record.
pub const RELIST_EVERY: Duration = Duration::from_secs(10);

/// How long a shim may take to report the start (image layers are already unpacked).
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// The read buffer of a shim's report pipe.
const REPORT_BUFFER: usize = 512;

/// A running container, through its shim.
#[derive(Debug)]
pub struct ShimHandle {
    pub started: StartedRecord,
    /// The container's init, to signal (never `started.init_pid` as a number).
    pub init: ProcessHandle,
    pub bundle: PathBuf,
    waiter: Waiter,
    /// The shim's report pipe (only for a shim this daemon spawned).
    reports: Option<tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>>,
}

/// Resolves when the shim process is gone, i.e. its clean-up (cgroup, rootfs) is done.
pub type ShimGone = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Resolves to `true` once the shim has said that `exit.json` is durable, to `false`
/// when it will not say so any more (its report pipe closed or broke first: it died,
/// or it could not write the record).
pub type ExitRecorded = std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>>;

/// A container's end as [`ShimHandle::wait`] learns it.
pub struct ShimExit {
    /// The exit, possibly known before it is durable on disk (see `recorded`).
    pub record: ExitRecord,
    /// Whether `exit.json` became durable. Anything that must survive a crash or a
    /// power loss (the verdict file, the pod's terminal phase, the next attempt) waits
    /// for it; with `false`, the caller awaits `gone` and records the exit itself
    /// ([`record_reported_exit`]).
    pub recorded: ExitRecorded,
    pub gone: ShimGone,
}

impl std::fmt::Debug for ShimExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShimExit")
            .field("record", &self.record)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
enum Waiter {
    Child(tokio::process::Child),
    Pidfd(AsyncFd<OwnedFd>),
}

/// What a container dir says after a daemon restart.
#[derive(Debug)]
pub enum Adopted {
    /// The shim still runs: the container is alive.
    Running(Box<ShimHandle>),
    /// The container exited (possibly while the daemon was down), or its shim was gone
    /// without a record and what was left of it was killed (`ExitRecord::unknown`).
    Exited(ExitRecord),
    /// The attempt never ran its program (the daemon died before the shim was spawned,
    /// or the shim died before starting the container); its dir is removed and the
    /// number may be used again.
    NeverStarted,
}

/// Writes the shim config into the bundle and starts `podhost-shim shim` for it (or
/// `podhost shim` where the small binary is not installed: see `helper_exe`).
pub async fn spawn(podhost_exe: &Path, cfg: &ShimConfig) -> Result<ShimHandle, RuntimeError> {
    let config_path = cfg.bundle.join(SHIM_CONFIG_FILE);
    // Durable although it describes a shim of this boot: after a power loss it is what
    // tells the next daemon where the dead attempt's libcontainer state and rootfs are
    // (see lost::reap_lost_container), so that the attempt number can be used again.
    // Its fsyncs run while the shim execs; the shim makes neither of those before it
    // reads CONFIG_DURABLE on its stdin (see release_when_durable).
    let mut durability = PendingDurability::default();
    write_json_durable_later(&config_path, cfg, &mut durability)?;
    // stderr is the shim's log file, followed into the daemon's log (see shim_log).
    let stderr = super::shim_log::open_for_shim(&cfg.bundle)
        .map_err(|e| RuntimeError::io("open the shim log in", &cfg.bundle, e))?;
    let shim_exe = super::helper_exe::shim_binary(podhost_exe);
    let mut child = tokio::process::Command::new(&shim_exe)
        .arg("shim")
        .arg(&config_path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .kill_on_drop(false)
        .spawn()
        .map_err(|e| RuntimeError::io("spawn shim", &shim_exe, e))?;
    if let Some(pid) = child.id() {
        super::shim_log::forward(&cfg.bundle, pid as i32, super::shim_log::ForwardFrom::Now);
    }
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| RuntimeError::ShimFailed {
            container: cfg.container_id.clone(),
            message: "shim has no stdout".into(),
        })?;
    // The shim writes two short JSON lines in all: a small buffer (a longer line is
    // still read whole), not the default 8 KiB kept per running container.
    let mut lines = tokio::io::BufReader::with_capacity(REPORT_BUFFER, stdout).lines();
    let (released, read) = tokio::join!(
        release_when_durable(durability, child.stdin.take(), &config_path),
        tokio::time::timeout(READY_TIMEOUT, lines.next_line())
    );
    let failed = |message: String| RuntimeError::ShimFailed {
        container: cfg.container_id.clone(),
        message,
    };
    if let Err(e) = released {
        // The shim gave up before it made anything (it reports that, or is gone).
        let _ = child.wait().await;
        return Err(failed(format!("the shim config is not durable: {e}")));
    }
    match read {
        Err(_) => {
            let _ = child.start_kill();
            let _ = child.wait().await;
            let bundle = cfg.bundle.clone();
            let _ = tokio::task::spawn_blocking(move || reap_lost_container(&bundle)).await;
            return Err(failed(format!(
                "shim did not report within {READY_TIMEOUT:?}"
            )));
        }
        Ok(Err(e)) => return Err(failed(format!("reading the shim's report: {e}"))),
        Ok(Ok(_)) => {}
    }
    let line = match read {
        Ok(Ok(Some(line))) => line,
        _ => String::new(),
    };
    match serde_json::from_str::<ShimReady>(line.trim()) {
        Ok(ShimReady::Started(started)) => Ok(ShimHandle {
            init: init_handle(&started, &cfg.bundle),
            started,
            bundle: cfg.bundle.clone(),
            waiter: Waiter::Child(child),
            reports: Some(lines),
        }),
        Ok(ShimReady::Failed { message }) => {
            let _ = child.wait().await;
            Err(failed(message))
        }
        Ok(ShimReady::Exited(_) | ShimReady::Recorded) | Err(_) => {
            let _ = child.wait().await;
            // Killed mid-create, the shim leaves a created container (its init waiting
            // for start) and the rootfs mount behind; nothing else would release them.
            let bundle = cfg.bundle.clone();
            let _ = tokio::task::spawn_blocking(move || reap_lost_container(&bundle)).await;
            let log =
                std::fs::read_to_string(cfg.bundle.join(podhost_disk::records::SHIM_LOG_FILE))
                    .unwrap_or_default();
            Err(failed(format!(
                "shim exited without a report; its log: {}",
                log.trim()
            )))
        }
    }
}

/// Fsyncs the shim config, then tells the shim on its stdin; on failure closes the
/// pipe without the byte, and the shim gives up before it makes anything.
async fn release_when_durable(
    durability: PendingDurability,
    stdin: Option<tokio::process::ChildStdin>,
    config_path: &Path,
) -> Result<(), RuntimeError> {
    let done = tokio::task::spawn_blocking(move || durability.complete()).await;
    match done {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(e.into()),
        Err(e) => {
            return Err(RuntimeError::io(
                "fsync (the task failed)",
                config_path,
                std::io::Error::other(e.to_string()),
            ));
        }
    }
    let Some(mut stdin) = stdin else {
        return Err(RuntimeError::io(
            "tell the shim about",
            config_path,
            std::io::Error::other("the shim has no stdin pipe"),
        ));
    };
    // A shim that died already is seen on its report pipe.
    let _ = stdin.write_all(&[CONFIG_DURABLE]).await;
    Ok(())
}

impl ShimHandle {
    /// Waits for the container's exit and returns it, with futures for its record's
    /// durability and for the end of the shim's clean-up (await it before reusing the
    /// container's cgroup or rootfs).
    ///
    /// The shim's own report line is the fast path: the monitor reports the exit before
    /// it fsyncs `exit.json`, then reports `Recorded`. The shim's exit (child wait or
    /// pidfd) is the sure one; a slow look at `exit.json` every [`RELIST_EVERY`] is only
    /// the safety net for a shim that recorded the exit but hangs in its clean-up. An
    /// exit learnt from the disk is durable already.
    pub async fn wait(self) -> ShimExit {
        let exit_file = self.bundle.join(EXIT_FILE);
        let mut gone: ShimGone = match self.waiter {
            Waiter::Child(mut child) => Box::pin(async move {
                let _ = child.wait().await;
            }),
            Waiter::Pidfd(fd) => Box::pin(async move {
                let _ = fd.readable().await;
            }),
        };
        let reports = self.reports;
        let reported = async move {
            let Some(mut lines) = reports else {
                return std::future::pending().await;
            };
            loop {
                match lines.next_line().await {
                    Ok(Some(line)) => {
                        if let Ok(ShimReady::Exited(rec)) = serde_json::from_str(line.trim()) {
                            return (rec, lines);
                        }
                    }
                    // The shim closed its stdout: only its exit tells now.
                    _ => return std::future::pending().await,
                }
            }
        };
        tokio::pin!(reported);
        // Its first tick is the grid's next instant, within one period: awaited only
        // inside the select below, never before it (the exit must not wait for it).
        let mut ticker = relist_ticker();
        let mut seen_record = false;
        let durable = || -> ExitRecorded { Box::pin(std::future::ready(true)) };
        loop {
            tokio::select! {
                (record, lines) = &mut reported => {
                    return ShimExit { record, recorded: Box::pin(await_recorded(lines)), gone };
                }
                _ = &mut gone => break,
                _ = ticker.tick() => {
                    if exit_file.exists() {
                        if seen_record {
                            tracing::warn!(bundle = %self.bundle.display(), "shim still alive long after recording the exit; using the record");
                            let record = read_exit_or_reap_async(&self.bundle, Some(&self.started)).await;
                            return ShimExit { record, recorded: durable(), gone };
                        }
                        seen_record = true;
                    }
                }
            }
        }
        let record = read_exit_or_reap_async(&self.bundle, Some(&self.started)).await;
        ShimExit {
            record,
            recorded: durable(),
            gone: Box::pin(std::future::ready(())),
        }
    }
}

/// The line after the exit: `Recorded`, or the pipe's end without it.
async fn await_recorded(
    mut lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
) -> bool {
    loop {
        match lines.next_line().await {
            Ok(Some(line)) => {
                if let Ok(ShimReady::Recorded) = serde_json::from_str(line.trim()) {
                    return true;
                }
            }
            _ => return false,
        }
    }
}

/// For a shim that reported the exit but is gone without saying that it recorded it
/// (killed in between, or its write failed): writes the exit it reported as
/// `exit.json` (durable), unless a record is there, after releasing what the shim's
/// clean-up would have released (`shim_gone`: only when it is gone, never under a live
/// one). The reported exit is the truth (the shim took it from waitpid); recording it
/// keeps a restarted daemon from calling the container lost. Blocks: run it off the
/// async threads.
pub fn record_reported_exit(bundle: &Path, reported: &ExitRecord, shim_gone: bool) {
    let exit_file = bundle.join(EXIT_FILE);
    if let Ok(Some(_)) = read_json::<ExitRecord>(&exit_file) {
        return;
    }
    if shim_gone {
        let reaped = reap_lost_container(bundle);
        tracing::warn!(bundle = %bundle.display(), killed = reaped.killed,
            "the shim reported the exit but died before recording it; podhost records it");
    }
    if let Err(e) = write_json_atomic(&exit_file, reported) {
        tracing::warn!(error = %e, "cannot record a reported exit");
    }
}

/// Reads `exit.json`; without one the shim is gone and never recorded the exit: what is
/// left of the container is killed and released, and the exit is recorded (so that the
/// verdict survives another restart) as the kubelet reports a container it lost.
fn read_exit_or_reap(bundle: &Path, started: Option<&StartedRecord>) -> ExitRecord {
    match read_json::<ExitRecord>(&bundle.join(EXIT_FILE)) {
        Ok(Some(r)) => return r,
        Ok(None) => {}
        Err(e) => tracing::warn!(error = %e, "unreadable exit record"),
    }
    let reaped = reap_lost_container(bundle);
    // The shim may have recorded the exit after all, just before it died.
    if let Ok(Some(r)) = read_json::<ExitRecord>(&bundle.join(EXIT_FILE)) {
        return r;
    }
    let now = Utc::now();
    let shim = started
        .map(|s| format!("(pid {}) ", s.shim_pid))
        .unwrap_or_default();
    let message = if reaped.killed > 0 {
        format!(
            "The container's shim {shim}died without recording the exit; podhost killed the {} process(es) left in the container",
            reaped.killed
        )
    } else {
        format!("The container's shim {shim}died without recording the exit")
    };
    tracing::warn!(bundle = %bundle.display(), %message, "container lost");
    let record = ExitRecord {
        exit_code: 137,
        signal: None,
        started_at: started.map(|s| s.started_at).unwrap_or(now),
        finished_at: now,
        unknown: Some(message),
        ..Default::default()
    };
    if let Err(e) = write_json_atomic(&bundle.join(EXIT_FILE), &record) {
        tracing::warn!(error = %e, "cannot record the exit of a lost container");
    }
    record
}

/// [`read_exit_or_reap`] off the async threads (the reap waits for the kill).
async fn read_exit_or_reap_async(bundle: &Path, started: Option<&StartedRecord>) -> ExitRecord {
    let (bundle, started) = (bundle.to_path_buf(), started.cloned());
    let dir = bundle.clone();
    tokio::task::spawn_blocking(move || read_exit_or_reap(&bundle, started.as_ref()))
        .await
        .unwrap_or_else(|e| {
            tracing::error!(error = %e, bundle = %dir.display(), "reaping a lost container panicked");
            let now = Utc::now();
            ExitRecord {
                exit_code: 137,
                started_at: now,
                finished_at: now,
                unknown: Some("The container's shim died without recording the exit".into()),
                ..Default::default()
            }
        })
}

/// Re-attaches to the container of a bundle after a daemon restart. A shim that is
/// still creating the container (the previous daemon died before its report) is waited
/// for, never started a second time; a container whose shim is gone is killed.
pub async fn adopt(bundle: &Path) -> Adopted {
    loop {
        if let Ok(Some(exit)) = read_json::<ExitRecord>(&bundle.join(EXIT_FILE)) {
            return Adopted::Exited(exit);
        }
        let started: Option<StartedRecord> = read_json(&bundle.join(STARTED_FILE)).ok().flatten();
        let Some(started) = started else {
            if !bundle.join(SHIM_CONFIG_FILE).exists() {
                // The daemon died before it spawned the shim.
                return never_started(bundle);
            }
            if let Some(pid) = find_shim(bundle) {
                tracing::info!(bundle = %bundle.display(), pid, "a shim is still starting this container; waiting for it");
                wait_for_start_or_exit(bundle, pid).await;
                continue;
            }
            let b = bundle.to_path_buf();
            let reaped = tokio::task::spawn_blocking(move || reap_lost_container(&b))
                .await
                .unwrap_or_default();
            if let Ok(Some(exit)) = read_json::<ExitRecord>(&bundle.join(EXIT_FILE)) {
                return Adopted::Exited(exit);
            }
            if !reaped.ran {
                return never_started(bundle);
            }
            return Adopted::Exited(read_exit_or_reap_async(bundle, None).await);
        };
        if !is_our_shim(started.shim_pid, bundle) {
            // The shim died between the exit and its record, or was killed.
            return Adopted::Exited(read_exit_or_reap_async(bundle, Some(&started)).await);
        }
        match watch_pid(started.shim_pid) {
            Ok(fd) => {
                super::shim_log::forward(
                    bundle,
                    started.shim_pid,
                    super::shim_log::ForwardFrom::Start,
                );
                return Adopted::Running(Box::new(ShimHandle {
                    init: init_handle(&started, bundle),
                    started,
                    bundle: bundle.to_path_buf(),
                    waiter: Waiter::Pidfd(fd),
                    reports: None,
                }));
            }
            Err(e) => {
                // Only a shim that just exited has no pidfd: look again.
                tracing::warn!(error = %e, pid = started.shim_pid, "cannot watch the shim");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// The handle on the init that `started` names, opened as soon as the daemon learns of
/// it. One that cannot be opened is logged and never signalled.
fn init_handle(started: &StartedRecord, bundle: &Path) -> ProcessHandle {
    let what = format!("the init of the container in {}", bundle.display());
    ProcessHandle::for_init(started, &what).unwrap_or_else(|e| {
        tracing::error!(error = %e, "the container's init cannot be signalled");
        ProcessHandle::gone(started.init_pid, &what)
    })
}

fn never_started(bundle: &Path) -> Adopted {
    tracing::info!(bundle = %bundle.display(), "attempt never started its container; its number is used again");
    if let Err(e) = std::fs::remove_dir_all(bundle)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(error = %e, bundle = %bundle.display(), "cannot remove an unused attempt dir");
    }
    Adopted::NeverStarted
}

/// Waits until the shim `pid` of `bundle` has written `started.json` (or the exit) or is
/// gone. The shim reports on a pipe that died with the previous daemon, so its files are
/// watched (only in this rare recovery path) alongside its pidfd.
async fn wait_for_start_or_exit(bundle: &Path, pid: i32) {
    let gone = match watch_pid(pid) {
        Ok(fd) => fd,
        Err(_) => return,
    };
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    loop {
        tokio::select! {
            _ = gone.readable() => return,
            _ = tick.tick() => {
                if bundle.join(STARTED_FILE).exists() || bundle.join(EXIT_FILE).exists() {
                    return;
                }
            }
        }
    }
}

/// Whether something of the attempt in `bundle` may still run: it has no exit record,
/// and its shim lives or the container's init it recorded still runs (a shim killed
/// alone leaves its container running until a daemon reaps it). A pod's sandbox is never
/// recreated while this holds for one of its containers.
pub fn may_run(bundle: &Path) -> bool {
    if bundle.join(EXIT_FILE).exists() {
        return false;
    }
    if find_shim(bundle).is_some() {
        return true;
    }
    let started: Option<StartedRecord> = read_json(&bundle.join(STARTED_FILE)).ok().flatten();
    started.is_some_and(|r| super::process_handle::StartCheck::of(&r).still_runs(r.init_pid))
}

/// The live shim process of `bundle`, by the pid it recorded before forking anything.
fn find_shim(bundle: &Path) -> Option<i32> {
    let pid: i32 = std::fs::read_to_string(bundle.join(SHIM_PID_FILE))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    is_our_shim(pid, bundle).then_some(pid)
}

fn watch_pid(pid: i32) -> Result<AsyncFd<OwnedFd>, RuntimeError> {
    let fd = pidfd_open(pid)?;
    // SAFETY: the OwnedFd moves into the AsyncFd, so it stays open and refers to the
    // same pidfd for the AsyncFd's whole lifetime.
    unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }.map_err(|e| {
        RuntimeError::io(
            "watch the pidfd of",
            format!("/proc/{pid}"),
            e.into_parts().1,
        )
    })
}

/// Whether `pid` is the shim of this bundle (and not a reused pid): its command line
/// names the bundle's shim config. libcontainer's children inherit that command line,
/// so `pid` must come from the shim's own record (`shim.pid`, `started.json`).
///
/// A shim execs the monitor once its container runs, right after `started.json`; while
/// the kernel swaps the process's image, `/proc/PID/cmdline` reads empty. That moment is
/// waited out (a few ms), not taken for a dead or foreign process: an adopting daemon
/// that looked then reaped a live container (seen in CI, tests/reliability.rs).
pub fn is_our_shim(pid: i32, bundle: &Path) -> bool {
    let expected = bundle.join(SHIM_CONFIG_FILE);
    for _ in 0..EXEC_SETTLE_LOOKS {
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            return false;
        };
        if !cmdline.is_empty() {
            return cmdline
                .split(|b| *b == 0)
                .any(|arg| arg == expected.as_os_str().as_encoded_bytes());
        }
        if is_zombie(pid) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

/// How many times an empty command line is looked at again, 5 ms apart (an exec takes
/// well under a millisecond; a loaded machine may not schedule it at once).
const EXEC_SETTLE_LOOKS: u32 = 40;

/// Whether `pid` has exited and waits to be reaped (its command line reads empty too).
fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            // The state follows the command name, which is in parentheses and may hold
            // spaces or parentheses itself.
            let after = &stat[stat.rfind(')')? + 1..];
            after.split_whitespace().next().map(|state| state == "Z")
        })
        .unwrap_or(true)
}

pub fn pidfd_open(pid: i32) -> Result<OwnedFd, RuntimeError> {
    use super::sys::Kernel;
    super::sys::LinuxKernel
        .pidfd_open(nix::unistd::Pid::from_raw(pid))
        .map_err(|e| RuntimeError::sys(format!("pidfd_open({pid})"), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_naming_the_bundles_config_is_its_shim_and_no_other_bundles() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = dir.path().join("0");
        let config = bundle.join(SHIM_CONFIG_FILE);
        // `sh -c CMD ARG0`: the config path is in the child's argv, as in a shim's. The
        // line it prints says it runs its script (exec is done); the second command
        // keeps sh from exec-ing sleep in its place.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "echo ready; sleep 60; exit 0"])
            .arg(&config)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut ready,
        )
        .unwrap();
        let pid = child.id() as i32;
        let ours = is_our_shim(pid, &bundle);
        let others = is_our_shim(pid, &dir.path().join("1"));
        let me = is_our_shim(std::process::id() as i32, &bundle);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(ours, "the child naming {} is its shim", config.display());
        assert!(!others && !me);
        assert!(!is_our_shim(pid, &bundle), "a reaped pid is nobody's shim");
        // An exited, unreaped child (its command line reads empty, as during an exec)
        // is nobody's shim either, and is told at once rather than waited for.
        let mut zombie = std::process::Command::new("sh")
            .args(["-c", "exit 0"])
            .arg(&config)
            .spawn()
            .unwrap();
        let zpid = zombie.id() as i32;
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while !is_zombie(zpid) {
            assert!(std::time::Instant::now() < until, "the child never exited");
            std::thread::sleep(Duration::from_millis(5));
        }
        let looked = std::time::Instant::now();
        assert!(
            !is_our_shim(zpid, &bundle),
            "an exited shim is not ours any more"
        );
        assert!(
            looked.elapsed() < Duration::from_millis(100),
            "{:?}",
            looked.elapsed()
        );
        zombie.wait().unwrap();
    }
}

/// The safety-net relist's ticker, on one node-wide grid of [`RELIST_EVERY`]: each
/// container is still looked at once per period, but all of them at the same instants,
/// so the idle daemon wakes once per period for every container together instead of
/// once per container at its own phase (25 wakeups/s with 250 containers). Missed ticks
/// are skipped, keeping the grid.
fn relist_ticker() -> tokio::time::Interval {
    use tokio::time::Instant;
    static GRID: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let origin = *GRID.get_or_init(Instant::now);
    let since = Instant::now().saturating_duration_since(origin);
    let periods = since.as_nanos() / RELIST_EVERY.as_nanos() + 1;
    let next = origin + RELIST_EVERY * u32::try_from(periods).unwrap_or(u32::MAX);
    let mut ticker = tokio::time::interval_at(next, RELIST_EVERY);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    ticker
}

#[cfg(test)]
mod relist_tests {
    use super::*;

    #[tokio::test]
    async fn every_containers_relist_ticks_on_the_same_grid() {
        let mut first = relist_ticker();
        tokio::time::sleep(Duration::from_millis(30)).await;
        let later = tokio::time::Instant::now();
        let mut second = relist_ticker();
        // Both look at the same instant, after the later one was made and within one
        // period of it: one wake-up for both.
        let (a, b) = tokio::join!(first.tick(), second.tick());
        assert_eq!(a, b);
        assert!(a > later && a <= later + RELIST_EVERY, "{a:?} vs {later:?}");
    }
}
