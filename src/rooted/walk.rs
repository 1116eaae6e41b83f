//! Walks of a tree below a [`RootedDir`] handle: removing it, and setting a group on it
//! (fsGroup). Each entry is opened `O_PATH | O_NOFOLLOW` beneath its parent's handle and
//! looked at through that fd, so what is changed is what was looked at: a container
//! that swaps an entry for a symlink between two calls gets its symlink changed (or the
//! call refused), never the symlink's target. An entry that vanishes meanwhile is
//! skipped; another filesystem mounted inside is not entered.

use std::os::fd::AsFd;

use nix::errno::Errno;
use nix::sys::stat::Mode;

use super::RootedError;
use super::dir::{EntryKind, RootedDir};

/// Removes the entry `name` of `parent` and, for a directory, everything below it.
pub(super) fn remove_tree(parent: &RootedDir, name: &str) -> Result<(), RootedError> {
    let kernel = parent.kernel();
    let st = match kernel.lstatat(parent.fd(), name) {
        Ok(st) => st,
        Err(Errno::ENOENT) => return Ok(()),
        Err(e) => return Err(RootedError::at("inspect", &parent.path().join(name), e)),
    };
    if EntryKind::of(&st) == EntryKind::Dir {
        let dir = match parent.open_dir(name) {
            Ok(dir) => dir,
            // Swapped for something else since the stat: unlinked below as it is now.
            Err(e) if e.is_escape() || e.errno() == Some(Errno::ENOTDIR) => {
                return remove_entry(parent, name);
            }
            Err(e) if e.errno() == Some(Errno::ENOENT) => return Ok(()),
            Err(e) => return Err(e),
        };
        let same_fs = dir.stat()?.st_dev == parent.stat()?.st_dev;
        if same_fs {
            for child in dir.entries()? {
                let Some(child) = child.to_str() else {
                    // Not UTF-8: removed through its bytes would need another API; such
                    // names never come from podhost, so say so.
                    return Err(RootedError::BadName {
                        path: dir.path().to_path_buf(),
                        name: child.to_string_lossy().into_owned(),
                    });
                };
                remove_tree(&dir, child)?;
            }
        }
    }
    remove_entry(parent, name)
}

/// unlinkat of `name` as what it is now (a directory or not).
fn remove_entry(parent: &RootedDir, name: &str) -> Result<(), RootedError> {
    let kernel = parent.kernel();
    let shown = || parent.path().join(name);
    match kernel.unlinkat(parent.fd(), name, false) {
        Ok(()) | Err(Errno::ENOENT) => Ok(()),
        Err(Errno::EISDIR) => match kernel.unlinkat(parent.fd(), name, true) {
            Ok(()) | Err(Errno::ENOENT) => Ok(()),
            Err(e) => Err(RootedError::at("remove", &shown(), e)),
        },
        Err(e) => Err(RootedError::at("remove", &shown(), e)),
    }
}

/// What a group walk adds to each entry's mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupBits {
    pub dir: u32,
    pub file: u32,
}

/// What a group walk did: entries changed and entries skipped because they vanished or
/// changed type under it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalkCount {
    pub changed: u64,
    pub skipped: u64,
}

/// Gives `root` and everything below it on the same filesystem the group `gid` and the
/// mode bits `bits` (symlinks: the group only, on the link itself).
pub fn set_group_tree(
    root: &RootedDir,
    gid: u32,
    bits: GroupBits,
) -> Result<WalkCount, RootedError> {
    let mut count = WalkCount::default();
    let dev = root.stat()?.st_dev;
    set_group_on(root, root.fd(), gid, bits, EntryKind::Dir, "", &mut count)?;
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        let names = match dir.entries() {
            Ok(names) => names,
            Err(e) if e.errno() == Some(Errno::ENOENT) => {
                count.skipped += 1;
                continue;
            }
            Err(e) => return Err(e),
        };
        for name in names {
            let Some(name) = name.to_str() else {
                count.skipped += 1;
                continue;
            };
            let fd = match dir.open_entry(name) {
                Ok(fd) => fd,
                Err(e) if e.errno() == Some(Errno::ENOENT) || e.is_escape() => {
                    count.skipped += 1;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let st = dir
                .kernel()
                .fstat(fd.as_fd())
                .map_err(|e| RootedError::at("inspect", &dir.path().join(name), e))?;
            let kind = EntryKind::of(&st);
            set_group_on(&dir, fd.as_fd(), gid, bits, kind, name, &mut count)?;
            if kind == EntryKind::Dir && st.st_dev == dev {
                match dir.open_dir(name) {
                    // The same inode as the one just changed: descend. Another one (a
                    // swap since) is left for what it is.
                    Ok(sub) if sub.stat()?.st_ino == st.st_ino => stack.push(sub),
                    Ok(_) => count.skipped += 1,
                    Err(e) if e.errno() == Some(Errno::ENOENT) || e.is_escape() => {
                        count.skipped += 1
                    }
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Ok(count)
}

fn set_group_on(
    dir: &RootedDir,
    fd: std::os::fd::BorrowedFd<'_>,
    gid: u32,
    bits: GroupBits,
    kind: EntryKind,
    name: &str,
    count: &mut WalkCount,
) -> Result<(), RootedError> {
    let kernel = dir.kernel();
    let shown = || {
        if name.is_empty() {
            dir.path().to_path_buf()
        } else {
            dir.path().join(name)
        }
    };
    kernel
        .fchown(fd, None, Some(gid))
        .map_err(|e| RootedError::at("set the group of", &shown(), e))?;
    if kind != EntryKind::Symlink {
        // After the chown, which clears a file's setgid bit.
        let st = kernel
            .fstat(fd)
            .map_err(|e| RootedError::at("inspect", &shown(), e))?;
        let add = if kind == EntryKind::Dir {
            bits.dir
        } else {
            bits.file
        };
        let mode = (st.st_mode & 0o7777) | add;
        kernel
            .fchmod(fd, Mode::from_bits_truncate(mode))
            .map_err(|e| RootedError::at("set the mode of", &shown(), e))?;
    }
    count.changed += 1;
    Ok(())
}
