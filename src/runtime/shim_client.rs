//! The daemon's side of a shim: spawn it, learn of the start, and await the exit without
//! polling (the child's exit, or a pidfd for a shim adopted after a daemon restart).

use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use chrono::Utc;
use tokio::io::AsyncBufReadExt;
use tokio::io::unix::AsyncFd;

use super::RuntimeError;
use super::fsutil::{read_json, write_json_atomic};
use super::records::{
    EXIT_FILE, ExitRecord, SHIM_CONFIG_FILE, STARTED_FILE, ShimConfig, ShimReady, StartedRecord,
};

/// How long a shim may take to report the start (image layers are already unpacked).
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// A running container, through its shim.
#[derive(Debug)]
pub struct ShimHandle {
    pub started: StartedRecord,
    pub bundle: PathBuf,
    waiter: Waiter,
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
    /// The container exited (possibly while the daemon was down).
    Exited(ExitRecord),
    /// No live shim and no exit record: the container's fate is unknown.
    Lost { started: Option<StartedRecord> },
}

/// Writes the shim config into the bundle and starts `podhost shim` for it.
pub async fn spawn(podhost_exe: &Path, cfg: &ShimConfig) -> Result<ShimHandle, RuntimeError> {
    let config_path = cfg.bundle.join(SHIM_CONFIG_FILE);
    write_json_atomic(&config_path, cfg)?;
    let mut child = tokio::process::Command::new(podhost_exe)
        .arg("shim")
        .arg(&config_path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(false)
        .spawn()
        .map_err(|e| RuntimeError::io("spawn shim", podhost_exe, e))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| RuntimeError::ShimFailed {
            container: cfg.container_id.clone(),
            message: "shim has no stdout".into(),
        })?;
    let mut line = String::new();
    let read = tokio::time::timeout(
        READY_TIMEOUT,
        tokio::io::BufReader::new(stdout).read_line(&mut line),
    )
    .await;
    let failed = |message: String| RuntimeError::ShimFailed {
        container: cfg.container_id.clone(),
        message,
    };
    match read {
        Err(_) => {
            let _ = child.start_kill();
            return Err(failed(format!(
                "shim did not report within {READY_TIMEOUT:?}"
            )));
        }
        Ok(Err(e)) => return Err(failed(format!("reading the shim's report: {e}"))),
        Ok(Ok(_)) => {}
    }
    match serde_json::from_str::<ShimReady>(line.trim()) {
        Ok(ShimReady::Started(started)) => Ok(ShimHandle {
            started,
            bundle: cfg.bundle.clone(),
            waiter: Waiter::Child(child),
        }),
        Ok(ShimReady::Failed { message }) => {
            let _ = child.wait().await;
            Err(failed(message))
        }
        Err(_) => {
            let _ = child.wait().await;
            let log = std::fs::read_to_string(cfg.bundle.join(super::records::SHIM_LOG_FILE))
                .unwrap_or_default();
            Err(failed(format!(
                "shim exited without a report; its log: {}",
                log.trim()
            )))
        }
    }
}

impl ShimHandle {
    /// Waits for the shim to finish and returns the container's exit record.
    pub async fn wait(self) -> ExitRecord {
        match self.waiter {
            Waiter::Child(mut child) => {
                let _ = child.wait().await;
            }
            Waiter::Pidfd(fd) => {
                let _ = fd.readable().await;
            }
        }
        read_exit_or_unknown(&self.bundle, Some(&self.started))
    }
}

/// Reads `exit.json`; without one, the container is reported as killed (137) now, as the
/// kubelet does for a container it lost.
fn read_exit_or_unknown(bundle: &Path, started: Option<&StartedRecord>) -> ExitRecord {
    match read_json::<ExitRecord>(&bundle.join(EXIT_FILE)) {
        Ok(Some(r)) => r,
        other => {
            if let Err(e) = other {
                tracing::warn!(error = %e, "unreadable exit record");
            }
            let now = Utc::now();
            let record = ExitRecord {
                exit_code: 137,
                signal: None,
                started_at: started.map(|s| s.started_at).unwrap_or(now),
                finished_at: now,
            };
            // Persist it so that the verdict survives another daemon restart.
            let _ = write_json_atomic(&bundle.join(EXIT_FILE), &record);
            record
        }
    }
}

/// Re-attaches to the container of a bundle after a daemon restart.
pub fn adopt(bundle: &Path) -> Adopted {
    let started: Option<StartedRecord> = read_json(&bundle.join(STARTED_FILE)).ok().flatten();
    if let Ok(Some(exit)) = read_json::<ExitRecord>(&bundle.join(EXIT_FILE)) {
        return Adopted::Exited(exit);
    }
    let Some(started) = started else {
        return Adopted::Lost { started: None };
    };
    if !is_our_shim(started.shim_pid, bundle) {
        // The shim died between the exit and its record, or was killed.
        return Adopted::Exited(read_exit_or_unknown(bundle, Some(&started)));
    }
    match pidfd_open(started.shim_pid) {
        // SAFETY: the OwnedFd moves into the AsyncFd, so it stays open and refers to the
        // same pidfd for the AsyncFd's whole lifetime.
        Ok(fd) => {
            match unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
                .map_err(|e| e.into_parts().1)
            {
                Ok(fd) => Adopted::Running(Box::new(ShimHandle {
                    started,
                    bundle: bundle.to_path_buf(),
                    waiter: Waiter::Pidfd(fd),
                })),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot watch the shim's pidfd");
                    Adopted::Lost {
                        started: Some(started),
                    }
                }
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, pid = started.shim_pid, "pidfd_open failed");
            Adopted::Lost {
                started: Some(started),
            }
        }
    }
}

/// Whether `pid` is the shim of this bundle (and not a reused pid).
fn is_our_shim(pid: i32, bundle: &Path) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let expected = bundle.join(SHIM_CONFIG_FILE);
    cmdline
        .split(|b| *b == 0)
        .any(|arg| arg == expected.as_os_str().as_encoded_bytes())
}

fn pidfd_open(pid: i32) -> Result<OwnedFd, RuntimeError> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1; no memory is
    // passed to the kernel.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(RuntimeError::sys(
            format!("pidfd_open({pid})"),
            nix::Error::last(),
        ));
    }
    // SAFETY: the syscall returned a fresh fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}
