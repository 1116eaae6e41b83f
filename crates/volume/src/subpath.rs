//! subPath, resolved safely: the path is opened beneath the volume's root with
//! openat2(RESOLVE_BENEATH), so a symlink (or `..`) that leaves the volume is refused,
//! and the opened object itself is bind-mounted at `volumes/subpaths/<container>/<n>`
//! through its /proc/self/fd link. The container gets that bind: nothing can swap a
//! symlink in between (the kubelet's fix for CVE-2017-1002101 and CVE-2021-25741).

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sys::stat::{SFlag, fstat};

use super::VolumeError;
use super::mountinfo;
use podhost_rooted::{EntryKind, RootedDir, RootedError};

/// What is being resolved, for error messages.
pub struct SubPathRequest<'a> {
    pub volume: &'a str,
    pub container: &'a str,
    pub volume_path: &'a Path,
    pub sub_path: &'a str,
}

/// Opens `sub_path` beneath the volume's root, making the missing directories (as the
/// kubelet does) without ever leaving the root. Links inside the volume that stay in it
/// are followed, as the kubelet follows them; one that leaves is refused.
pub fn open_beneath(req: &SubPathRequest) -> Result<OwnedFd, VolumeError> {
    let root = RootedDir::open(req.volume_path)?;
    let escapes = || VolumeError::SubPathEscapes {
        volume: req.volume.to_string(),
        container: req.container.to_string(),
        sub_path: req.sub_path.to_string(),
        volume_path: req.volume_path.to_path_buf(),
    };
    let refused = |e: RootedError| {
        if e.is_escape() {
            escapes()
        } else {
            VolumeError::Rooted(e)
        }
    };
    match root.open_following_inner_links(req.sub_path, OFlag::O_PATH) {
        Ok(fd) => return Ok(fd),
        Err(e) if e.errno() == Some(Errno::ENOENT) => {}
        Err(e) => return Err(refused(e)),
    }
    // Missing: made one component at a time, each in a directory opened beneath the root,
    // with the volume root's mode (setgid and sticky bits included), as the kubelet's
    // SafeMakeDir gives them: a subPath of an fsGroup emptyDir is writable by the group.
    let mode = root.stat()?.st_mode & 0o7777;
    let dir = root
        .make_dirs_following_inner_links(req.sub_path, mode)
        .map_err(refused)?;
    Ok(dir.duplicate_fd()?)
}

/// Resolves the subPath and binds it at `mount_point` (an existing bind there is
/// replaced: the subPath is resolved afresh for every container start). Returns the
/// mount point, the source to give the container.
pub fn bind_sub_path(req: &SubPathRequest, mount_point: &Path) -> Result<PathBuf, VolumeError> {
    let fd = open_beneath(req)?;
    let is_dir = fstat(&fd)
        .map(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR)
        .map_err(|e| {
            VolumeError::errno("stat the subPath", &req.volume_path.join(req.sub_path), e)
        })?;
    if mountinfo::mounts_under(mount_point)?.contains(&mount_point.to_path_buf()) {
        umount2(mount_point, MntFlags::empty())
            .map_err(|e| VolumeError::errno("unmount the old subPath bind", mount_point, e))?;
    }
    // The mount point sits in podhost's own `volumes/subpaths/<container>/`; it is made
    // through the rooted layer all the same, of the target's kind.
    let (Some(parent), Some(name)) = (
        mount_point.parent(),
        mount_point.file_name().and_then(|n| n.to_str()),
    ) else {
        return Err(VolumeError::io(
            "create the subPath mount point",
            mount_point,
            std::io::Error::from(std::io::ErrorKind::InvalidInput),
        ));
    };
    // not a container's path: volumes/subpaths/<container>, podhost's own
    std::fs::create_dir_all(parent).map_err(|e| VolumeError::io("create", parent, e))?;
    let points = RootedDir::open(parent)?;
    match points.kind(name)? {
        Some(EntryKind::Dir) if is_dir => {}
        Some(EntryKind::File) if !is_dir => {}
        Some(_) => {
            points.remove_tree(name)?;
            make_mount_point(&points, name, is_dir)?;
        }
        None => make_mount_point(&points, name, is_dir)?,
    }
    let source = format!("/proc/self/fd/{}", fd.as_raw_fd());
    mount(
        Some(source.as_str()),
        mount_point,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(|e| VolumeError::errno("bind the subPath at", mount_point, e))?;
    Ok(mount_point.to_path_buf())
}

/// A mount point of the target's kind: a dir for a dir, a file otherwise.
fn make_mount_point(points: &RootedDir, name: &str, is_dir: bool) -> Result<(), VolumeError> {
    if is_dir {
        points.make_dir(name, 0o755)?;
    } else {
        points.create_file(name, b"", 0o644, None)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(root: &'a Path, sub: &'a str) -> SubPathRequest<'a> {
        SubPathRequest {
            volume: "v",
            container: "c",
            volume_path: root,
            sub_path: sub,
        }
    }

    #[test]
    fn escapes_are_refused_and_missing_dirs_made() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::os::unix::fs::symlink("/etc", root.join("etc-link")).unwrap();
        std::os::unix::fs::symlink("../..", root.join("up")).unwrap();
        std::fs::create_dir(root.join("real")).unwrap();
        std::os::unix::fs::symlink("real", root.join("inside")).unwrap();
        for bad in ["etc-link", "etc-link/passwd", "up", "up/etc"] {
            let e = open_beneath(&req(root, bad)).unwrap_err();
            assert!(
                matches!(e, VolumeError::SubPathEscapes { .. }),
                "{bad}: {e}"
            );
            assert!(e.to_string().contains("resolves outside the volume"));
        }
        assert!(open_beneath(&req(root, "inside")).is_ok());
        open_beneath(&req(root, "new/deeper")).unwrap();
        assert!(root.join("new/deeper").is_dir());
        // A missing name under an escaping link is not made outside either.
        let e = open_beneath(&req(root, "etc-link/podhost-subpath-test")).unwrap_err();
        assert!(matches!(e, VolumeError::SubPathEscapes { .. }), "{e}");
        assert!(!Path::new("/etc/podhost-subpath-test").exists());
    }

    #[test]
    fn missing_dirs_get_the_volume_roots_mode_whatever_the_umask() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // An fsGroup emptyDir on tmpfs: sticky, setgid, 0777.
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o3777)).unwrap();
        std::fs::create_dir(root.join("there")).unwrap();
        std::fs::set_permissions(root.join("there"), std::fs::Permissions::from_mode(0o700))
            .unwrap();
        open_beneath(&req(root, "there/sub/deeper")).unwrap();
        let mode = |p: &str| {
            std::fs::metadata(root.join(p))
                .unwrap()
                .permissions()
                .mode()
                & 0o7777
        };
        assert_eq!(mode("there/sub"), 0o3777);
        assert_eq!(mode("there/sub/deeper"), 0o3777);
        // What existed keeps its mode.
        assert_eq!(mode("there"), 0o700);
    }
}
