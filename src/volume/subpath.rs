//! subPath, resolved safely: the path is opened beneath the volume's root with
//! openat2(RESOLVE_BENEATH), so a symlink (or `..`) that leaves the volume is refused,
//! and the opened object itself is bind-mounted at `volumes/subpaths/<container>/<n>`
//! through its /proc/self/fd link. The container gets that bind: nothing can swap a
//! symlink in between (the kubelet's fix for CVE-2017-1002101 and CVE-2021-25741).

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, open, openat2};
use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sys::stat::{Mode, SFlag, fstat, mkdirat};

use super::VolumeError;
use super::mountinfo;

/// What is being resolved, for error messages.
pub struct SubPathRequest<'a> {
    pub volume: &'a str,
    pub container: &'a str,
    pub volume_path: &'a Path,
    pub sub_path: &'a str,
}

fn beneath(dir: &OwnedFd, path: &str, extra: OFlag) -> Result<OwnedFd, Errno> {
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC | extra)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    openat2(dir, path, how)
}

/// Opens `sub_path` beneath the volume's root, making the missing directories (as the
/// kubelet does) without ever leaving the root.
pub fn open_beneath(req: &SubPathRequest) -> Result<OwnedFd, VolumeError> {
    let root = open(
        req.volume_path,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| VolumeError::errno("open the volume", req.volume_path, e))?;
    let escapes = || VolumeError::SubPathEscapes {
        volume: req.volume.to_string(),
        container: req.container.to_string(),
        sub_path: req.sub_path.to_string(),
        volume_path: req.volume_path.to_path_buf(),
    };
    let target = req.volume_path.join(req.sub_path);
    match beneath(&root, req.sub_path, OFlag::empty()) {
        Ok(fd) => return Ok(fd),
        Err(Errno::EXDEV | Errno::ELOOP) => return Err(escapes()),
        Err(Errno::ENOENT) => {}
        Err(e) => return Err(VolumeError::errno("open the subPath", &target, e)),
    }
    // Missing: made one component at a time, each in a directory opened beneath the root.
    let mut dir = root;
    for part in Path::new(req.sub_path).iter() {
        let name = part.to_str().unwrap_or_default();
        match mkdirat(&dir, part, Mode::from_bits_truncate(0o755)) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(e) => return Err(VolumeError::errno("create the subPath", &target, e)),
        }
        dir = match beneath(&dir, name, OFlag::O_DIRECTORY) {
            Ok(fd) => fd,
            Err(Errno::EXDEV | Errno::ELOOP) => return Err(escapes()),
            Err(e) => return Err(VolumeError::errno("open the subPath", &target, e)),
        };
    }
    Ok(dir)
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
    if let Some(parent) = mount_point.parent() {
        std::fs::create_dir_all(parent).map_err(|e| VolumeError::io("create", parent, e))?;
    }
    // The mount point must be of the target's kind: a dir for a dir, a file otherwise.
    let _ = std::fs::remove_dir(mount_point);
    let _ = std::fs::remove_file(mount_point);
    if is_dir {
        std::fs::create_dir(mount_point)
    } else {
        std::fs::File::create(mount_point).map(drop)
    }
    .map_err(|e| VolumeError::io("create the subPath mount point", mount_point, e))?;
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
}
