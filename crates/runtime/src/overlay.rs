//! The container's root filesystem: an overlay of the image's snapshots and a private upper dir.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags};

use super::RuntimeError;
use super::sys::{Kernel, LinuxKernel};

/// Mounts `lower_dirs` (top-most first) + `<dir>/upper` at `rootfs`.
pub fn mount_rootfs(lower_dirs: &[PathBuf], dir: &Path, rootfs: &Path) -> Result<(), RuntimeError> {
    mount_rootfs_with(&LinuxKernel, lower_dirs, dir, rootfs)
}

/// [`mount_rootfs`] through `kernel`.
pub fn mount_rootfs_with(
    kernel: &dyn Kernel,
    lower_dirs: &[PathBuf],
    dir: &Path,
    rootfs: &Path,
) -> Result<(), RuntimeError> {
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
    mount_overlay_with(kernel, lower_dirs, &upper, &work, rootfs)
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
    mount_overlay_with(&LinuxKernel, lowers, upper, work, rootfs)
}

/// [`mount_overlay`] through `kernel`.
pub fn mount_overlay_with(
    kernel: &dyn Kernel,
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
            let fd = kernel.open_dir_path(dir)?;
            short.push(format!("/proc/self/fd/{}", fd.as_raw_fd()));
            opened.push(fd);
        }
        options_text = options(&short);
        if options_text.len() >= MOUNT_OPTIONS_MAX {
            return Err(nix::Error::E2BIG);
        }
    }
    let result = kernel.mount(
        Some(Path::new("overlay")),
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
    unmount_rootfs_with(&LinuxKernel, rootfs)
}

/// [`unmount_rootfs`] through `kernel`.
pub fn unmount_rootfs_with(kernel: &dyn Kernel, rootfs: &Path) -> Result<(), RuntimeError> {
    match kernel.umount2(rootfs, MntFlags::MNT_DETACH) {
        Ok(()) | Err(nix::Error::EINVAL) | Err(nix::Error::ENOENT) => Ok(()),
        Err(e) => Err(RuntimeError::sys(
            format!("unmount {}", rootfs.display()),
            e,
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use nix::errno::Errno;

    use super::*;
    use crate::sys::recording::{Call, RecordingKernel};

    /// A path length at which 35 layers fit in one page of options and 36 do not
    /// (podhost's snapshot paths are about this long).
    const SNAPSHOT_PATH_LEN: usize = 113;

    /// Snapshot-like lower dirs whose paths are `len` bytes long.
    fn lowers(count: usize, len: usize) -> Vec<PathBuf> {
        (0..count)
            .map(|i| {
                let head = format!("/var/lib/podhost/snapshots/{i:04}/");
                PathBuf::from(format!("{head}{}", "f".repeat(len - head.len())))
            })
            .collect()
    }

    /// The one mount made: (source, target, fstype, flags, data).
    fn only_mount(
        kernel: &RecordingKernel,
    ) -> (Option<PathBuf>, PathBuf, Option<String>, MsFlags, String) {
        let mounts: Vec<Call> = kernel
            .calls()
            .into_iter()
            .filter(|c| matches!(c, Call::Mount { .. }))
            .collect();
        assert_eq!(mounts.len(), 1, "{mounts:?}");
        let Call::Mount {
            source,
            target,
            fstype,
            flags,
            data,
        } = mounts[0].clone()
        else {
            unreachable!()
        };
        (source, target, fstype, flags, data.unwrap_or_default())
    }

    fn up() -> (PathBuf, PathBuf, PathBuf) {
        (
            PathBuf::from("/b/upper"),
            PathBuf::from("/b/work"),
            PathBuf::from("/b/rootfs"),
        )
    }

    #[test]
    fn one_layer_is_lowerdir_upperdir_workdir() {
        let k = RecordingKernel::new();
        let (upper, work, rootfs) = up();
        mount_overlay_with(&k, &[PathBuf::from("/s/l0")], &upper, &work, &rootfs).unwrap();
        let (source, target, fstype, flags, data) = only_mount(&k);
        assert_eq!(source.as_deref(), Some(Path::new("overlay")));
        assert_eq!(target, rootfs);
        assert_eq!(fstype.as_deref(), Some("overlay"));
        assert_eq!(flags, MsFlags::empty());
        assert_eq!(data, "lowerdir=/s/l0,upperdir=/b/upper,workdir=/b/work");
        assert_eq!(k.mounted(), vec![rootfs]);
    }

    #[test]
    fn lower_dirs_keep_their_order_top_layer_first() {
        let k = RecordingKernel::new();
        let (upper, work, rootfs) = up();
        let l = [PathBuf::from("/s/top"), PathBuf::from("/s/base")];
        mount_overlay_with(&k, &l, &upper, &work, &rootfs).unwrap();
        assert_eq!(
            only_mount(&k).4,
            "lowerdir=/s/top:/s/base,upperdir=/b/upper,workdir=/b/work"
        );
        assert!(k.opened().is_empty(), "short options need no fds");
    }

    #[test]
    fn thirty_five_snapshot_layers_are_named_by_their_paths() {
        let k = RecordingKernel::new();
        let (upper, work, rootfs) = up();
        let l = lowers(35, SNAPSHOT_PATH_LEN);
        mount_overlay_with(&k, &l, &upper, &work, &rootfs).unwrap();
        let data = only_mount(&k).4;
        let expected: Vec<String> = l.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(
            data,
            format!(
                "lowerdir={},upperdir=/b/upper,workdir=/b/work",
                expected.join(":")
            )
        );
        assert!(k.opened().is_empty());
    }

    #[test]
    fn thirty_six_snapshot_layers_go_through_proc_self_fd_in_order() {
        let k = RecordingKernel::new();
        let (upper, work, rootfs) = up();
        let l = lowers(36, SNAPSHOT_PATH_LEN);
        mount_overlay_with(&k, &l, &upper, &work, &rootfs).unwrap();
        let opened = k.opened();
        // Every lower opened once, in layer order.
        assert_eq!(opened.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>(), l);
        let fds: Vec<String> = opened
            .iter()
            .map(|(_, fd)| format!("/proc/self/fd/{fd}"))
            .collect();
        assert_eq!(
            only_mount(&k).4,
            format!(
                "lowerdir={},upperdir=/b/upper,workdir=/b/work",
                fds.join(":")
            )
        );
    }

    #[test]
    fn the_switch_to_fds_is_at_exactly_one_page_of_options() {
        let (upper, work, rootfs) = up();
        let fixed = "lowerdir=,upperdir=/b/upper,workdir=/b/work".len();
        // One layer whose options are 4095 bytes fit (the NUL makes 4096)...
        let fits = RecordingKernel::new();
        let l = lowers(1, MOUNT_OPTIONS_MAX - 1 - fixed);
        mount_overlay_with(&fits, &l, &upper, &work, &rootfs).unwrap();
        assert_eq!(only_mount(&fits).4.len(), MOUNT_OPTIONS_MAX - 1);
        assert!(fits.opened().is_empty());
        // ...one byte more does not.
        let over = RecordingKernel::new();
        let l = lowers(1, MOUNT_OPTIONS_MAX - fixed);
        mount_overlay_with(&over, &l, &upper, &work, &rootfs).unwrap();
        assert_eq!(over.opened().len(), 1);
        assert!(only_mount(&over).4.starts_with("lowerdir=/proc/self/fd/"));
    }

    #[test]
    fn the_lower_fds_are_open_while_the_mount_reads_them() {
        let k = RecordingKernel::new();
        let (upper, work, rootfs) = up();
        let all_open = Arc::new(AtomicBool::new(false));
        let seen = all_open.clone();
        // Never fails the mount: only looks at the fds while mount(2) runs.
        k.fail(Errno::EPERM, move |c| {
            if let Call::Mount { data: Some(d), .. } = c {
                let lower = d.split(',').next().unwrap_or_default();
                let ok = lower
                    .trim_start_matches("lowerdir=")
                    .split(':')
                    .all(|link| std::fs::read_link(link).is_ok_and(|t| t == Path::new("/")));
                seen.store(ok, Ordering::SeqCst);
            }
            false
        });
        mount_overlay_with(&k, &lowers(40, 120), &upper, &work, &rootfs).unwrap();
        assert!(all_open.load(Ordering::SeqCst));
    }

    #[test]
    fn more_layers_than_even_fd_links_fit_is_e2big_without_a_mount() {
        let k = RecordingKernel::new();
        let (upper, work, rootfs) = up();
        let err = mount_overlay_with(&k, &lowers(400, 100), &upper, &work, &rootfs).unwrap_err();
        assert_eq!(err, Errno::E2BIG);
        assert!(!k.calls().iter().any(|c| matches!(c, Call::Mount { .. })));
        assert!(k.mounted().is_empty());
    }

    #[test]
    fn a_lower_that_cannot_be_opened_stops_before_mounting() {
        let k = RecordingKernel::new();
        let (upper, work, rootfs) = up();
        k.fail_nth(3, Errno::ENOENT, |c| matches!(c, Call::OpenDirPath(_)));
        let err = mount_overlay_with(&k, &lowers(40, 120), &upper, &work, &rootfs).unwrap_err();
        assert_eq!(err, Errno::ENOENT);
        let opens = k
            .calls()
            .iter()
            .filter(|c| matches!(c, Call::OpenDirPath(_)))
            .count();
        assert_eq!(opens, 3, "stops at the failing layer");
        assert!(k.mounted().is_empty());
    }

    #[test]
    fn rootfs_makes_upper_work_and_mountpoint_under_the_bundle() {
        let tmp = tempfile::tempdir().unwrap();
        let k = RecordingKernel::new();
        let rootfs = tmp.path().join("rootfs");
        mount_rootfs_with(&k, &[PathBuf::from("/s/l0")], tmp.path(), &rootfs).unwrap();
        for d in ["upper", "work", "rootfs"] {
            assert!(tmp.path().join(d).is_dir(), "{d}");
        }
        let data = only_mount(&k).4;
        assert_eq!(
            data,
            format!(
                "lowerdir=/s/l0,upperdir={},workdir={}",
                tmp.path().join("upper").display(),
                tmp.path().join("work").display()
            )
        );
    }

    #[test]
    fn an_image_without_layers_is_refused_before_any_mount() {
        let tmp = tempfile::tempdir().unwrap();
        let k = RecordingKernel::new();
        let err = mount_rootfs_with(&k, &[], tmp.path(), &tmp.path().join("rootfs")).unwrap_err();
        assert!(err.to_string().contains("the image has no layers"), "{err}");
        assert!(k.calls().is_empty());
    }

    #[test]
    fn a_failed_overlay_mount_names_the_rootfs_and_keeps_the_errno() {
        let tmp = tempfile::tempdir().unwrap();
        let k = RecordingKernel::new();
        k.fail(Errno::EINVAL, |c| matches!(c, Call::Mount { .. }));
        let rootfs = tmp.path().join("rootfs");
        let err =
            mount_rootfs_with(&k, &[PathBuf::from("/s/l0")], tmp.path(), &rootfs).unwrap_err();
        match err {
            RuntimeError::Sys { what, source } => {
                assert_eq!(what, format!("mount overlay at {}", rootfs.display()));
                assert_eq!(source, Errno::EINVAL);
            }
            other => panic!("{other}"),
        }
        assert!(k.mounted().is_empty());
    }

    #[test]
    fn unmounting_detaches_and_tolerates_a_rootfs_that_is_not_mounted() {
        let k = RecordingKernel::new();
        let rootfs = Path::new("/b/rootfs");
        // Not mounted: the kernel says EINVAL, which is fine.
        unmount_rootfs_with(&k, rootfs).unwrap();
        k.fail(Errno::ENOENT, |_| true);
        unmount_rootfs_with(&k, rootfs).unwrap();
        assert!(k.calls().iter().all(|c| *c
            == Call::Umount {
                target: rootfs.to_path_buf(),
                flags: MntFlags::MNT_DETACH
            }));
    }

    #[test]
    fn an_unmount_refused_for_another_reason_is_an_error() {
        let k = RecordingKernel::new();
        k.fail(Errno::EPERM, |c| matches!(c, Call::Umount { .. }));
        let err = unmount_rootfs_with(&k, Path::new("/b/rootfs")).unwrap_err();
        assert!(err.to_string().contains("unmount /b/rootfs"), "{err}");
    }
}
