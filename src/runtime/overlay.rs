//! The container's root filesystem: an overlay of the image's snapshots and a private upper dir.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags, mount, umount2};

use super::RuntimeError;

/// Mounts `lower_dirs` (top-most first) + `<dir>/upper` at `rootfs`.
pub fn mount_rootfs(lower_dirs: &[PathBuf], dir: &Path, rootfs: &Path) -> Result<(), RuntimeError> {
    let upper = dir.join("upper");
    let work = dir.join("work");
    for d in [&upper, &work, &rootfs.to_path_buf()] {
        std::fs::create_dir_all(d).map_err(|e| RuntimeError::io("create directory", d, e))?;
    }
    if lower_dirs.is_empty() {
        return Err(RuntimeError::Spec {
            container: dir.display().to_string(),
            message: "the image has no layers".into(),
        });
    }
    mount_overlay(lower_dirs, &upper, &work, rootfs)
        .map_err(|e| RuntimeError::sys(format!("mount overlay at {}", rootfs.display()), e))
}

/// Mounts an overlay of `lowers` (top-most first) with `upper` and `work` at `rootfs`.
///
/// mount(2) copies at most one page of options: with podhost's snapshot paths
/// (about 100 bytes each) an image of more than ~35 layers would be cut short and
/// fail with ENOENT. Then each lower dir is opened and named by its short
/// `/proc/self/fd/N` link instead, which the kernel resolves at mount time (up to
/// ~230 layers in a page; overlayfs allows 500).
pub fn mount_overlay(
    lowers: &[PathBuf],
    upper: &Path,
    work: &Path,
    rootfs: &Path,
) -> nix::Result<()> {
    let options = |lower: &[String]| {
        format!(
            "lowerdir={},upperdir={},workdir={}",
            lower.join(":"),
            upper.display(),
            work.display()
        )
    };
    let mut options_text = options(
        &lowers
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>(),
    );
    // Held open until the mount is done.
    let mut opened = Vec::new();
    if options_text.len() >= MOUNT_OPTIONS_MAX {
        let mut short = Vec::with_capacity(lowers.len());
        for dir in lowers {
            let fd = nix::fcntl::open(
                dir.as_path(),
                nix::fcntl::OFlag::O_PATH
                    | nix::fcntl::OFlag::O_DIRECTORY
                    | nix::fcntl::OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::empty(),
            )?;
            short.push(format!("/proc/self/fd/{}", fd.as_raw_fd()));
            opened.push(fd);
        }
        options_text = options(&short);
        if options_text.len() >= MOUNT_OPTIONS_MAX {
            return Err(nix::Error::E2BIG);
        }
    }
    let result = mount(
        Some("overlay"),
        rootfs,
        Some("overlay"),
        MsFlags::empty(),
        Some(options_text.as_str()),
    );
    drop(opened);
    result
}

/// The mount options mount(2) reads: one page, with its terminating NUL.
const MOUNT_OPTIONS_MAX: usize = 4096;

/// Unmounts the rootfs; a rootfs that is not mounted is fine.
pub fn unmount_rootfs(rootfs: &Path) -> Result<(), RuntimeError> {
    match umount2(rootfs, MntFlags::MNT_DETACH) {
        Ok(()) | Err(nix::Error::EINVAL) | Err(nix::Error::ENOENT) => Ok(()),
        Err(e) => Err(RuntimeError::sys(
            format!("unmount {}", rootfs.display()),
            e,
        )),
    }
}
