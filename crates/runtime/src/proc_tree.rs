//! Killing a process and everything it started, so that nothing of a timed-out exec is
//! left running in the container.
//!
//! The root is stopped first: a stopped parent cannot exit, so its children cannot be
//! reparented away from the tree while it is walked. Every descendant found is stopped
//! too (a stopped process forks nothing more), the walk repeats until it finds nothing
//! new, then all are killed. What escaped before the stop (a daemon that double-forked
//! and whose middle process already exited) is no longer in the tree and is not found.
//!
//! A descendant found in /proc may exit before it is stopped, and a parent that ignores
//! SIGCHLD does not even leave a zombie: its pid may then be another process's. So each
//! is signalled through a pidfd opened before its parent is checked again (see
//! `process_handle`), never by the number the listing gave.

use std::collections::BTreeMap;

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use super::process_handle::{Delivery, ProcessHandle};
use super::sys::Kernel;

/// Parent of each live process, read from /proc (`None` for unreadable entries: gone).
fn parents() -> Vec<(i32, i32)> {
    let Ok(all) = procfs::process::all_processes() else {
        return Vec::new();
    };
    all.filter_map(|p| p.ok())
        .filter_map(|p| p.stat().ok().map(|s| (s.pid, s.ppid)))
        .collect()
}

/// The parent of the process now at `pid`, from its `/proc/<pid>/stat` (field 4).
fn parent_of(kernel: &dyn Kernel, pid: i32) -> Option<i32> {
    let stat = kernel
        .read_file(format!("/proc/{pid}/stat").as_ref())
        .ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// SIGKILLs `root` (a child of this process, not reaped yet) and all its descendants;
/// returns how many processes were signalled.
pub fn kill_tree(root: Pid) -> usize {
    let what = "a process of a timed-out exec";
    // Not reaped yet, the child keeps its pid: any process there is it.
    let Ok(root_handle) = ProcessHandle::open_if(root.as_raw(), what, |_, _| true) else {
        return 0;
    };
    if root_handle.signal(Signal::SIGSTOP) != Ok(Delivery::Sent) {
        return 0;
    }
    let mut tree = BTreeMap::from([(root.as_raw(), root_handle)]);
    loop {
        let found: Vec<(i32, i32)> = parents()
            .into_iter()
            .filter(|(pid, ppid)| tree.contains_key(ppid) && !tree.contains_key(pid))
            .collect();
        if found.is_empty() {
            break;
        }
        let mut added = 0;
        for (pid, ppid) in found {
            let child =
                ProcessHandle::open_if(pid, what, move |k, pid| parent_of(k, pid) == Some(ppid));
            if let Ok(child) = child
                && child.signal(Signal::SIGSTOP) == Ok(Delivery::Sent)
            {
                tree.insert(pid, child);
                added += 1;
            }
        }
        // Everything found was gone already: nothing new can appear under it.
        if added == 0 {
            break;
        }
    }
    for handle in tree.values() {
        let _ = handle.signal(Signal::SIGKILL);
    }
    tree.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::recording::RecordingKernel;

    #[test]
    fn the_parent_is_field_4_counted_after_the_command() {
        let k = RecordingKernel::new();
        // The recording kernel's stat line: a command holding ") ", parent 1.
        k.add_process(77, 5);
        assert_eq!(parent_of(&k, 77), Some(1));
        assert_eq!(parent_of(&k, 78), None);
    }

    /// The pids of the children of `pid`, from /proc.
    fn children(pid: i32) -> Vec<i32> {
        parents()
            .into_iter()
            .filter(|(_, ppid)| *ppid == pid)
            .map(|(p, _)| p)
            .collect()
    }

    #[test]
    fn the_root_and_every_descendant_are_killed() {
        use std::os::unix::process::ExitStatusExt;
        let mut root = std::process::Command::new("sh")
            .args(["-c", "sleep 600 & sleep 600 & wait"])
            .spawn()
            .unwrap();
        let pid = i32::try_from(root.id()).unwrap();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let kids = loop {
            let kids = children(pid);
            if kids.len() == 2 || std::time::Instant::now() > until {
                break kids;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        assert_eq!(kids.len(), 2, "the shell started its two sleeps");
        let starts: Vec<u64> = kids
            .iter()
            .map(|k| podhost_disk::proc_start::read_start_ticks(*k).unwrap())
            .collect();
        assert_eq!(kill_tree(Pid::from_raw(pid)), 3);
        let status = root.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
        // The sleeps are killed too: each is gone, or (not reaped yet) a zombie.
        for (kid, start) in kids.iter().zip(starts) {
            let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
            loop {
                let gone = procfs::process::Process::new(*kid)
                    .and_then(|p| p.stat())
                    .map_or(true, |s| s.state == 'Z' || s.starttime != start);
                if gone {
                    break;
                }
                assert!(std::time::Instant::now() < until, "sleep {kid} survived");
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
    }
}
