//! File operations confined to one snapshot directory.
//!
//! Every path is resolved by the kernel with `openat2(RESOLVE_IN_ROOT |
//! RESOLVE_NO_MAGICLINKS)` through [`pathrs`] (libpathrs, the library runc uses for
//! the same job): `..`, absolute symlinks and symlink chains all resolve as they
//! would inside the container, never above the snapshot directory. What is then
//! created or changed is a single final name in the directory fd that resolution
//! returned ([`At`]), with the `*at()` syscalls and `AT_SYMLINK_NOFOLLOW`, so the
//! final component is never followed either.
//!
//! No string check is involved in staying inside: the unpacker's name policy
//! (refusing `..`, reading `/x` as `x`) only gives clearer errors.

use std::cell::RefCell;
use std::ffi::{OsStr, OsString};
use std::fs::{File, Permissions};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{
    FchmodatFlags, FileStat, Mode, SFlag, UtimensatFlags, fchmodat, fstat, fstatat, mkdirat,
    mknodat, utimensat,
};
use nix::sys::time::TimeSpec;
use nix::unistd::{Gid, Uid, UnlinkatFlags, fchownat, linkat, symlinkat, unlinkat};
use pathrs::flags::OpenFlags;
use pathrs::{Root, RootRef};

/// Mode of the parent directories created for entries whose directory is not in
/// the layer (as `tar` and containerd do).
const IMPLICIT_DIR_MODE: u32 = 0o755;

/// A directory all of whose operations stay inside it.
#[derive(Debug)]
pub(crate) struct RootedDir {
    root: Root,
    /// The directory the last entry went into: a layer lists a directory's
    /// entries together, and resolving the same path again costs two syscalls
    /// per entry. Forgotten on every removal ([`RootedDir::remove`]), the only
    /// operation that can change what an existing path resolves to.
    last_dir: RefCell<Option<ResolvedDir>>,
    /// Directories created because an entry's parent was missing, in creation
    /// order (shallowest first), by the path that named them.
    implicit: RefCell<Vec<PathBuf>>,
}

#[derive(Debug, Clone)]
struct ResolvedDir {
    rel: PathBuf,
    fd: Rc<OwnedFd>,
    mode: u32,
}

/// Why the directory an entry goes into could not be had.
#[derive(Debug)]
pub(crate) enum AtError {
    /// The parent path leads to something that is not a directory inside the
    /// root (a dangling or looping symlink, a file in the way): the entry is
    /// refused.
    Parent(io::Error),
    /// The final name is empty, `.` or `..` (never produced by the name policy).
    BadName,
    /// Any other error (I/O, no space left, ...).
    Io(io::Error),
}

/// One name in one directory of the root: the handle every create/change call
/// works on. The directory was resolved inside the root; `name` is a single
/// component, never `.` or `..`, never followed.
#[derive(Debug)]
pub(crate) struct At {
    dir: Rc<OwnedFd>,
    name: OsString,
    /// The directory's `st_mode`.
    dir_mode: u32,
}

impl RootedDir {
    /// Opens `path`, an existing directory, as the root of all later operations.
    pub(crate) fn open(path: &Path) -> io::Result<RootedDir> {
        let real = std::fs::canonicalize(path)?;
        let root = Root::open(&real).map_err(to_io)?;
        Ok(RootedDir {
            root,
            last_dir: RefCell::new(None),
            implicit: RefCell::new(Vec::new()),
        })
    }

    /// The directory of `rel` (resolved in the root, created with mode 0755 when
    /// missing and `create` is set) and its final name.
    pub(crate) fn at(&self, rel: &Path, create: bool) -> Result<At, AtError> {
        let name = rel.file_name().ok_or(AtError::BadName)?;
        if !is_plain_name(name) {
            return Err(AtError::BadName);
        }
        let parent = rel.parent().unwrap_or(Path::new(""));
        let cached = self.last_dir.borrow().clone();
        let resolved = match cached.filter(|c| c.rel == parent) {
            Some(hit) => hit,
            None => {
                let fd = self.dir_fd(parent, create)?;
                let st = fstat(&fd).map_err(|e| AtError::Io(e.into()))?;
                if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFDIR {
                    return Err(AtError::Parent(Errno::ENOTDIR.into()));
                }
                let resolved = ResolvedDir {
                    rel: parent.to_path_buf(),
                    fd: Rc::new(fd),
                    mode: st.st_mode,
                };
                *self.last_dir.borrow_mut() = Some(resolved.clone());
                resolved
            }
        };
        Ok(At {
            dir: resolved.fd,
            name: name.to_os_string(),
            dir_mode: resolved.mode,
        })
    }

    /// Removes `at`'s name: a directory with everything in it, anything else with
    /// unlink (a symlink itself, never its target).
    pub(crate) fn remove(&self, at: &At, is_dir: bool) -> io::Result<()> {
        // What a path resolves to may change now.
        *self.last_dir.borrow_mut() = None;
        if is_dir {
            // The directory fd is the "root" here: removal stays inside it.
            RootRef::from_fd(at.dir.as_fd())
                .remove_all(&at.name)
                .map_err(to_io)
        } else {
            unlinkat(&*at.dir, at.name.as_os_str(), UnlinkatFlags::NoRemoveDir)
                .map_err(io::Error::from)
        }
    }

    /// An O_PATH fd of `rel` (the root itself when empty), creating missing
    /// directories when `create` is set; the caller checks it is a directory.
    fn dir_fd(&self, rel: &Path, create: bool) -> Result<OwnedFd, AtError> {
        let fd: OwnedFd = if rel.as_os_str().is_empty() {
            self.root
                .as_fd()
                .try_clone_to_owned()
                .map_err(AtError::Io)?
        } else {
            match self.root.resolve(rel) {
                Ok(h) => h.into(),
                Err(e) => {
                    let e = to_io(e);
                    if create && e.raw_os_error() == Some(libc::ENOENT) {
                        let created = self.missing_ancestors(rel);
                        let perm = Permissions::from_mode(IMPLICIT_DIR_MODE);
                        let fd = self
                            .root
                            .mkdir_all(rel, &perm)
                            .map_err(|e| parent_error(to_io(e)))?;
                        self.implicit.borrow_mut().extend(created);
                        fd.into()
                    } else {
                        return Err(parent_error(e));
                    }
                }
            }
        };
        Ok(fd)
    }

    /// `rel` and those of its ancestors that do not resolve, shallowest first:
    /// what `mkdir_all(rel)` is about to create.
    fn missing_ancestors(&self, rel: &Path) -> Vec<PathBuf> {
        let mut missing = vec![rel.to_path_buf()];
        let mut cur = rel;
        while let Some(parent) = cur.parent().filter(|p| !p.as_os_str().is_empty()) {
            if self.root.resolve(parent).is_ok() {
                break;
            }
            missing.push(parent.to_path_buf());
            cur = parent;
        }
        missing.reverse();
        missing
    }

    /// The directories created for entries whose parent was missing (see
    /// [`RootedDir::at`]), shallowest first.
    pub(crate) fn implicit_dirs(&self) -> Vec<PathBuf> {
        self.implicit.borrow().clone()
    }

    /// Opens directory `rel` for reading (for its metadata), without following a
    /// final symlink. `Ok(None)` when it is no longer a directory (a later entry
    /// replaced it) or is gone.
    pub(crate) fn open_dir(&self, rel: &Path) -> io::Result<Option<File>> {
        let flags = OpenFlags::O_RDONLY
            | OpenFlags::O_DIRECTORY
            | OpenFlags::O_NOFOLLOW
            | OpenFlags::O_CLOEXEC;
        let opened = if rel.as_os_str().is_empty() {
            openat(
                &self.root,
                ".",
                OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .map(File::from)
            .map_err(io::Error::from)
        } else {
            self.root.open_subpath(rel, flags).map_err(to_io)
        };
        match opened {
            Ok(f) => Ok(Some(f)),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}

impl At {
    /// `lstat` of the name; `None` if absent.
    pub(crate) fn lstat(&self) -> io::Result<Option<FileStat>> {
        match fstatat(
            &*self.dir,
            self.name.as_os_str(),
            AtFlags::AT_SYMLINK_NOFOLLOW,
        ) {
            Ok(st) => Ok(Some(st)),
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Creates a new regular file (mode 0600 until the metadata is applied),
    /// failing if the name exists; never follows a symlink.
    pub(crate) fn create_file(&self) -> io::Result<File> {
        let flags =
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = openat(
            &*self.dir,
            self.name.as_os_str(),
            flags,
            Mode::from_bits_truncate(0o600),
        )?;
        Ok(File::from(fd))
    }

    /// `mkdir` (mode 0755 until the metadata is applied).
    pub(crate) fn mkdir(&self) -> io::Result<()> {
        mkdirat(
            &*self.dir,
            self.name.as_os_str(),
            Mode::from_bits_truncate(IMPLICIT_DIR_MODE),
        )
        .map_err(io::Error::from)
    }

    /// A symlink holding `target` as written (it is resolved by whoever follows
    /// it: the container, or this module with RESOLVE_IN_ROOT).
    pub(crate) fn symlink(&self, target: &OsStr) -> io::Result<()> {
        symlinkat(target, &*self.dir, self.name.as_os_str()).map_err(io::Error::from)
    }

    /// A hard link to `src` (a symlink is linked itself, not followed).
    pub(crate) fn hardlink_to(&self, src: &At) -> io::Result<()> {
        linkat(
            &*src.dir,
            src.name.as_os_str(),
            &*self.dir,
            self.name.as_os_str(),
            AtFlags::empty(),
        )
        .map_err(io::Error::from)
    }

    /// `mknod` of a FIFO or device node.
    pub(crate) fn mknod(&self, kind: SFlag, perm: u32, dev: u64) -> io::Result<()> {
        mknodat(
            &*self.dir,
            self.name.as_os_str(),
            kind,
            Mode::from_bits_truncate(perm),
            dev,
        )
        .map_err(io::Error::from)
    }

    /// `lchown`.
    pub(crate) fn chown(&self, uid: u32, gid: u32) -> io::Result<()> {
        fchownat(
            &*self.dir,
            self.name.as_os_str(),
            Some(Uid::from_raw(uid)),
            Some(Gid::from_raw(gid)),
            AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .map_err(io::Error::from)
    }

    /// `chmod` without following a symlink (fails on a symlink).
    pub(crate) fn chmod(&self, mode: u32) -> io::Result<()> {
        fchmodat(
            &*self.dir,
            self.name.as_os_str(),
            Mode::from_bits_truncate(mode),
            FchmodatFlags::NoFollowSymlink,
        )
        .map_err(io::Error::from)
    }

    /// Sets atime and mtime to `mtime`, without following a symlink.
    pub(crate) fn set_times(&self, mtime: &TimeSpec) -> io::Result<()> {
        utimensat(
            &*self.dir,
            self.name.as_os_str(),
            mtime,
            mtime,
            UtimensatFlags::NoFollowSymlink,
        )
        .map_err(io::Error::from)
    }

    /// `lsetxattr` on the name. There is no `lsetxattrat`, so the path goes
    /// through this process's fd of the directory: `/proc/self/fd/N/NAME`, whose
    /// last component is not followed.
    pub(crate) fn set_xattr(&self, key: &str, value: &[u8]) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let mut path = PathBuf::from(format!("/proc/self/fd/{}", self.dir.as_raw_fd()));
        path.push(&self.name);
        xattr::set(&path, key, value)
    }

    /// Whether the directory this name is in has the set-group-ID bit (new
    /// entries then take its group instead of the creator's).
    pub(crate) fn dir_is_setgid(&self) -> bool {
        self.dir_mode & libc::S_ISGID != 0
    }

    /// Opens the directory this name is in, for reading.
    pub(crate) fn open_parent(&self) -> io::Result<File> {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let fd = openat(&*self.dir, ".", flags, Mode::empty())?;
        Ok(File::from(fd))
    }
}

/// True when two stats are of the same inode.
pub(crate) fn same_inode(a: &FileStat, b: &FileStat) -> bool {
    a.st_dev == b.st_dev && a.st_ino == b.st_ino
}

/// A single path component other than `.` and `..`.
fn is_plain_name(name: &OsStr) -> bool {
    let b = name.as_bytes();
    !b.is_empty() && b != b"." && b != b".." && !b.contains(&b'/') && !b.contains(&0)
}

/// Errors resolving or creating a parent directory that mean "not a directory
/// inside the root" become [`AtError::Parent`]; the rest stay I/O errors.
fn parent_error(e: io::Error) -> AtError {
    match e.raw_os_error() {
        Some(
            libc::ENOENT
            | libc::ENOTDIR
            | libc::ELOOP
            | libc::EXDEV
            | libc::EEXIST
            | libc::ENAMETOOLONG,
        ) => AtError::Parent(e),
        _ => AtError::Io(e),
    }
}

/// A libpathrs error as an `io::Error`, keeping the errno when there is one.
fn to_io(e: pathrs::error::Error) -> io::Error {
    match e.kind() {
        pathrs::error::ErrorKind::OsError(Some(errno)) => io::Error::from_raw_os_error(errno),
        pathrs::error::ErrorKind::SafetyViolation => io::Error::new(
            io::Error::from_raw_os_error(libc::EXDEV).kind(),
            format!("path resolution left the snapshot: {e}"),
        ),
        _ => io::Error::other(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names() {
        assert!(is_plain_name(OsStr::new("a")));
        assert!(is_plain_name(OsStr::new(".wh.a")));
        for bad in ["", ".", "..", "a/b"] {
            assert!(!is_plain_name(OsStr::new(bad)), "{bad}");
        }
    }

    /// The kernel keeps `..` and absolute symlinks inside the root, whatever the
    /// name policy says.
    #[test]
    fn resolution_stays_inside_without_any_name_check() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir(&root).unwrap();
        std::fs::create_dir(tmp.path().join("outside")).unwrap();
        std::os::unix::fs::symlink("/", root.join("up")).unwrap();
        std::os::unix::fs::symlink("../../../outside", root.join("rel")).unwrap();
        let r = RootedDir::open(&root).unwrap();
        let cases = [
            ("../a", "a"),
            ("../../outside/b", "outside/b"),
            ("up/c", "c"),
            ("up/../../d", "d"),
            ("rel/e", "outside/e"),
        ];
        for (rel, lands) in cases {
            let at = r.at(Path::new(rel), true).unwrap();
            at.create_file().unwrap();
            assert!(root.join(lands).is_file(), "{rel} did not land at {lands}");
        }
        assert_eq!(
            std::fs::read_dir(tmp.path().join("outside"))
                .unwrap()
                .count(),
            0
        );
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 2);
    }
}
