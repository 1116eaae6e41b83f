//! Killing a process and everything it started, so that nothing of a timed-out exec is
//! left running in the container.
//!
//! The root is stopped first: a stopped parent cannot exit, so its children cannot be
//! reparented away from the tree while it is walked. Every descendant found is stopped
//! too (a stopped process forks nothing more), the walk repeats until it finds nothing
//! new, then all are killed. What escaped before the stop (a daemon that double-forked
//! and whose middle process already exited) is no longer in the tree and is not found.

use std::collections::BTreeSet;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Parent of each live process, read from /proc (`None` for unreadable entries: gone).
fn parents() -> Vec<(i32, i32)> {
    let Ok(all) = procfs::process::all_processes() else {
        return Vec::new();
    };
    all.filter_map(|p| p.ok())
        .filter_map(|p| p.stat().ok().map(|s| (s.pid, s.ppid)))
        .collect()
}

/// SIGKILLs `root` and all its descendants; returns how many processes were signalled.
pub fn kill_tree(root: Pid) -> usize {
    let mut tree = BTreeSet::from([root.as_raw()]);
    if kill(root, Signal::SIGSTOP).is_err() {
        return 0;
    }
    loop {
        let found: Vec<i32> = parents()
            .into_iter()
            .filter(|(pid, ppid)| tree.contains(ppid) && !tree.contains(pid))
            .map(|(pid, _)| pid)
            .collect();
        if found.is_empty() {
            break;
        }
        for pid in found {
            let _ = kill(Pid::from_raw(pid), Signal::SIGSTOP);
            tree.insert(pid);
        }
    }
    for pid in &tree {
        let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
    }
    tree.len()
}
