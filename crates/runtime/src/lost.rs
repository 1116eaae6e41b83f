//! A container whose shim is gone without recording the exit (the shim was killed, or
//! died in the middle of creating it): nothing would ever stop or reap it, so podhost
//! kills what is left through the container's cgroup and releases what the shim would
//! have released (cgroup, rootfs mount, libcontainer state).
//!
//! The cgroup is the only handle that is sure to hold every process of the container:
//! the init pid alone misses a container that shares the pod's pid namespace (its
//! processes survive the init), and after the shim's death nothing else tracks them.
//! Everything here is plain file writes, signals and umount(2), so it may run in the
//! daemon (off the async threads); libcontainer is not called.
//!
//! A pid read from `cgroup.procs` or /proc names whatever process has it by the time
//! it is signalled: a process killed a moment ago may have been reaped by the host's
//! init and its number given to a host process. Every signal here goes through a
//! pidfd opened before the process is checked (still listed in the cgroup, still
//! naming the bundle), so it reaches the process that was checked or nobody.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::overlay;
use super::process_handle::{Delivery, ProcessHandle};
use super::shim_config::ShimConfig;
use podhost_disk::read_json;
use podhost_disk::records::SHIM_CONFIG_FILE;

/// How long the killed processes may take to leave their cgroup.
const EMPTY_TIMEOUT: Duration = Duration::from_secs(10);

const CGROUP_MOUNT: &str = "/sys/fs/cgroup";

/// What [`reap_lost_container`] found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reaped {
    /// Processes of the container that were still running and were killed.
    pub killed: usize,
    /// The cgroup still had processes when the wait gave up (they are named in the log).
    pub survivors: usize,
    /// The container's program had been started (libcontainer's state said running or
    /// stopped), or processes of it were still running: an attempt that counts.
    pub ran: bool,
}

/// Kills every process left in the container of `bundle`, waits until they are gone,
/// removes its cgroup, unmounts its rootfs and removes libcontainer's state dir. Safe
/// to call for a bundle whose container never started (it then finds nothing).
/// Blocking: call it off the async threads.
pub fn reap_lost_container(bundle: &Path) -> Reaped {
    // libcontainer's children of the dead shim (before the container's exec they carry
    // its command line) may not have reached the cgroup yet.
    let killed = kill_shim_children(bundle);
    let mut reaped = release_container(bundle);
    reaped.killed += killed;
    tracing::info!(bundle = %bundle.display(), ?reaped, "reaped a container whose shim is gone");
    reaped
}

/// What libcontainer's delete does for a stopped container, and the rootfs: kills what
/// is left in its cgroup (as runc's delete does), removes the cgroup, unmounts the
/// rootfs and removes libcontainer's state dir. The monitor's clean-up after the exit,
/// without exec'ing the full binary for libcontainer (and libcgroups' dozen mountinfo
/// reads); [`reap_lost_container`] once the shim is gone. Blocking.
pub fn release_container(bundle: &Path) -> Reaped {
    let mut reaped = Reaped::default();
    if let Some(rel) = cgroups_path(bundle) {
        let dirs = cgroup_dirs(&rel);
        reaped.killed += kill_cgroup(&dirs);
        // A container that never got past "created" has its init waiting in podhost's
        // own code; killing it does not make the attempt count.
        reaped.survivors = wait_empty(&dirs);
        for dir in dirs.iter().rev() {
            remove_cgroup_dir(dir);
        }
    }
    if let Ok(Some(cfg)) = read_json::<ShimConfig>(&bundle.join(SHIM_CONFIG_FILE)) {
        if let Err(e) = overlay::unmount_rootfs(&cfg.rootfs) {
            tracing::warn!(error = %e, rootfs = %cfg.rootfs.display(), "cannot unmount the container's rootfs");
        }
        let state = cfg.libcontainer_root.join(&cfg.container_id);
        let status = read_json::<serde_json::Value>(&state.join("state.json"))
            .ok()
            .flatten()
            .and_then(|s| s["status"].as_str().map(str::to_string));
        // "created": the init still waits for start() and never ran the program.
        reaped.ran = matches!(status.as_deref(), Some("running" | "stopped" | "paused"));
        if let Err(e) = std::fs::remove_dir_all(&state)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(error = %e, dir = %state.display(), "cannot remove libcontainer state");
        }
    }
    reaped
}

/// `linux.cgroupsPath` of the bundle's config.json (relative to each hierarchy).
fn cgroups_path(bundle: &Path) -> Option<String> {
    let config: serde_json::Value = read_json(&bundle.join("config.json")).ok().flatten()?;
    let path = config["linux"]["cgroupsPath"].as_str()?;
    Some(path.trim_start_matches('/').to_string())
}

/// The container's cgroup in every hierarchy it may be in: the unified one on a pure
/// cgroup v2 host, else each v1 controller (and the hybrid unified mount), freezer first.
fn cgroup_dirs(rel: &str) -> Vec<PathBuf> {
    let root = Path::new(CGROUP_MOUNT);
    if root.join("cgroup.controllers").exists() {
        return vec![root.join(rel)];
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .map(|rd| rd.flatten().map(|e| e.path().join(rel)).collect())
        .unwrap_or_default();
    dirs.retain(|d| d.is_dir());
    dirs.sort_by_key(|d| !d.starts_with(root.join("freezer")));
    dirs
}

/// The processes listed in the cgroups (each pid once).
fn procs(dirs: &[PathBuf]) -> Vec<i32> {
    let mut pids: Vec<i32> = dirs
        .iter()
        .filter_map(|d| std::fs::read_to_string(d.join("cgroup.procs")).ok())
        .flat_map(|text| {
            text.lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// SIGKILLs every process of the cgroup: `cgroup.kill` where the kernel has it (v2,
/// Linux 5.14+), else frozen first (v1 freezer or v2 `cgroup.freeze`) so that no
/// process can fork a child that the kill misses. Returns how many were found.
fn kill_cgroup(dirs: &[PathBuf]) -> usize {
    let found = procs(dirs).len();
    if found == 0 {
        return 0;
    }
    if let Some(dir) = dirs.first()
        && dir.join("cgroup.kill").exists()
        && std::fs::write(dir.join("cgroup.kill"), "1").is_ok()
    {
        return found;
    }
    let frozen = freeze(dirs, true);
    kill_listed(dirs);
    if frozen {
        freeze(dirs, false);
    }
    found
}

/// SIGKILLs each process listed in the cgroups: a pidfd is opened on every listed pid
/// first, then the lists are read again, and only a pid still listed then is killed
/// through its pidfd (its process was in the cgroup while the pidfd named it). Returns
/// how many were killed.
fn kill_listed(dirs: &[PathBuf]) -> usize {
    let opened: Vec<ProcessHandle> = procs(dirs)
        .into_iter()
        .filter_map(|pid| {
            ProcessHandle::open_if(pid, "a process of a lost container", |_, _| true)
                .map_err(|e| tracing::warn!(pid, error = %e, "cannot open a process of a lost container"))
                .ok()
        })
        .collect();
    let still = procs(dirs);
    let mut killed = 0;
    for handle in opened.iter().filter(|h| still.contains(&h.pid())) {
        match handle.signal(Signal::SIGKILL) {
            Ok(Delivery::Sent) => killed += 1,
            Ok(Delivery::Gone) => {}
            Err(e) => tracing::warn!(error = %e, "cannot kill a process of a lost container"),
        }
    }
    killed
}

/// Freezes (or thaws) the cgroup through whichever freezer it has; true if it did.
fn freeze(dirs: &[PathBuf], on: bool) -> bool {
    for dir in dirs {
        let (file, value, done) = if dir.join("freezer.state").exists() {
            (
                "freezer.state",
                if on { "FROZEN" } else { "THAWED" },
                "FROZEN",
            )
        } else if dir.join("cgroup.freeze").exists() {
            ("cgroup.freeze", if on { "1" } else { "0" }, "1")
        } else {
            continue;
        };
        if std::fs::write(dir.join(file), value).is_err() {
            continue;
        }
        if !on {
            return true;
        }
        // v1 may report FREEZING for a while; killing a freezing task is still fine
        // (SIGKILL wakes frozen tasks), so the wait is short and best effort.
        let until = Instant::now() + Duration::from_secs(1);
        while Instant::now() < until {
            let state = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
            let state = if file == "cgroup.freeze" {
                std::fs::read_to_string(dir.join("cgroup.events"))
                    .unwrap_or_default()
                    .lines()
                    .find_map(|l| l.strip_prefix("frozen "))
                    .unwrap_or("0")
                    .to_string()
            } else {
                state
            };
            if state.trim() == done {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        return true;
    }
    false
}

/// Waits until the cgroup has no processes; returns how many remain at the deadline.
/// The killed processes are reaped by whoever inherited them (the host's init or a
/// subreaper), not by podhost.
fn wait_empty(dirs: &[PathBuf]) -> usize {
    let until = Instant::now() + EMPTY_TIMEOUT;
    loop {
        let left = procs(dirs);
        if left.is_empty() {
            return 0;
        }
        if Instant::now() >= until {
            tracing::warn!(pids = ?left, "processes of a lost container survive SIGKILL");
            return left.len();
        }
        // A process may have forked between the listing and the kill: kill again (the
        // killed ones, being reaped by the host's init now, are not signalled by number).
        kill_listed(dirs);
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn remove_cgroup_dir(dir: &Path) {
    for attempt in 0..5u32 {
        match std::fs::remove_dir(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(_) => std::thread::sleep(Duration::from_millis(10 << attempt)),
        }
    }
    tracing::warn!(cgroup = %dir.display(), "cannot remove the cgroup of a lost container");
}

/// SIGKILLs every process whose command line names this bundle's shim config: called
/// only once the shim itself is gone, so these are its libcontainer children. Each is
/// checked again through a pidfd before it is killed.
fn kill_shim_children(bundle: &Path) -> usize {
    let config = bundle.join(SHIM_CONFIG_FILE);
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut killed = 0;
    for pid in rd
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
    {
        // The cheap look first: only a match is opened and looked at again.
        if !names_config(pid, &config) {
            continue;
        }
        let wanted = config.clone();
        let handle =
            ProcessHandle::open_if(pid, "a libcontainer child of a dead shim", move |_, pid| {
                names_config(pid, &wanted)
            });
        match handle.map(|h| h.signal(Signal::SIGKILL)) {
            Ok(Ok(Delivery::Sent)) => {
                tracing::info!(pid, "killed a libcontainer child left by a dead shim");
                killed += 1;
            }
            Ok(Ok(Delivery::Gone)) => {}
            Ok(Err(e)) | Err(e) => {
                tracing::warn!(pid, error = %e, "cannot kill a libcontainer child left by a dead shim")
            }
        }
    }
    killed
}

/// Whether the command line of the process at `pid` names `config`.
fn names_config(pid: i32, config: &Path) -> bool {
    let wanted = config.as_os_str().as_encoded_bytes();
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|cmdline| cmdline.split(|b| *b == 0).any(|arg| arg == wanted))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    fn sleeper() -> std::process::Child {
        std::process::Command::new("sleep")
            .arg("600")
            .spawn()
            .unwrap()
    }

    /// Only the processes listed in the cgroup are killed, each once; a listed pid
    /// that is gone is not counted (a plain dir stands in for the cgroup).
    #[test]
    fn only_listed_processes_are_killed() {
        let dir = tempfile::tempdir().unwrap();
        let (mut listed, mut other) = (sleeper(), sleeper());
        let mut reaped = std::process::Command::new("true").spawn().unwrap();
        reaped.wait().unwrap();
        std::fs::write(
            dir.path().join("cgroup.procs"),
            format!("{}\n{}\n", listed.id(), reaped.id()),
        )
        .unwrap();
        let killed = kill_listed(&[dir.path().to_path_buf()]);
        let listed_status = listed.wait().unwrap();
        let other_running = other.try_wait().unwrap().is_none();
        other.kill().unwrap();
        other.wait().unwrap();
        assert_eq!(killed, 1);
        assert_eq!(listed_status.signal(), Some(libc::SIGKILL));
        assert!(other_running, "a process not in the cgroup was killed");
    }
}
