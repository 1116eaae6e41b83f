//! The rooted layer's kernel seam: the handful of fd-relative system calls it makes,
//! behind one trait, so that its decisions can be tested against an adversary that
//! changes the tree between any two of them (`adversary`, tests only). Production
//! passes [`LINUX`]; every method is one system call with its man page's semantics.
//!
//! Reads and writes of an opened file are not here: they go through the fd and cannot
//! be redirected by anything a container does to the tree.

use std::ffi::OsString;
use std::fmt::Debug;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

use nix::fcntl::{AtFlags, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{FileStat, Mode};
use nix::unistd::{Gid, Uid, UnlinkatFlags};

/// The fd-relative system calls of the rooted layer. Names are single path components
/// except in [`DirKernel::openat2`], whose resolution flags confine a longer path.
pub trait DirKernel: Debug + Send + Sync {
    /// openat2(2).
    fn openat2(
        &self,
        dir: BorrowedFd<'_>,
        path: &str,
        flags: OFlag,
        mode: Mode,
        resolve: ResolveFlag,
    ) -> nix::Result<OwnedFd>;
    /// mkdirat(2).
    fn mkdirat(&self, dir: BorrowedFd<'_>, name: &str, mode: Mode) -> nix::Result<()>;
    /// unlinkat(2); `dir_entry`: AT_REMOVEDIR.
    fn unlinkat(&self, dir: BorrowedFd<'_>, name: &str, dir_entry: bool) -> nix::Result<()>;
    /// renameat(2) within one directory.
    fn renameat(&self, dir: BorrowedFd<'_>, from: &str, to: &str) -> nix::Result<()>;
    /// symlinkat(2).
    fn symlinkat(&self, target: &str, dir: BorrowedFd<'_>, name: &str) -> nix::Result<()>;
    /// readlinkat(2).
    fn readlinkat(&self, dir: BorrowedFd<'_>, name: &str) -> nix::Result<OsString>;
    /// fstatat(2) with AT_SYMLINK_NOFOLLOW.
    fn lstatat(&self, dir: BorrowedFd<'_>, name: &str) -> nix::Result<FileStat>;
    /// fstat(2).
    fn fstat(&self, fd: BorrowedFd<'_>) -> nix::Result<FileStat>;
    /// The mode of the inode `fd` holds (also an O_PATH fd): fchmod(2), or for an O_PATH
    /// fd chmod(2) of its /proc/self/fd link, which the kernel resolves to that inode.
    fn fchmod(&self, fd: BorrowedFd<'_>, mode: Mode) -> nix::Result<()>;
    /// fchownat(2) with AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW: the inode `fd` holds.
    fn fchown(&self, fd: BorrowedFd<'_>, uid: Option<u32>, gid: Option<u32>) -> nix::Result<()>;
    /// The names in the directory `fd` holds (getdents64 on a fresh readable fd of it),
    /// without `.` and `..`.
    fn list(&self, fd: BorrowedFd<'_>) -> nix::Result<Vec<OsString>>;
}

/// The real kernel.
#[derive(Debug, Clone, Copy, Default)]
pub struct LinuxDirKernel;

/// The one production [`DirKernel`].
pub static LINUX: LinuxDirKernel = LinuxDirKernel;

impl DirKernel for LinuxDirKernel {
    fn openat2(
        &self,
        dir: BorrowedFd<'_>,
        path: &str,
        flags: OFlag,
        mode: Mode,
        resolve: ResolveFlag,
    ) -> nix::Result<OwnedFd> {
        let how = OpenHow::new()
            .flags(flags | OFlag::O_CLOEXEC)
            .mode(mode)
            .resolve(resolve);
        nix::fcntl::openat2(dir, path, how)
    }

    fn mkdirat(&self, dir: BorrowedFd<'_>, name: &str, mode: Mode) -> nix::Result<()> {
        nix::sys::stat::mkdirat(dir, name, mode)
    }

    fn unlinkat(&self, dir: BorrowedFd<'_>, name: &str, dir_entry: bool) -> nix::Result<()> {
        let flag = if dir_entry {
            UnlinkatFlags::RemoveDir
        } else {
            UnlinkatFlags::NoRemoveDir
        };
        nix::unistd::unlinkat(dir, name, flag)
    }

    fn renameat(&self, dir: BorrowedFd<'_>, from: &str, to: &str) -> nix::Result<()> {
        nix::fcntl::renameat(dir, from, dir, to)
    }

    fn symlinkat(&self, target: &str, dir: BorrowedFd<'_>, name: &str) -> nix::Result<()> {
        nix::unistd::symlinkat(target, dir, name)
    }

    fn readlinkat(&self, dir: BorrowedFd<'_>, name: &str) -> nix::Result<OsString> {
        nix::fcntl::readlinkat(dir, name)
    }

    fn lstatat(&self, dir: BorrowedFd<'_>, name: &str) -> nix::Result<FileStat> {
        nix::sys::stat::fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)
    }

    fn fstat(&self, fd: BorrowedFd<'_>) -> nix::Result<FileStat> {
        nix::sys::stat::fstat(fd)
    }

    fn fchmod(&self, fd: BorrowedFd<'_>, mode: Mode) -> nix::Result<()> {
        match nix::sys::stat::fchmod(fd, mode) {
            // An O_PATH fd: its magic link names exactly the inode it holds.
            Err(nix::Error::EBADF) => nix::sys::stat::fchmodat(
                nix::fcntl::AT_FDCWD,
                format!("/proc/self/fd/{}", fd.as_raw_fd()).as_str(),
                mode,
                nix::sys::stat::FchmodatFlags::FollowSymlink,
            ),
            other => other,
        }
    }

    fn fchown(&self, fd: BorrowedFd<'_>, uid: Option<u32>, gid: Option<u32>) -> nix::Result<()> {
        nix::unistd::fchownat(
            fd,
            "",
            uid.map(Uid::from_raw),
            gid.map(Gid::from_raw),
            AtFlags::AT_EMPTY_PATH | AtFlags::AT_SYMLINK_NOFOLLOW,
        )
    }

    fn list(&self, fd: BorrowedFd<'_>) -> nix::Result<Vec<OsString>> {
        // A readable fd of the same directory ("." beneath it cannot be anything else).
        let readable = nix::fcntl::openat(
            fd,
            ".",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        let mut dir = nix::dir::Dir::from_fd(readable)?;
        let mut names = Vec::new();
        for entry in dir.iter() {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." {
                names.push(
                    <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(name)
                        .to_os_string(),
                );
            }
        }
        Ok(names)
    }
}
