//! The root filesystem of a container in a pod's user namespace: the image's
//! snapshots seen with owners shifted into the pod's block, and an upper dir owned
//! by the pod's root. Idmapped lower layers where the kernel has them, else the
//! chowned copies of [`super::chown_copy`]; which one is decided per mount by trying
//! (the shim logs it).

use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, umount2};

use super::{IdMap, UsernsError, chown_copy, idmap};

/// How the snapshots were made the pod's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootfsPath {
    /// Idmapped bind mounts of the shared snapshots, overlaid.
    Idmapped,
    /// Chowned copies of the snapshots, cached per block; `copied` of them were made now.
    ChownedCopy { copied: usize },
}

/// What the shim needs to mount a user-namespaced rootfs.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct UsernsRootfs {
    pub map: IdMap,
    /// The pod's pinned user namespace, `<pod>/ns/user`.
    pub userns_path: PathBuf,
    /// podhost's root dir (the chowned copies live under it).
    pub root_dir: PathBuf,
}

/// Mounts `lower_dirs` (top-most first) and `<dir>/upper` at `rootfs` for the pod's
/// user namespace.
pub fn mount_rootfs(
    ns: &UsernsRootfs,
    lower_dirs: &[PathBuf],
    dir: &Path,
    rootfs: &Path,
) -> Result<RootfsPath, UsernsError> {
    let upper = dir.join("upper");
    let work = dir.join("work");
    for d in [&upper, &work, &rootfs.to_path_buf()] {
        std::fs::create_dir_all(d).map_err(|e| UsernsError::io("create directory", d, e))?;
    }
    // The container's / is the upper dir's inode: the pod's root owns it.
    let root = ns.map.host_id(0);
    std::os::unix::fs::chown(&upper, Some(root), Some(root))
        .map_err(|e| UsernsError::io("chown", &upper, e))?;
    std::fs::set_permissions(&upper, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| UsernsError::io("chmod", &upper, e))?;
    match mount_idmapped(ns, lower_dirs, &upper, &work, dir, rootfs) {
        Ok(()) => return Ok(RootfsPath::Idmapped),
        Err(e) => tracing::info!(
            error = %e,
            "idmapped snapshots unavailable here; using chowned copies"
        ),
    }
    let mut copied = 0;
    let mut copies = Vec::new();
    for lower in lower_dirs {
        let (copy, made) = chown_copy::ensure_copy(&ns.root_dir, ns.map, lower)?;
        copied += usize::from(made);
        copies.push(copy);
    }
    mount_overlay(&copies, &upper, &work, rootfs)?;
    Ok(RootfsPath::ChownedCopy { copied })
}

fn mount_idmapped(
    ns: &UsernsRootfs,
    lower_dirs: &[PathBuf],
    upper: &Path,
    work: &Path,
    dir: &Path,
    rootfs: &Path,
) -> Result<(), UsernsError> {
    let userns: OwnedFd = std::fs::File::open(&ns.userns_path)
        .map_err(|e| UsernsError::io("open", &ns.userns_path, e))?
        .into();
    let staging = dir.join("idmapped");
    let mut mounted = Vec::new();
    let result = (|| {
        for (i, lower) in lower_dirs.iter().enumerate() {
            let target = staging.join(i.to_string());
            std::fs::create_dir_all(&target)
                .map_err(|e| UsernsError::io("create directory", &target, e))?;
            idmap::bind_idmapped(lower, &target, &userns)?;
            mounted.push(target);
        }
        mount_overlay(&mounted, upper, work, rootfs)
    })();
    // The overlay holds its own references to its layers: the staging mounts go
    // either way.
    for target in &mounted {
        let _ = umount2(target, MntFlags::MNT_DETACH);
    }
    let _ = std::fs::remove_dir_all(&staging);
    result
}

fn mount_overlay(
    lowers: &[PathBuf],
    upper: &Path,
    work: &Path,
    rootfs: &Path,
) -> Result<(), UsernsError> {
    crate::runtime::overlay::mount_overlay(lowers, upper, work, rootfs)
        .map_err(|e| UsernsError::sys(format!("mount overlay at {}", rootfs.display()), e))
}
