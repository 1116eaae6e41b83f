//! Idmapped bind mounts (open_tree + mount_setattr(MOUNT_ATTR_IDMAP) + move_mount):
//! a snapshot seen through the pod's user namespace, so that its root-owned files
//! belong to the pod's mapped root, without copying or chowning anything.
//!
//! The kernel needs idmapped mounts for the snapshots' filesystem (ext4/xfs/btrfs
//! since 5.12, tmpfs only since 6.3) and overlayfs on idmapped layers (5.19). Whether
//! both work is found out by trying, not from the kernel version: see
//! [`super::rootfs`].

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use super::UsernsError;

// The new mount API's numbers are the same on every architecture (syscalls ≥ 424).
const SYS_OPEN_TREE: libc::c_long = 428;
const SYS_MOVE_MOUNT: libc::c_long = 429;
const SYS_MOUNT_SETATTR: libc::c_long = 442;
const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 4;
const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;

/// The kernel's `struct mount_attr` (MOUNT_ATTR_SIZE_VER0).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

fn c_path(path: &Path) -> Result<CString, UsernsError> {
    CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| UsernsError::sys(format!("{}", path.display()), nix::Error::EINVAL))
}

/// Mounts a copy of the mount at `source`, idmapped through the user namespace
/// `userns`, on the existing directory `target`. The idmapped mount is private to
/// the calling mount namespace; an overlay built on it keeps its own reference, so
/// `target` may be unmounted as soon as the overlay is mounted.
pub fn bind_idmapped(source: &Path, target: &Path, userns: &OwnedFd) -> Result<(), UsernsError> {
    let src = c_path(source)?;
    let dst = c_path(target)?;
    // SAFETY: open_tree reads the NUL-terminated path and returns a new fd or -1;
    // the fd is owned right away.
    let tree = unsafe {
        libc::syscall(
            SYS_OPEN_TREE,
            libc::AT_FDCWD,
            src.as_ptr(),
            (OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint) as libc::c_uint,
        )
    };
    if tree < 0 {
        return Err(UsernsError::sys(
            format!("open_tree {}", source.display()),
            nix::Error::last(),
        ));
    }
    // A syscall's fd is an int; the kernel never returns a wider one.
    let tree = i32::try_from(tree).map_err(|_| {
        UsernsError::sys(
            format!("open_tree {}", source.display()),
            nix::Error::ERANGE,
        )
    })?;
    // SAFETY: `tree` is a fresh fd that nothing else owns.
    let tree = unsafe { OwnedFd::from_raw_fd(tree) };
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_IDMAP,
        attr_clr: 0,
        propagation: 0,
        // An open fd is never negative.
        userns_fd: u64::try_from(userns.as_raw_fd())
            .map_err(|_| UsernsError::sys("the user namespace's fd", nix::Error::EBADF))?,
    };
    // SAFETY: mount_setattr reads `attr` (size passed) and the empty path; both live
    // across the call.
    let rc = unsafe {
        libc::syscall(
            SYS_MOUNT_SETATTR,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc < 0 {
        return Err(UsernsError::sys(
            format!("idmap the mount of {}", source.display()),
            nix::Error::last(),
        ));
    }
    // SAFETY: move_mount reads the empty path and the NUL-terminated target path.
    let rc = unsafe {
        libc::syscall(
            SYS_MOVE_MOUNT,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            dst.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    if rc < 0 {
        return Err(UsernsError::sys(
            format!(
                "attach the idmapped {} at {}",
                source.display(),
                target.display()
            ),
            nix::Error::last(),
        ));
    }
    Ok(())
}
