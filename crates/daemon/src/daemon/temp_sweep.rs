//! At start, removes the temp files a crash left behind, of every naming scheme podhost
//! uses, but only those whose writer is gone: shims of the previous daemon still run and
//! write their records (started.json, exit.json) through temps of their own.
//!
//! | scheme                             | written by                        | where                  |
//! |------------------------------------|-----------------------------------|------------------------|
//! | `.<name>.tmp.<pid>.<seq>`          | `disk::write_atomic`              | root, userns/, pods/<uid>/, its ns/, attempt dirs |
//! | `exec-process-<pid>.json`          | `runtime::exec` (exec into a container) | attempt dirs     |
//! | `.<name>.tmp` (no pid)             | the OOM cursor (daemon only)      | root                   |
//! | `.podhost-bind.<pid>/`             | the API socket's private bind dir | the socket's directory |
//!
//! Swept elsewhere, also by pid: the image store's `tmp-<pid>-…` (at open), container
//! GC's `.gc-…-<pid>-<seq>` trash and the chowned snapshot copies `.<name>.tmp.<pid>`
//! (each GC pass). Only the directories podhost writes these into are listed: never a
//! rootfs, an upper dir, a volume or an image snapshot, whose files belong to workloads.

use std::path::{Path, PathBuf};

use podhost_disk::Layout;
use podhost_disk::proc_start::{changed_at, writer_may_live};

/// How one name is recognised, and who owns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    /// A temp of process `pid`.
    Pid(i32),
    /// A temp only the daemon writes, with no pid: stale at the daemon's start.
    DaemonOnly,
}

/// What a sweep removed and kept.
#[derive(Debug, Default)]
pub struct SweepReport {
    pub removed: Vec<PathBuf>,
    /// Temps whose writer still runs (left alone).
    pub kept: Vec<PathBuf>,
}

/// Sweeps the root dir's known places and the socket's directory.
pub fn sweep_stale_temps(layout: &Layout, socket: &Path) -> SweepReport {
    let mut report = SweepReport::default();
    let root = &layout.root_dir;
    let all = |_: &str| true;
    sweep_dir(root, all, &mut report);
    sweep_dir(&root.join("userns"), all, &mut report);
    sweep_dir(
        &root.join(podhost_runtime::seccomp::PROGRAMS_DIR),
        all,
        &mut report,
    );
    for pod in subdirs(&layout.pods_dir()) {
        sweep_dir(&pod, all, &mut report);
        sweep_dir(&pod.join("ns"), all, &mut report);
        for name in subdirs(&pod.join("containers")) {
            for attempt in subdirs(&name) {
                sweep_dir(&attempt, all, &mut report);
            }
        }
    }
    // The socket's directory may be shared (/run, /tmp): only podhost's own bind dirs.
    if let Some(dir) = socket.parent() {
        sweep_dir(dir, |name| name.starts_with(BIND_PREFIX), &mut report);
    }
    for path in &report.removed {
        tracing::info!(path = %path.display(), "removed a temp file left by a crash");
    }
    report
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| !e.file_name().as_encoded_bytes().starts_with(b"."))
        .map(|e| e.path())
        .collect()
}

/// The API socket's private bind directory: `.podhost-bind.<pid>`.
const BIND_PREFIX: &str = ".podhost-bind.";

/// Removes the stale temps of `dir` (one level) among the names `applies` accepts.
fn sweep_dir(dir: &Path, applies: impl Fn(&str) -> bool, report: &mut SweepReport) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in rd.flatten() {
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let Some(owner) = temp_owner(&name).filter(|_| applies(&name)) else {
            continue;
        };
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let stale = match owner {
            Owner::DaemonOnly => true,
            // A process that started after the temp's last change is not its writer
            // but a later owner of the pid (the ctime, which no writer can set back).
            Owner::Pid(pid) => !writer_may_live(pid, changed_at(&meta)),
        };
        if !stale {
            report.kept.push(path);
            continue;
        }
        let removed = if meta.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        match removed {
            Ok(()) => report.removed.push(path),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot remove a stale temp file")
            }
        }
    }
}

/// Which scheme `name` follows, if any.
fn temp_owner(name: &str) -> Option<Owner> {
    if let Some(rest) = name.strip_prefix(BIND_PREFIX) {
        return rest.parse().ok().map(Owner::Pid);
    }
    if let Some(rest) = name
        .strip_prefix("exec-process-")
        .and_then(|r| r.strip_suffix(".json"))
    {
        return rest.parse().ok().map(Owner::Pid);
    }
    let hidden = name.strip_prefix('.')?;
    if hidden.ends_with(".tmp") && hidden.len() > ".tmp".len() {
        return Some(Owner::DaemonOnly);
    }
    // `.<name>.tmp.<pid>.<seq>`: the name itself may contain dots.
    let (head, seq) = hidden.rsplit_once('.')?;
    let (head, pid) = head.rsplit_once('.')?;
    let (_, tmp) = head.rsplit_once('.')?;
    (tmp == "tmp" && seq.parse::<u64>().is_ok())
        .then(|| pid.parse().ok().map(Owner::Pid))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scheme_is_recognised_and_other_names_are_not() {
        assert_eq!(
            temp_owner(".status.json.tmp.1234.7"),
            Some(Owner::Pid(1234))
        );
        assert_eq!(temp_owner(".blocks.json.tmp.99.0"), Some(Owner::Pid(99)));
        assert_eq!(temp_owner(".pause.pid.tmp.5.12"), Some(Owner::Pid(5)));
        assert_eq!(temp_owner("exec-process-42.json"), Some(Owner::Pid(42)));
        assert_eq!(temp_owner(".podhost-bind.77"), Some(Owner::Pid(77)));
        assert_eq!(temp_owner(".oom-cursor.json.tmp"), Some(Owner::DaemonOnly));
        for keep in [
            "status.json",
            "exit.json",
            "exec-process-x.json",
            ".tmp",
            ".a.tmp.x.1",
            "a.tmp.1.2",
            ".podhost-bind.",
            ".gc-3-1234-7",
            "tmp-12-0-blob",
        ] {
            assert_eq!(temp_owner(keep), None, "{keep}");
        }
    }

    /// The pid of a child that has exited and been reaped.
    fn dead_pid() -> i32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        pid
    }

    #[test]
    fn stale_temps_go_live_and_unknown_files_stay() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path().join("root"), dir.path().join("logs"));
        let attempt = layout.attempt_dir("u1", "main", 0);
        let pod = layout.pod_dir("u1");
        std::fs::create_dir_all(&attempt).unwrap();
        std::fs::create_dir_all(pod.join("ns")).unwrap();
        std::fs::create_dir_all(layout.root_dir.join("userns")).unwrap();
        // A rootfs file named like a temp is the workload's: never looked at.
        std::fs::create_dir_all(attempt.join("rootfs")).unwrap();
        let dead = dead_pid();
        let me = std::process::id();
        let stale = [
            pod.join(format!(".status.json.tmp.{dead}.0")),
            pod.join("ns").join(format!(".pause.pid.tmp.{dead}.3")),
            attempt.join(format!(".exit.json.tmp.{dead}.1")),
            attempt.join(format!("exec-process-{dead}.json")),
            layout
                .root_dir
                .join("userns")
                .join(format!(".blocks.json.tmp.{dead}.0")),
            layout.root_dir.join(".oom-cursor.json.tmp"),
        ];
        let kept = [
            attempt.join(format!(".started.json.tmp.{me}.0")),
            attempt.join(format!("exec-process-{me}.json")),
            attempt.join("rootfs").join(format!(".x.tmp.{dead}.0")),
            attempt.join("exit.json"),
            pod.join("status.json"),
        ];
        for f in stale.iter().chain(&kept) {
            std::fs::write(f, b"x").unwrap();
        }
        let socket_dir = dir.path().join("run");
        let bind = socket_dir.join(format!(".podhost-bind.{dead}"));
        std::fs::create_dir_all(&bind).unwrap();
        std::fs::write(bind.join("s"), b"").unwrap();
        // Someone else's temps beside the socket (a shared /run or /tmp) are theirs.
        let foreign = [
            socket_dir.join(format!(".other.tmp.{dead}.0")),
            socket_dir.join(".other.tmp"),
        ];
        for f in &foreign {
            std::fs::write(f, b"x").unwrap();
        }
        let report = sweep_stale_temps(&layout, &socket_dir.join("podhost.sock"));
        for f in &stale {
            assert!(!f.exists(), "{} should be gone", f.display());
        }
        assert!(!bind.exists(), "the dead daemon's bind dir should be gone");
        for f in &foreign {
            assert!(f.exists(), "{} is not podhost's", f.display());
        }
        for f in &kept {
            assert!(f.exists(), "{} should stay", f.display());
        }
        assert_eq!(report.removed.len(), stale.len() + 1, "{report:?}");
        assert_eq!(report.kept.len(), 2, "{report:?}");
    }
}
