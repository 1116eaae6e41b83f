//! The root filesystem of a container in a pod's user namespace: the image's
//! snapshots seen with owners shifted into the pod's block, and an upper dir owned
//! by the pod's root. Idmapped lower layers where the kernel has them, else the
//! chowned copies of [`super::chown_copy`]; which one is decided per mount by trying
//! (the shim logs it).

use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use nix::mount::MntFlags;

use super::{IdMap, UsernsError, chown_copy};
use crate::sys::{Kernel, LinuxKernel};

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
    mount_rootfs_with(&LinuxKernel, ns, lower_dirs, dir, rootfs)
}

/// [`mount_rootfs`] through `kernel`.
pub fn mount_rootfs_with(
    kernel: &dyn Kernel,
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
    match mount_idmapped(kernel, ns, lower_dirs, &upper, &work, dir, rootfs) {
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
    mount_overlay(kernel, &copies, &upper, &work, rootfs)?;
    Ok(RootfsPath::ChownedCopy { copied })
}

/// Idmapped bind mounts of the snapshots under `<dir>/idmapped/<i>`, overlaid; the
/// staging mounts are released whether the overlay was mounted or not.
fn mount_idmapped(
    kernel: &dyn Kernel,
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
            kernel.bind_idmapped(lower, &target, &userns)?;
            mounted.push(target);
        }
        mount_overlay(kernel, &mounted, upper, work, rootfs)
    })();
    // The overlay holds its own references to its layers: the staging mounts go
    // either way.
    for target in &mounted {
        let _ = kernel.umount2(target, MntFlags::MNT_DETACH);
    }
    let _ = std::fs::remove_dir_all(&staging);
    result
}

fn mount_overlay(
    kernel: &dyn Kernel,
    lowers: &[PathBuf],
    upper: &Path,
    work: &Path,
    rootfs: &Path,
) -> Result<(), UsernsError> {
    crate::overlay::mount_overlay_with(kernel, lowers, upper, work, rootfs)
        .map_err(|e| UsernsError::sys(format!("mount overlay at {}", rootfs.display()), e))
}

#[cfg(test)]
mod tests {
    use nix::errno::Errno;
    use nix::mount::MsFlags;

    use super::*;
    use crate::sys::recording::{Call, RecordingKernel};

    struct Bundle {
        tmp: tempfile::TempDir,
        ns: UsernsRootfs,
        lowers: Vec<PathBuf>,
    }

    impl Bundle {
        fn new(layers: usize) -> Self {
            let tmp = tempfile::tempdir().unwrap();
            // Any file stands in for the pinned user namespace: only the fake uses it.
            let userns_path = tmp.path().join("user");
            std::fs::write(&userns_path, "").unwrap();
            let ns = UsernsRootfs {
                map: IdMap { base: 65536 },
                userns_path,
                root_dir: tmp.path().to_path_buf(),
            };
            let lowers = (0..layers)
                .map(|i| PathBuf::from(format!("/snapshots/{i}")))
                .collect();
            Self { tmp, ns, lowers }
        }

        fn dir(&self) -> &Path {
            self.tmp.path()
        }

        fn staging(&self, i: usize) -> PathBuf {
            self.dir().join("idmapped").join(i.to_string())
        }

        fn mount(&self, k: &RecordingKernel) -> Result<(), UsernsError> {
            let d = self.dir();
            mount_idmapped(
                k,
                &self.ns,
                &self.lowers,
                &d.join("upper"),
                &d.join("work"),
                d,
                &d.join("rootfs"),
            )
        }

        fn unmount(&self, i: usize) -> Call {
            Call::Umount {
                target: self.staging(i),
                flags: MntFlags::MNT_DETACH,
            }
        }
    }

    #[test]
    fn snapshots_are_idmapped_in_order_overlaid_then_their_staging_mounts_released() {
        let b = Bundle::new(3);
        let k = RecordingKernel::new();
        b.mount(&k).unwrap();
        let mut expected: Vec<Call> = (0..3)
            .map(|i| Call::BindIdmapped {
                source: b.lowers[i].clone(),
                target: b.staging(i),
            })
            .collect();
        expected.push(Call::Mount {
            source: Some(PathBuf::from("overlay")),
            target: b.dir().join("rootfs"),
            fstype: Some("overlay".into()),
            flags: MsFlags::empty(),
            data: Some(format!(
                "lowerdir={}:{}:{},upperdir={}/upper,workdir={}/work",
                b.staging(0).display(),
                b.staging(1).display(),
                b.staging(2).display(),
                b.dir().display(),
                b.dir().display()
            )),
        });
        expected.extend((0..3).map(|i| b.unmount(i)));
        assert_eq!(k.effects(), expected);
        assert_eq!(k.mounted(), vec![b.dir().join("rootfs")]);
        assert!(!b.dir().join("idmapped").exists());
    }

    #[test]
    fn when_the_second_snapshot_cannot_be_idmapped_the_first_is_unmounted() {
        let b = Bundle::new(3);
        let k = RecordingKernel::new();
        k.fail_nth(2, Errno::EINVAL, |c| matches!(c, Call::BindIdmapped { .. }));
        let err = b.mount(&k).unwrap_err().to_string();
        assert!(err.contains("idmap the mount of /snapshots/1"), "{err}");
        assert_eq!(k.effects().last(), Some(&b.unmount(0)));
        assert!(!k.effects().iter().any(|c| matches!(c, Call::Mount { .. })));
        assert!(k.mounted().is_empty(), "{:?}", k.mounted());
        assert!(!b.dir().join("idmapped").exists());
    }

    #[test]
    fn an_overlay_refused_on_idmapped_layers_releases_every_staging_mount() {
        let b = Bundle::new(2);
        let k = RecordingKernel::new();
        // Kernels before 5.19: overlayfs does not take idmapped layers.
        k.fail(Errno::EINVAL, |c| matches!(c, Call::Mount { .. }));
        let err = b.mount(&k).unwrap_err().to_string();
        assert!(err.contains("mount overlay at"), "{err}");
        let effects = k.effects();
        assert_eq!(effects[effects.len() - 2..], [b.unmount(0), b.unmount(1)]);
        assert!(k.mounted().is_empty());
    }

    #[test]
    fn a_missing_user_namespace_handle_stops_before_any_mount() {
        let b = Bundle::new(1);
        std::fs::remove_file(&b.ns.userns_path).unwrap();
        let k = RecordingKernel::new();
        let err = b.mount(&k).unwrap_err().to_string();
        assert!(
            err.contains(&b.ns.userns_path.display().to_string()),
            "{err}"
        );
        assert!(k.calls().is_empty());
    }
}
