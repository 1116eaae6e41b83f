//! Directories a layer creates without listing them, resolved against the layers
//! below it, as containerd gets by applying a layer on top of its parents' mounted
//! view:
//! - where a lower layer has a **symlink**, the layer's entries belong where the
//!   link points (`lib/x` over `lib -> usr/lib` is `usr/lib/x`): they are moved
//!   there and the made-up directory removed, so the lower link shows through;
//! - where a lower layer has a **directory**, the made-up one takes its owner and
//!   mode (overlayfs' copy-up would have).
//!
//! Layers are unpacked on their own (in parallel, while they download), so this
//! runs when a snapshot is adopted, once the parents' snapshots exist. The lower
//! view follows overlayfs: the topmost layer with a name wins, a whiteout (char
//! 0:0) hides the name below it, a directory merges with the directories below
//! it unless it is opaque. Every path is walked one component at a time with
//! `O_NOFOLLOW` fds; symlink targets are resolved by this module inside the
//! image's root, never by the kernel.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, RenameFlags, openat, readlinkat, renameat2};
use nix::sys::stat::{FchmodatFlags, FileStat, Mode, SFlag, fchmodat, fstatat, mkdirat};
use nix::unistd::{Gid, Uid, UnlinkatFlags, fchownat, unlinkat};
use pathrs::RootRef;

/// Symlinks followed while resolving one target (the kernel's limit).
const MAX_HOPS: usize = 40;
const OPAQUE_XATTR: &str = "trusted.overlay.opaque";

/// What [`resolve_implicit_dirs`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ImplicitFixes {
    /// `(made-up dir, where its content went)`.
    pub redirected: Vec<(PathBuf, PathBuf)>,
    /// Made-up dirs that took a lower directory's owner and mode.
    pub copied_up: usize,
}

/// Resolves the made-up directories `implicit` (shallowest first, as
/// [`super::UnpackStats::implicit_dirs`]) of the layer unpacked in `upper`
/// against `lowers`, the snapshot dirs of the layers below it, top first.
pub fn resolve_implicit_dirs(
    upper: &Path,
    implicit: &[PathBuf],
    lowers: &[PathBuf],
) -> io::Result<ImplicitFixes> {
    let mut fixes = ImplicitFixes::default();
    if implicit.is_empty() || lowers.is_empty() {
        return Ok(fixes);
    }
    let upper_root = open_path(None, upper.as_os_str())?;
    let lower_roots = lowers
        .iter()
        .map(|l| open_path(None, l.as_os_str()))
        .collect::<io::Result<Vec<_>>>()?;
    for dir in implicit {
        let Some(comps) = plain_components(dir) else {
            continue;
        };
        let Some((name, parents)) = comps.split_last() else {
            continue;
        };
        // Gone or moved already (under a redirected parent), or named through a
        // symlink of this layer: left as it is.
        let Ok(parent_fd) = walk_dirs(upper_root.as_fd(), parents) else {
            continue;
        };
        if !is_dir_at(parent_fd.as_fd(), name) {
            continue;
        }
        match lower_entry(&lower_roots, &comps)? {
            Lower::Dir(st) => {
                copy_up(parent_fd.as_fd(), name, &st)?;
                fixes.copied_up += 1;
            }
            Lower::Symlink(target) => {
                let wanted = join_target(parents, &target);
                let Some(dest) = resolve(upper_root.as_fd(), &lower_roots, wanted) else {
                    tracing::warn!(dir = %dir.display(), target = ?target,
                        "a lower layer's symlink does not lead to a directory; keeping the layer's own");
                    continue;
                };
                if dest.starts_with(&comps) || comps.starts_with(&dest) {
                    continue;
                }
                let dest_fd = match make_dirs(upper_root.as_fd(), &lower_roots, &dest) {
                    Ok(fd) => fd,
                    Err(e) => {
                        // Nothing moved yet: the layer stays as it was unpacked.
                        tracing::warn!(dir = %dir.display(), error = %e,
                            "cannot make the directory a lower layer's symlink leads to");
                        continue;
                    }
                };
                let src = open_dir(parent_fd.as_fd(), name)?;
                merge(src.as_fd(), dest_fd.as_fd())?;
                unlinkat(
                    parent_fd.as_fd(),
                    name.as_os_str(),
                    UnlinkatFlags::RemoveDir,
                )?;
                fixes
                    .redirected
                    .push((dir.clone(), dest.iter().collect::<PathBuf>()));
            }
            Lower::Missing => {}
        }
    }
    Ok(fixes)
}

/// A relative path's normal components; `None` for anything else (never made
/// by the unpacker).
fn plain_components(path: &Path) -> Option<Vec<OsString>> {
    path.components()
        .map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            _ => None,
        })
        .collect()
}

/// What the lower layers have at a path.
enum Lower {
    /// Nothing, or nothing this layer's directory merges with (a file).
    Missing,
    /// A directory; the topmost one's stat.
    Dir(FileStat),
    /// A symlink (topmost), with its target.
    Symlink(OsString),
}

/// One name looked up in a merged directory.
enum Step {
    Missing,
    /// The directories that merge at this name, top first, and the topmost's stat.
    Dir(Vec<OwnedFd>, FileStat),
    Symlink(OsString),
    Other,
}

/// Looks `name` up in the merged directory made of `dirs` (top first).
fn step(dirs: &[BorrowedFd<'_>], name: &OsStr) -> io::Result<Step> {
    let mut merged: Vec<OwnedFd> = Vec::new();
    let mut top: Option<FileStat> = None;
    for dir in dirs {
        let st = match fstatat(*dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(Errno::ENOENT) => continue,
            Err(e) => return Err(e.into()),
        };
        let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
        if kind == SFlag::S_IFCHR && st.st_rdev == 0 {
            break; // a whiteout: nothing below has this name
        }
        if kind != SFlag::S_IFDIR {
            if merged.is_empty() {
                if kind == SFlag::S_IFLNK {
                    return Ok(Step::Symlink(readlinkat(*dir, name)?));
                }
                return Ok(Step::Other);
            }
            break; // hidden by the directory above it
        }
        let fd = open_path(Some(*dir), name)?;
        let opaque = is_opaque(fd.as_fd());
        merged.push(fd);
        top.get_or_insert(st);
        if opaque {
            break;
        }
    }
    Ok(match top {
        Some(st) => Step::Dir(merged, st),
        None => Step::Missing,
    })
}

/// What the lower layers have at `comps`, following no symlink on the way: a
/// symlink or file in place of an ancestor means the lower layers have nothing
/// there that this layer's directory could merge with.
fn lower_entry(roots: &[OwnedFd], comps: &[OsString]) -> io::Result<Lower> {
    let mut dirs: Vec<OwnedFd> = roots
        .iter()
        .map(|r| r.try_clone())
        .collect::<io::Result<_>>()?;
    for (i, name) in comps.iter().enumerate() {
        let last = i + 1 == comps.len();
        let borrowed: Vec<BorrowedFd<'_>> = dirs.iter().map(AsFd::as_fd).collect();
        match step(&borrowed, name)? {
            Step::Dir(next, st) if last => {
                drop(next);
                return Ok(Lower::Dir(st));
            }
            Step::Dir(next, _) => dirs = next,
            Step::Symlink(target) if last => return Ok(Lower::Symlink(target)),
            Step::Missing | Step::Symlink(_) | Step::Other => return Ok(Lower::Missing),
        }
    }
    Ok(Lower::Missing)
}

/// The target of a symlink found at `parents/<name>`, as components from the
/// root (`..` stops at the root, as it does in a container).
fn join_target(parents: &[OsString], target: &OsStr) -> Vec<OsString> {
    let mut out: Vec<OsString> = if target.as_bytes().starts_with(b"/") {
        Vec::new()
    } else {
        parents.to_vec()
    };
    push_normalized(&mut out, Path::new(target));
    out
}

fn push_normalized(out: &mut Vec<OsString>, path: &Path) {
    for c in path.components() {
        match c {
            Component::Normal(n) => out.push(n.to_os_string()),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
}

/// Where `path` leads in the merged view of this layer over the lower ones,
/// following symlinks inside the root; the part that does not exist yet is kept
/// as written. `None` when it leads to a file, or loops.
fn resolve(
    upper: BorrowedFd<'_>,
    lowers: &[OwnedFd],
    path: Vec<OsString>,
) -> Option<Vec<OsString>> {
    let mut pending = path;
    let mut hops = 0;
    'restart: loop {
        let mut dirs: Vec<OwnedFd> = std::iter::once(upper)
            .chain(lowers.iter().map(AsFd::as_fd))
            .map(|fd| fd.try_clone_to_owned())
            .collect::<io::Result<_>>()
            .ok()?;
        let mut done: Vec<OsString> = Vec::new();
        for (i, name) in pending.iter().enumerate() {
            let borrowed: Vec<BorrowedFd<'_>> = dirs.iter().map(AsFd::as_fd).collect();
            match step(&borrowed, name).ok()? {
                Step::Dir(next, _) => {
                    dirs = next;
                    done.push(name.clone());
                }
                Step::Missing => {
                    done.extend(pending[i..].iter().cloned());
                    return Some(done);
                }
                Step::Symlink(target) => {
                    hops += 1;
                    if hops > MAX_HOPS {
                        return None;
                    }
                    let mut next = join_target(&done, &target);
                    next.extend(pending[i + 1..].iter().cloned());
                    pending = next;
                    continue 'restart;
                }
                Step::Other => return None,
            }
        }
        return Some(done);
    }
}

/// Why [`read_merged_file`] gave no content.
#[derive(Debug, thiserror::Error)]
pub enum MergedReadError {
    #[error("it is not a regular file")]
    NotRegular,
    #[error("it is larger than {limit} bytes")]
    TooLarge { limit: u64 },
    #[error("its symlinks loop or go more than {MAX_HOPS} deep")]
    Loop,
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Reads the regular file at `path` (relative to the image root) in the merged view
/// of `layers` (snapshot dirs, top first), as a container would see it: symlinks
/// (absolute or climbing) are followed inside the image's root by this module, never
/// by the kernel, so a link to `/dev/zero` or `/etc/shadow` names the image's own
/// file. `Ok(None)` when nothing is there (or a whiteout hides it). Only a regular
/// file of at most `limit` bytes is read: a device, FIFO or socket is refused before
/// it is opened for reading, and the file is opened `O_NONBLOCK | O_NOFOLLOW`.
pub fn read_merged_file(
    layers: &[PathBuf],
    path: &Path,
    limit: u64,
) -> Result<Option<Vec<u8>>, MergedReadError> {
    let roots = layers
        .iter()
        .map(|l| open_path(None, l.as_os_str()))
        .collect::<io::Result<Vec<_>>>()?;
    let mut pending: Vec<OsString> = Vec::new();
    push_normalized(&mut pending, path);
    let mut hops = 0;
    'restart: loop {
        let mut dirs: Vec<OwnedFd> = roots
            .iter()
            .map(|r| r.try_clone())
            .collect::<io::Result<_>>()?;
        let Some((leaf, parents)) = pending.split_last() else {
            return Err(MergedReadError::NotRegular);
        };
        for (i, name) in parents.iter().enumerate() {
            let borrowed: Vec<BorrowedFd<'_>> = dirs.iter().map(AsFd::as_fd).collect();
            match step(&borrowed, name)? {
                Step::Dir(next, _) => dirs = next,
                Step::Missing => return Ok(None),
                Step::Other => return Err(MergedReadError::NotRegular),
                Step::Symlink(target) => {
                    hops += 1;
                    if hops > MAX_HOPS {
                        return Err(MergedReadError::Loop);
                    }
                    let mut next = join_target(&pending[..i], &target);
                    next.extend(pending[i + 1..].iter().cloned());
                    pending = next;
                    continue 'restart;
                }
            }
        }
        for dir in &dirs {
            let st = match fstatat(dir.as_fd(), leaf.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                Err(Errno::ENOENT) => continue,
                Err(e) => return Err(io::Error::from(e).into()),
            };
            let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
            if kind == SFlag::S_IFLNK {
                hops += 1;
                if hops > MAX_HOPS {
                    return Err(MergedReadError::Loop);
                }
                let target = readlinkat(dir.as_fd(), leaf.as_os_str()).map_err(io::Error::from)?;
                pending = join_target(parents, &target);
                continue 'restart;
            }
            if kind == SFlag::S_IFCHR && st.st_rdev == 0 {
                return Ok(None); // a whiteout
            }
            if kind != SFlag::S_IFREG {
                return Err(MergedReadError::NotRegular);
            }
            return read_regular(dir.as_fd(), leaf, limit).map(Some);
        }
        return Ok(None);
    }
}

/// Reads regular file `name` of `dir`, at most `limit` bytes; checked again on the
/// open fd, since only the fd is what gets read.
fn read_regular(dir: BorrowedFd<'_>, name: &OsStr, limit: u64) -> Result<Vec<u8>, MergedReadError> {
    use std::io::Read;
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let fd = openat(dir, name, flags, Mode::empty()).map_err(io::Error::from)?;
    let st = nix::sys::stat::fstat(&fd).map_err(io::Error::from)?;
    if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
        return Err(MergedReadError::NotRegular);
    }
    let size = podhost_model::convert::non_negative_u64(st.st_size);
    if size > limit {
        return Err(MergedReadError::TooLarge { limit });
    }
    let mut out = Vec::with_capacity(podhost_model::convert::usize_saturating(size));
    std::fs::File::from(fd)
        .take(limit + 1)
        .read_to_end(&mut out)?;
    if out.len() as u64 > limit {
        return Err(MergedReadError::TooLarge { limit });
    }
    Ok(out)
}

/// Opens (creating what is missing) the directory `comps` of the layer's own
/// snapshot; a directory created here takes the owner and mode of the lower
/// directory it stands for.
fn make_dirs(upper: BorrowedFd<'_>, lowers: &[OwnedFd], comps: &[OsString]) -> io::Result<OwnedFd> {
    let mut fd = upper.try_clone_to_owned()?;
    for (i, name) in comps.iter().enumerate() {
        match mkdirat(
            fd.as_fd(),
            name.as_os_str(),
            Mode::from_bits_truncate(0o755),
        ) {
            Ok(()) => {
                if let Lower::Dir(st) = lower_entry(lowers, &comps[..=i])? {
                    copy_up(fd.as_fd(), name, &st)?;
                }
            }
            Err(Errno::EEXIST) => {}
            Err(e) => return Err(e.into()),
        }
        fd = open_path(Some(fd.as_fd()), name)?;
    }
    Ok(fd)
}

/// Moves every entry of directory `src` into directory `dest`; a directory that
/// is in both is merged, anything else already in `dest` is replaced (the
/// layer's entry wins, as it would have written through the link).
fn merge(src: BorrowedFd<'_>, dest: BorrowedFd<'_>) -> io::Result<()> {
    // Listed through this process's fd of the directory (not by a path).
    let listing = open_readable(src)?;
    let names: Vec<OsString> = std::fs::read_dir(format!("/proc/self/fd/{}", listing.as_raw_fd()))?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<io::Result<_>>()?;
    for name in names {
        match renameat2(
            src,
            name.as_os_str(),
            dest,
            name.as_os_str(),
            RenameFlags::RENAME_NOREPLACE,
        ) {
            Ok(()) => continue,
            Err(Errno::EEXIST) => {}
            Err(e) => return Err(e.into()),
        }
        if is_dir_at(src, &name) && is_dir_at(dest, &name) {
            let (from, to) = (open_dir(src, &name)?, open_dir(dest, &name)?);
            merge(from.as_fd(), to.as_fd())?;
            unlinkat(src, name.as_os_str(), UnlinkatFlags::RemoveDir)?;
            continue;
        }
        if is_dir_at(dest, &name) {
            RootRef::from_fd(dest)
                .remove_all(&name)
                .map_err(|e| io::Error::other(e.to_string()))?;
        } else {
            unlinkat(dest, name.as_os_str(), UnlinkatFlags::NoRemoveDir)?;
        }
        renameat2(
            src,
            name.as_os_str(),
            dest,
            name.as_os_str(),
            RenameFlags::empty(),
        )?;
    }
    Ok(())
}

/// Gives `dir/name` the owner and permission bits of `st`.
fn copy_up(dir: BorrowedFd<'_>, name: &OsStr, st: &FileStat) -> io::Result<()> {
    fchownat(
        dir,
        name,
        Some(Uid::from_raw(st.st_uid)),
        Some(Gid::from_raw(st.st_gid)),
        AtFlags::AT_SYMLINK_NOFOLLOW,
    )?;
    fchmodat(
        dir,
        name,
        Mode::from_bits_truncate(st.st_mode & 0o7777),
        FchmodatFlags::NoFollowSymlink,
    )?;
    Ok(())
}

/// An `O_PATH` fd of directory `name` in `dir` (or of the path `name` itself),
/// never following a symlink in its last component.
fn open_path(dir: Option<BorrowedFd<'_>>, name: &OsStr) -> io::Result<OwnedFd> {
    let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = match dir {
        Some(dir) => openat(dir, name, flags, Mode::empty())?,
        None => nix::fcntl::open(name, flags, Mode::empty())?,
    };
    Ok(fd)
}

fn open_dir(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<OwnedFd> {
    open_path(Some(dir), name)
}

/// A readable fd of the directory an `O_PATH` fd names.
fn open_readable(dir: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    Ok(openat(dir, ".", flags, Mode::empty())?)
}

/// The directory `comps` of `root`, walked without following any symlink.
fn walk_dirs(root: BorrowedFd<'_>, comps: &[OsString]) -> io::Result<OwnedFd> {
    let mut fd = root.try_clone_to_owned()?;
    for name in comps {
        fd = open_path(Some(fd.as_fd()), name)?;
    }
    Ok(fd)
}

fn is_dir_at(dir: BorrowedFd<'_>, name: &OsStr) -> bool {
    fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)
        .is_ok_and(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR)
}

/// Whether the directory behind an `O_PATH` fd is an opaque overlayfs dir.
fn is_opaque(dir: BorrowedFd<'_>) -> bool {
    let path = format!("/proc/self/fd/{}", dir.as_raw_fd());
    matches!(xattr::get(path, OPAQUE_XATTR), Ok(Some(v)) if v == b"y")
}
