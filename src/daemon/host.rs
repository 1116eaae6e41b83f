//! Facts about the host the daemon checks once at start.

use std::os::fd::AsRawFd;
use std::path::Path;

use super::DaemonError;
use crate::runtime::cgroup_root::{CgroupMode, detect_mode, own_root};

/// RLIMIT_NOFILE containers get by default (the container runtimes' default).
pub const CONTAINER_NOFILE: u64 = 1_048_576;

/// Holds an exclusive flock on `<root>/daemon.lock` for the daemon's life.
pub fn lock_root(root: &Path) -> Result<std::fs::File, DaemonError> {
    let path = root.join("daemon.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| DaemonError::Dir {
            path: path.clone(),
            source,
        })?;
    // SAFETY: flock on an fd we own, with constant flags; no memory is shared.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        return Err(DaemonError::Locked(root.to_path_buf()));
    }
    Ok(file)
}

/// Chooses the cgroup parent and says plainly what is and is not enforced on this host.
pub fn cgroup_root(flag: Option<String>) -> String {
    let mode = detect_mode();
    if mode == CgroupMode::Legacy {
        tracing::warn!(
            "this host has no pure cgroup v2 hierarchy (v1 or hybrid): containers get their own \
             cgroups, but CPU/memory/pids limits, QoS cgroups and OOM detection are NOT enforced \
             (degraded mode)"
        );
    }
    match flag {
        Some(root) => root,
        None => {
            let (root, nested_everywhere) = own_root();
            if !nested_everywhere {
                tracing::warn!(%root, "the daemon sits at unrelated paths in different cgroup hierarchies; using the deepest one");
            }
            root
        }
    }
}

/// What containers get for RLIMIT_NOFILE: the default, clamped to the daemon's own hard
/// limit when the host does not let us raise it (no CAP_SYS_RESOURCE), with a warning.
pub fn container_nofile() -> u64 {
    let (_, hard) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .unwrap_or((1024, 1024));
    if hard < CONTAINER_NOFILE {
        tracing::warn!(
            hard,
            wanted = CONTAINER_NOFILE,
            "cannot give containers RLIMIT_NOFILE {CONTAINER_NOFILE}: the host's hard limit is {hard}; using {hard}"
        );
        hard
    } else {
        CONTAINER_NOFILE
    }
}

/// Resolves on SIGTERM or SIGINT.
pub async fn wait_for_stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
