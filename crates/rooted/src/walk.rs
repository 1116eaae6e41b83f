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
/// Iterative (a frame per level on the heap, not on the thread's stack): a container
/// that nests directories 100 000 deep gets an error from the fd limit, never a crash.
pub(super) fn remove_tree(parent: &RootedDir, name: &str) -> Result<(), RootedError> {
    /// A directory being emptied: its handle, where it sits, what is left in it.
    struct Frame {
        dir: RootedDir,
        parent: RootedDir,
        name: String,
        pending: Vec<String>,
    }
    let Some(first) = open_for_removal(parent, name)? else {
        return Ok(());
    };
    let mut stack = vec![Frame {
        pending: names_of(&first, parent)?,
        dir: first,
        parent: parent.clone(),
        name: name.to_string(),
    }];
    while let Some(top) = stack.last_mut() {
        match top.pending.pop() {
            Some(child) => {
                if let Some(sub) = open_for_removal(&top.dir, &child)? {
                    let pending = names_of(&sub, &top.dir)?;
                    let parent = top.dir.clone();
                    stack.push(Frame {
                        dir: sub,
                        parent,
                        name: child,
                        pending,
                    });
                }
            }
            None => {
                let done = stack
                    .pop()
                    .unwrap_or_else(|| unreachable!("the loop saw a top"));
                remove_entry(&done.parent, &done.name)?;
            }
        }
    }
    Ok(())
}

/// The directory `name` of `parent` to empty, or `None` when it was removed here
/// already (not a directory: unlinked as it is; or gone).
fn open_for_removal(parent: &RootedDir, name: &str) -> Result<Option<RootedDir>, RootedError> {
    let kernel = parent.kernel();
    let st = match kernel.lstatat(parent.fd(), name) {
        Ok(st) => st,
        Err(Errno::ENOENT) => return Ok(None),
        Err(e) => return Err(RootedError::at("inspect", &parent.path().join(name), e)),
    };
    if EntryKind::of(&st) != EntryKind::Dir {
        remove_entry(parent, name)?;
        return Ok(None);
    }
    match parent.open_dir(name) {
        Ok(dir) => Ok(Some(dir)),
        // Swapped for something else since the stat: unlinked as it is now.
        Err(e) if e.is_escape() || e.errno() == Some(Errno::ENOTDIR) => {
            remove_entry(parent, name)?;
            Ok(None)
        }
        Err(e) if e.errno() == Some(Errno::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The names in `dir`, or none when it is another filesystem mounted there (not
/// entered; removing its mount point then fails, busy).
fn names_of(dir: &RootedDir, parent: &RootedDir) -> Result<Vec<String>, RootedError> {
    if dir.stat()?.st_dev != parent.stat()?.st_dev {
        return Ok(Vec::new());
    }
    dir.entries()?
        .into_iter()
        .map(|child| {
            child.into_string().map_err(|child| RootedError::BadName {
                path: dir.path().to_path_buf(),
                name: child.to_string_lossy().into_owned(),
            })
        })
        .collect()
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

/// `rel/name`, or `name` at the root (`rel` empty): a walk's pending dir.
pub fn join_rel(rel: &str, name: &str) -> String {
    if rel.is_empty() {
        name.to_string()
    } else {
        format!("{rel}/{name}")
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
    // Pending dirs as paths relative to the root, each opened (confined) when its turn
    // comes: holding a handle per pending dir would let a wide tree exhaust the fds.
    let mut stack = vec![String::new()];
    while let Some(rel) = stack.pop() {
        // "" opens the root itself ("." beneath its handle).
        let dir = match root.open_dir(&rel) {
            Ok(dir) => dir,
            Err(e) if e.errno() == Some(Errno::ENOENT) || e.is_escape() => {
                count.skipped += 1;
                continue;
            }
            Err(e) => return Err(e),
        };
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
            // Into directories of the same filesystem only; one swapped for something
            // else before its turn is refused then (open_dir never follows a link).
            if kind == EntryKind::Dir && st.st_dev == dev {
                stack.push(join_rel(&rel, name));
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
