//! The container's root filesystem: an overlay of the image's snapshots and a private upper dir.

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
pub fn mount_overlay(
    lowers: &[PathBuf],
    upper: &Path,
    work: &Path,
    rootfs: &Path,
) -> nix::Result<()> {
    let lower: Vec<String> = lowers.iter().map(|p| p.display().to_string()).collect();
    let options = format!(
        "lowerdir={},upperdir={},workdir={}",
        lower.join(":"),
        upper.display(),
        work.display()
    );
    mount(
        Some("overlay"),
        rootfs,
        Some("overlay"),
        MsFlags::empty(),
        Some(options.as_str()),
    )
}

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
