//! [`Kernel`] on the real kernel: the only place the seam's nix/libc calls are made.

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use nix::mount::{MntFlags, MsFlags};
use nix::sched::CloneFlags;
use nix::sys::resource::Resource;
use nix::sys::signal::Signal;
use nix::sys::stat::Mode;
use nix::unistd::{ForkResult, Gid, Pid, Uid};

use super::Kernel;
use crate::RuntimeError;
use crate::userns::UsernsError;

/// The running kernel.
#[derive(Debug, Clone, Copy, Default)]
pub struct LinuxKernel;

impl Kernel for LinuxKernel {
    fn mount(
        &self,
        source: Option<&Path>,
        target: &Path,
        fstype: Option<&str>,
        flags: MsFlags,
        data: Option<&str>,
    ) -> nix::Result<()> {
        nix::mount::mount(source, target, fstype, flags, data)
    }

    fn bind_idmapped(
        &self,
        source: &Path,
        target: &Path,
        userns: &OwnedFd,
    ) -> Result<(), UsernsError> {
        crate::userns::idmap::bind_idmapped(source, target, userns)
    }

    fn umount2(&self, target: &Path, flags: MntFlags) -> nix::Result<()> {
        nix::mount::umount2(target, flags)
    }

    fn open_dir_path(&self, dir: &Path) -> nix::Result<OwnedFd> {
        nix::fcntl::open(
            dir,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
    }

    fn unshare(&self, flags: CloneFlags) -> nix::Result<()> {
        nix::sched::unshare(flags)
    }

    fn sethostname(&self, name: &str) -> nix::Result<()> {
        nix::unistd::sethostname(name)
    }

    fn loopback_up(&self) -> Result<(), RuntimeError> {
        let helper_err = |message: String| RuntimeError::Helper {
            helper: "sandbox",
            message,
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| helper_err(format!("tokio runtime: {e}")))?;
        rt.block_on(async {
            let (conn, handle, _) = rtnetlink::new_connection()
                .map_err(|e| helper_err(format!("netlink socket: {e}")))?;
            let conn_task = tokio::spawn(conn);
            // Loopback is always interface 1 in a new network namespace.
            let res = handle
                .link()
                .set(rtnetlink::LinkUnspec::new_with_index(1).up().build())
                .execute()
                .await
                .map_err(|e| helper_err(format!("bring loopback up: {e}")));
            conn_task.abort();
            res
        })
    }

    fn setresgid(&self, gid: Gid) -> nix::Result<()> {
        nix::unistd::setresgid(gid, gid, gid)
    }

    fn setgroups(&self, groups: &[Gid]) -> nix::Result<()> {
        nix::unistd::setgroups(groups)
    }

    fn setresuid(&self, uid: Uid) -> nix::Result<()> {
        nix::unistd::setresuid(uid, uid, uid)
    }

    fn spawn_detached(&self, program: &CStr, args: &[CString]) -> nix::Result<Pid> {
        // SAFETY: the seam's contract is that the caller is single-threaded (the
        // sandbox helper, its netlink runtime gone), so the child may run anything;
        // it only execs.
        match unsafe { nix::unistd::fork() }? {
            ForkResult::Child => {
                let _ = nix::unistd::setsid();
                // Never hold the parent's pipes: whoever reads them waits for their end.
                if let Ok(null) = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open("/dev/null")
                {
                    let _ = nix::unistd::dup2_stdin(&null);
                    let _ = nix::unistd::dup2_stdout(&null);
                    let _ = nix::unistd::dup2_stderr(&null);
                }
                let _ = nix::unistd::execv(program, args);
                // SAFETY: _exit is always safe; nothing of the parent's state is flushed.
                unsafe { libc::_exit(127) }
            }
            ForkResult::Parent { child } => Ok(child),
        }
    }

    fn kill(&self, pid: Pid, signal: Option<Signal>) -> nix::Result<()> {
        nix::sys::signal::kill(pid, signal)
    }

    fn pidfd_open(&self, pid: Pid) -> nix::Result<OwnedFd> {
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1; no memory
        // is passed to the kernel.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) };
        if fd < 0 {
            return Err(nix::Error::last());
        }
        // A syscall's fd is an int; the kernel never returns a wider one.
        let fd = i32::try_from(fd).map_err(|_| nix::Error::ERANGE)?;
        // SAFETY: the syscall returned a fresh fd that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    fn pidfd_send_signal(&self, pidfd: BorrowedFd<'_>, signal: Option<Signal>) -> nix::Result<()> {
        let number = signal.map_or(0, |s| s as libc::c_int);
        // SAFETY: the fd is borrowed, so it stays open for the call; a null siginfo
        // asks the kernel to fill in what kill(2) would, and flags must be 0. No other
        // memory is passed.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                pidfd.as_raw_fd(),
                number,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        if rc < 0 {
            return Err(nix::Error::last());
        }
        Ok(())
    }

    fn getrlimit(&self, resource: Resource) -> nix::Result<(u64, u64)> {
        nix::sys::resource::getrlimit(resource)
    }

    fn setrlimit(&self, resource: Resource, soft: u64, hard: u64) -> nix::Result<()> {
        nix::sys::resource::setrlimit(resource, soft, hard)
    }

    fn read_file(&self, path: &Path) -> std::io::Result<String> {
        std::fs::read_to_string(path)
    }

    fn write_file(&self, path: &Path, contents: &str) -> std::io::Result<()> {
        std::fs::write(path, contents)
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn mkdir(&self, path: &Path) -> std::io::Result<()> {
        std::fs::create_dir(path)
    }

    fn mkdir_all(&self, path: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(path)
    }

    fn rmdir(&self, path: &Path) -> std::io::Result<()> {
        std::fs::remove_dir(path)
    }

    fn subdirs(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        // The entry's type comes with the listing (d_type): a cgroup dir holds dozens
        // of control files, and a stat of each made a pod's cgroup removal ~1000
        // statx calls on a cgroup v1 host. Only a symlink is followed (v1 hierarchies
        // such as `cpu -> cpu,cpuacct`).
        Ok(std::fs::read_dir(dir)?
            .flatten()
            .filter(|entry| match entry.file_type() {
                Ok(t) if t.is_symlink() => entry.path().is_dir(),
                Ok(t) => t.is_dir(),
                Err(_) => false,
            })
            .map(|entry| entry.path())
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Directories and symlinks to directories, from the listing's types: files, a
    /// symlink to a file and a dangling one are left out.
    #[test]
    fn subdirs_are_dirs_and_links_to_dirs() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        std::fs::create_dir(d.join("child")).unwrap();
        std::fs::create_dir(d.join("cpu,cpuacct")).unwrap();
        std::os::unix::fs::symlink("cpu,cpuacct", d.join("cpu")).unwrap();
        std::fs::write(d.join("cgroup.procs"), "").unwrap();
        std::os::unix::fs::symlink("cgroup.procs", d.join("file-link")).unwrap();
        std::os::unix::fs::symlink("missing", d.join("dangling")).unwrap();
        let mut found = LinuxKernel.subdirs(d).unwrap();
        found.sort();
        assert_eq!(
            found,
            vec![d.join("child"), d.join("cpu"), d.join("cpu,cpuacct")]
        );
    }
}
