//! [`RootedDir`]: a directory handle that every path below it is resolved against,
//! never leaving it and never following a symlink.

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use nix::errno::Errno;
use nix::fcntl::{OFlag, ResolveFlag};
use nix::sys::stat::{FileStat, Mode, SFlag};

use super::RootedError;
use super::sys::{DirKernel, LINUX};

/// No symlink anywhere, no `..` above the handle, no /proc magic link: the path is
/// inside the handle's tree as it is when the call resolves it, or the call fails.
pub(super) fn confined() -> ResolveFlag {
    ResolveFlag::RESOLVE_BENEATH
        | ResolveFlag::RESOLVE_NO_SYMLINKS
        | ResolveFlag::RESOLVE_NO_MAGICLINKS
}

/// What kind of inode an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    Dir,
    File,
    Symlink,
    /// A fifo, socket or device node.
    Other,
}

impl EntryKind {
    pub fn of(st: &FileStat) -> Self {
        match SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT {
            SFlag::S_IFDIR => Self::Dir,
            SFlag::S_IFREG => Self::File,
            SFlag::S_IFLNK => Self::Symlink,
            _ => Self::Other,
        }
    }
}

/// An `O_PATH` handle of a directory and the kernel seam its calls go through. Every
/// relative path given to it is resolved beneath it with `openat2(RESOLVE_BENEATH |
/// RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`; calls that take a name (mkdir,
/// unlink, rename, symlink, readlink) act on the last component inside its parent's
/// handle, resolved the same way, and never follow it. Modes and owners are set on
/// opened fds. A container that swaps any component for a symlink makes the call fail
/// (`RootedError::Escapes`), never reach outside.
#[derive(Debug, Clone)]
pub struct RootedDir {
    fd: Arc<OwnedFd>,
    /// For messages only: the handle's path when it was opened.
    path: PathBuf,
    kernel: &'static dyn DirKernel,
}

impl RootedDir {
    /// Opens `path` as a root. `path` itself must be podhost's own (no component of it
    /// writable by a container); its last component is not followed.
    pub fn open(path: &Path) -> Result<Self, RootedError> {
        Self::open_with(&LINUX, path)
    }

    /// [`open`](Self::open) through `kernel`.
    pub fn open_with(kernel: &'static dyn DirKernel, path: &Path) -> Result<Self, RootedError> {
        let fd = nix::fcntl::open(
            path,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| RootedError::at("open", path, e))?;
        Ok(Self {
            fd: Arc::new(fd),
            path: path.to_path_buf(),
            kernel,
        })
    }

    /// The handle's path when it was opened (for messages; never to be resolved again).
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    pub(super) fn kernel(&self) -> &'static dyn DirKernel {
        self.kernel
    }

    fn shown(&self, rel: &str) -> PathBuf {
        if rel.is_empty() || rel == "." {
            self.path.clone()
        } else {
            self.path.join(rel)
        }
    }

    fn err(&self, op: &'static str, rel: &str, e: Errno) -> RootedError {
        RootedError::at(op, &self.shown(rel), e)
    }

    /// `rel` split into its parent's handle and its last component.
    fn parent_of<'a>(&self, rel: &'a str) -> Result<(RootedDir, &'a str), RootedError> {
        let rel = rel.trim_end_matches('/');
        match rel.rsplit_once('/') {
            Some((parent, name)) => Ok((self.open_dir(parent)?, name)),
            None => Ok((self.clone(), rel)),
        }
    }

    /// Opens `rel` with `flags` (O_CLOEXEC added), confined.
    pub fn open_at(&self, rel: &str, flags: OFlag, mode: Mode) -> Result<OwnedFd, RootedError> {
        let path = if rel.is_empty() { "." } else { rel };
        self.kernel
            .openat2(self.fd(), path, flags, mode, confined())
            .map_err(|e| self.err("open", rel, e))
    }

    /// Opens `rel` letting the kernel follow symlinks that stay beneath this handle
    /// (`RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`): an absolute link or one that climbs
    /// out is refused. Only for subPath, whose in-volume links the kubelet follows; the
    /// fd is what gets used, so nothing can be swapped between this and its use.
    pub fn open_following_inner_links(
        &self,
        rel: &str,
        flags: OFlag,
    ) -> Result<OwnedFd, RootedError> {
        let resolve = ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS;
        self.kernel
            .openat2(self.fd(), rel, flags, Mode::empty(), resolve)
            .map_err(|e| self.err("open", rel, e))
    }

    /// Makes the missing directories of `rel` with exactly `mode` (umask aside, set on
    /// each new directory's handle), each component opened with
    /// [`open_following_inner_links`](Self::open_following_inner_links) from its parent's
    /// handle; returns the last one's handle.
    pub fn make_dirs_following_inner_links(
        &self,
        rel: &str,
        mode: u32,
    ) -> Result<RootedDir, RootedError> {
        let mut dir = self.clone();
        for part in rel.split('/').filter(|p| !p.is_empty() && *p != ".") {
            let made = match self
                .kernel
                .mkdirat(dir.fd(), part, Mode::from_bits_truncate(0o700))
            {
                Ok(()) => true,
                Err(Errno::EEXIST) => false,
                Err(e) => return Err(dir.err("create directory", part, e)),
            };
            let fd = dir.open_following_inner_links(part, OFlag::O_PATH | OFlag::O_DIRECTORY)?;
            if made {
                self.kernel
                    .fchmod(fd.as_fd(), Mode::from_bits_truncate(mode))
                    .map_err(|e| dir.err("set the mode of", part, e))?;
            }
            dir = RootedDir {
                fd: Arc::new(fd),
                path: dir.shown(part),
                kernel: self.kernel,
            };
        }
        Ok(dir)
    }

    /// A new fd of the same directory (for a caller that must own one).
    pub fn duplicate_fd(&self) -> Result<OwnedFd, RootedError> {
        nix::unistd::dup(self.fd()).map_err(|e| self.err("duplicate", "", e))
    }

    /// A handle of the directory `rel` below this one.
    pub fn open_dir(&self, rel: &str) -> Result<RootedDir, RootedError> {
        let fd = self.open_at(rel, OFlag::O_PATH | OFlag::O_DIRECTORY, Mode::empty())?;
        Ok(RootedDir {
            fd: Arc::new(fd),
            path: self.shown(rel),
            kernel: self.kernel,
        })
    }

    /// An `O_PATH` fd of whatever `rel` is (a symlink itself, not its target).
    pub fn open_entry(&self, rel: &str) -> Result<OwnedFd, RootedError> {
        self.open_at(rel, OFlag::O_PATH | OFlag::O_NOFOLLOW, Mode::empty())
    }

    /// What `rel` is, without following it; `None` when there is nothing.
    pub fn kind(&self, rel: &str) -> Result<Option<EntryKind>, RootedError> {
        Ok(self.lstat(rel)?.as_ref().map(EntryKind::of))
    }

    /// The stat of `rel` itself (a link's own); `None` when there is nothing.
    pub fn lstat(&self, rel: &str) -> Result<Option<FileStat>, RootedError> {
        let (parent, name) = self.parent_of(rel)?;
        match self.kernel.lstatat(parent.fd(), name) {
            Ok(st) => Ok(Some(st)),
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(self.err("inspect", rel, e)),
        }
    }

    /// The stat of the directory itself.
    pub fn stat(&self) -> Result<FileStat, RootedError> {
        self.kernel
            .fstat(self.fd())
            .map_err(|e| self.err("inspect", "", e))
    }

    /// Makes the directory `rel` (its parent must exist) with exactly `mode`, set on the
    /// new directory's fd; an existing directory is kept as it is. Returns its handle.
    pub fn make_dir(&self, rel: &str, mode: u32) -> Result<RootedDir, RootedError> {
        Ok(self.make_dir_created(rel, mode)?.0)
    }

    /// [`make_dir`](Self::make_dir), and whether the directory was made now.
    pub fn make_dir_created(&self, rel: &str, mode: u32) -> Result<(RootedDir, bool), RootedError> {
        let (parent, name) = self.parent_of(rel)?;
        match self
            .kernel
            .mkdirat(parent.fd(), name, Mode::from_bits_truncate(0o700))
        {
            Ok(()) => {
                let dir = self.open_dir(rel)?;
                self.kernel
                    .fchmod(dir.fd(), Mode::from_bits_truncate(mode))
                    .map_err(|e| self.err("set the mode of", rel, e))?;
                Ok((dir, true))
            }
            Err(Errno::EEXIST) => Ok((self.open_dir(rel)?, false)),
            Err(e) => Err(self.err("create directory", rel, e)),
        }
    }

    /// Gives the directory itself the group `gid` and adds `bits` to its mode (on its
    /// fd, after the chown).
    pub fn add_group(&self, gid: u32, bits: u32) -> Result<(), RootedError> {
        self.kernel
            .fchown(self.fd(), None, Some(gid))
            .map_err(|e| self.err("set the group of", "", e))?;
        let mode = self.stat()?.st_mode & 0o7777;
        self.kernel
            .fchmod(self.fd(), Mode::from_bits_truncate(mode | bits))
            .map_err(|e| self.err("set the mode of", "", e))
    }

    /// Makes every missing directory of `rel`, one component at a time, each with `mode`.
    pub fn make_dir_all(&self, rel: &str, mode: u32) -> Result<RootedDir, RootedError> {
        let mut dir = self.clone();
        for part in rel.split('/').filter(|p| !p.is_empty() && *p != ".") {
            dir = dir.make_dir(part, mode)?;
        }
        Ok(dir)
    }

    /// Creates the file `rel` (it must not exist) with exactly `mode` and, when given,
    /// group `gid`, both set on the new file's fd, and writes `data` into it.
    pub fn create_file(
        &self,
        rel: &str,
        data: &[u8],
        mode: u32,
        gid: Option<u32>,
    ) -> Result<File, RootedError> {
        let fd = self.open_at(
            rel,
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW,
            Mode::from_bits_truncate(0o600),
        )?;
        if gid.is_some() {
            self.kernel
                .fchown(fd.as_fd(), None, gid)
                .map_err(|e| self.err("set the group of", rel, e))?;
        }
        // After the chown, which clears setgid bits; the umask must not narrow it.
        self.kernel
            .fchmod(fd.as_fd(), Mode::from_bits_truncate(mode))
            .map_err(|e| self.err("set the mode of", rel, e))?;
        let mut file = File::from(fd);
        file.write_all(data)
            .map_err(|e| RootedError::io("write", &self.shown(rel), e))?;
        Ok(file)
    }

    /// Replaces the file `name` of this directory with `data` atomically: a temp file
    /// beside it (`.<name>.tmp.<pid>.<seq>`, the scheme the daemon's start-up sweep
    /// removes) with mode `mode`, renamed over it; with `durable`, the file and then the
    /// directory fsynced around the rename.
    pub fn replace_file(
        &self,
        name: &str,
        data: &[u8],
        mode: u32,
        durable: bool,
    ) -> Result<(), RootedError> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let (parent, leaf) = self.parent_of(name)?;
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let tmp = format!(".{leaf}.tmp.{}.{seq}", std::process::id());
        let written = parent.create_file(&tmp, data, mode, None).and_then(|file| {
            if durable {
                file.sync_all()
                    .map_err(|e| RootedError::io("sync", &parent.shown(&tmp), e))?;
            }
            parent.rename(&tmp, leaf)
        });
        if written.is_err() {
            let _ = self.kernel.unlinkat(parent.fd(), &tmp, false);
        }
        written?;
        if durable {
            parent.sync()?;
        }
        Ok(())
    }

    /// fsync of the directory itself (through a readable fd of it).
    pub fn sync(&self) -> Result<(), RootedError> {
        let fd = self.open_at(".", OFlag::O_RDONLY | OFlag::O_DIRECTORY, Mode::empty())?;
        File::from(fd)
            .sync_all()
            .map_err(|e| RootedError::io("sync", &self.path, e))
    }

    /// Reads at most `limit` bytes of the regular file `rel` (a fifo, device or link
    /// there is an error, never opened for reading).
    pub fn read_file(&self, rel: &str, limit: u64) -> Result<Vec<u8>, RootedError> {
        let fd = self.open_at(
            rel,
            OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK,
            Mode::empty(),
        )?;
        let st = self
            .kernel
            .fstat(fd.as_fd())
            .map_err(|e| self.err("inspect", rel, e))?;
        if EntryKind::of(&st) != EntryKind::File {
            return Err(RootedError::NotAFile {
                path: self.shown(rel),
            });
        }
        let mut out = Vec::new();
        File::from(fd)
            .take(limit)
            .read_to_end(&mut out)
            .map_err(|e| RootedError::io("read", &self.shown(rel), e))?;
        Ok(out)
    }

    /// The symlink `rel`'s target; `None` when `rel` does not exist.
    pub fn read_link(&self, rel: &str) -> Result<Option<OsString>, RootedError> {
        let (parent, name) = self.parent_of(rel)?;
        match self.kernel.readlinkat(parent.fd(), name) {
            Ok(t) => Ok(Some(t)),
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(self.err("read the link", rel, e)),
        }
    }

    /// Makes the symlink `rel` -> `target` (the target is stored, never resolved here).
    pub fn symlink(&self, target: &str, rel: &str) -> Result<(), RootedError> {
        let (parent, name) = self.parent_of(rel)?;
        self.kernel
            .symlinkat(target, parent.fd(), name)
            .map_err(|e| self.err("create the symlink", rel, e))
    }

    /// Renames the entry `from` of this directory to `to` (both single names here).
    pub fn rename(&self, from: &str, to: &str) -> Result<(), RootedError> {
        self.kernel
            .renameat(self.fd(), from, to)
            .map_err(|e| self.err("rename", from, e))
    }

    /// Removes the non-directory `rel`; one that is already gone is not an error.
    pub fn remove_file(&self, rel: &str) -> Result<(), RootedError> {
        let (parent, name) = self.parent_of(rel)?;
        match self.kernel.unlinkat(parent.fd(), name, false) {
            Ok(()) | Err(Errno::ENOENT) => Ok(()),
            Err(e) => Err(self.err("remove", rel, e)),
        }
    }

    /// The names in this directory.
    pub fn entries(&self) -> Result<Vec<OsString>, RootedError> {
        self.kernel
            .list(self.fd())
            .map_err(|e| self.err("list", "", e))
    }

    /// Removes `rel` and everything below it, through handles only: a symlink in there
    /// is removed, never followed; other filesystems mounted inside are not entered.
    pub fn remove_tree(&self, rel: &str) -> Result<(), RootedError> {
        let (parent, name) = self.parent_of(rel)?;
        super::walk::remove_tree(&parent, name)
    }
}
