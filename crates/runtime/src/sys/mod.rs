//! The narrow kernel seam of runtime/: the system calls that the rootfs, pod sandbox,
//! pause process, cgroup, signal and rlimit code make, behind one trait.
//!
//! The decisions those modules take (which overlay options, which namespaces in what
//! order, what is pinned where, which cgroup files get which values, what is undone
//! when a step fails) are unit-tested without root against a recording fake
//! ([`recording::RecordingKernel`], tests only); production passes [`LinuxKernel`],
//! the only implementation that reaches the kernel, which the root and VM suites cover.
//!
//! Deliberately narrow: libcontainer keeps making its own calls in the shim, and plain
//! files of podhost's own directories (the pod's ns dir, pid files) stay std::fs; only
//! what the kernel interprets goes through here: mounts, namespaces, identity,
//! processes, pidfds and signals, rlimits, and cgroupfs and /proc files.

mod linux;
#[cfg(test)]
pub mod recording;

use std::ffi::{CStr, CString};
use std::fmt::Debug;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags};
use nix::sched::CloneFlags;
use nix::sys::resource::Resource;
use nix::sys::signal::Signal;
use nix::unistd::{Gid, Pid, Uid};

pub use linux::LinuxKernel;

use super::RuntimeError;
use super::userns::UsernsError;

/// The kernel as runtime/ uses it. Every method is one system call (or one cgroupfs
/// file operation) with the semantics of its man page; no policy lives here.
pub trait Kernel: Debug + Send + Sync {
    /// mount(2).
    fn mount(
        &self,
        source: Option<&Path>,
        target: &Path,
        fstype: Option<&str>,
        flags: MsFlags,
        data: Option<&str>,
    ) -> nix::Result<()>;

    /// Mounts a copy of the mount at `source` on `target`, idmapped through the user
    /// namespace `userns` (open_tree + mount_setattr + move_mount; see userns::idmap).
    fn bind_idmapped(
        &self,
        source: &Path,
        target: &Path,
        userns: &OwnedFd,
    ) -> Result<(), UsernsError>;

    /// umount2(2).
    fn umount2(&self, target: &Path, flags: MntFlags) -> nix::Result<()>;

    /// open(2) of a directory with O_PATH | O_DIRECTORY | O_CLOEXEC: a handle that
    /// names it (as `/proc/self/fd/N`) without reading it.
    fn open_dir_path(&self, dir: &Path) -> nix::Result<OwnedFd>;

    /// unshare(2).
    fn unshare(&self, flags: CloneFlags) -> nix::Result<()>;

    /// sethostname(2) in the calling process's UTS namespace.
    fn sethostname(&self, name: &str) -> nix::Result<()>;

    /// Brings the loopback interface of the calling process's network namespace up
    /// (rtnetlink; a current-thread runtime that is gone before it returns).
    fn loopback_up(&self) -> Result<(), RuntimeError>;

    /// setresgid(2) with all three ids `gid`.
    fn setresgid(&self, gid: Gid) -> nix::Result<()>;

    /// setgroups(2).
    fn setgroups(&self, groups: &[Gid]) -> nix::Result<()>;

    /// setresuid(2) with all three ids `uid`.
    fn setresuid(&self, uid: Uid) -> nix::Result<()>;

    /// fork(2)s a child that starts a session of its own, holds /dev/null as stdio and
    /// execv(2)s `program` with `args` (args[0] included); returns its pid. The caller
    /// must be single-threaded.
    fn spawn_detached(&self, program: &CStr, args: &[CString]) -> nix::Result<Pid>;

    /// kill(2); `None` probes whether the process exists.
    fn kill(&self, pid: Pid, signal: Option<Signal>) -> nix::Result<()>;

    /// pidfd_open(2): an fd that names the process now at `pid` for as long as it is
    /// open, whatever process is given the number later.
    fn pidfd_open(&self, pid: Pid) -> nix::Result<OwnedFd>;

    /// pidfd_send_signal(2) to the process of `pidfd`; `None` (signal 0) probes whether
    /// it still exists (a zombie does: it still holds its pid). ESRCH once it is reaped.
    fn pidfd_send_signal(&self, pidfd: BorrowedFd<'_>, signal: Option<Signal>) -> nix::Result<()>;

    /// getrlimit(2): (soft, hard).
    fn getrlimit(&self, resource: Resource) -> nix::Result<(u64, u64)>;

    /// setrlimit(2) of the calling process.
    fn setrlimit(&self, resource: Resource, soft: u64, hard: u64) -> nix::Result<()>;

    /// Reads a kernel interface file (cgroupfs, /proc).
    fn read_file(&self, path: &Path) -> std::io::Result<String>;

    /// Writes a kernel interface file (cgroupfs, /proc): one write of `contents`.
    fn write_file(&self, path: &Path, contents: &str) -> std::io::Result<()>;

    /// Whether `path` exists.
    fn exists(&self, path: &Path) -> bool;

    /// mkdir(2): creates one directory (a cgroup), its parent must exist.
    fn mkdir(&self, path: &Path) -> std::io::Result<()>;

    /// Creates a directory and its missing ancestors.
    fn mkdir_all(&self, path: &Path) -> std::io::Result<()>;

    /// rmdir(2): removes an empty directory (a cgroup without children or processes).
    fn rmdir(&self, path: &Path) -> std::io::Result<()>;

    /// The directories directly inside `dir` (child cgroups, hierarchies; a symlink
    /// to a directory counts); unreadable entries are left out.
    fn subdirs(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>>;
}
