//! fsGroup on a volume, as the kubelet's `SetVolumeOwnership`: every file and dir
//! group-owned by fsGroup, group rw (and x on dirs), setgid on dirs so new files
//! inherit the group. `OnRootMismatch` skips the walk when the root already fits.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use super::VolumeError;

const GROUP_RW: u32 = 0o060;
const GROUP_X: u32 = 0o010;
const SETGID: u32 = 0o2000;

/// The mode bits a file (or dir) must have for fsGroup.
fn wanted_bits(is_dir: bool) -> u32 {
    if is_dir {
        GROUP_RW | GROUP_X | SETGID
    } else {
        GROUP_RW
    }
}

/// Whether the volume's root already has the group and the bits (the kubelet's
/// `requiresPermissionChange` is its negation).
fn root_fits(root: &Path, gid: u32) -> Result<bool, VolumeError> {
    let meta = std::fs::metadata(root).map_err(|e| VolumeError::io("stat", root, e))?;
    let want = wanted_bits(true);
    Ok(meta.gid() == gid && meta.mode() & want == want)
}

/// Applies fsGroup `gid` to `root` and, unless `on_root_mismatch` finds it done, to
/// everything below it on the same filesystem. Symlinks are re-owned, never followed.
pub fn apply_fs_group(root: &Path, gid: u32, on_root_mismatch: bool) -> Result<(), VolumeError> {
    if on_root_mismatch && root_fits(root, gid)? {
        return Ok(());
    }
    let dev = std::fs::symlink_metadata(root)
        .map_err(|e| VolumeError::io("stat", root, e))?
        .dev();
    let mut stack = vec![root.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta =
            std::fs::symlink_metadata(&path).map_err(|e| VolumeError::io("stat", &path, e))?;
        std::os::unix::fs::lchown(&path, None, Some(gid))
            .map_err(|e| VolumeError::io("set the fsGroup of", &path, e))?;
        if meta.file_type().is_symlink() {
            continue;
        }
        let mode = meta.mode() | wanted_bits(meta.is_dir());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & 0o7777))
            .map_err(|e| VolumeError::io("set the fsGroup mode of", &path, e))?;
        // Not into another filesystem mounted inside (it is not the volume's).
        if meta.is_dir() && meta.dev() == dev {
            for entry in std::fs::read_dir(&path).map_err(|e| VolumeError::io("list", &path, e))? {
                let entry = entry.map_err(|e| VolumeError::io("list", &path, e))?;
                stack.push(entry.path());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_bits_and_setgid_down_the_tree() {
        // Group 0 is one every test process may chown to (as root or as its member).
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/f"), b"x").unwrap();
        std::fs::set_permissions(dir.path().join("sub/f"), PermissionsExt::from_mode(0o600))
            .unwrap();
        apply_fs_group(dir.path(), nix::unistd::getegid().as_raw(), false).unwrap();
        let mode = |p: &str| std::fs::metadata(dir.path().join(p)).unwrap().mode() & 0o7777;
        assert_eq!(mode("sub/f"), 0o660);
        assert_eq!(mode("sub") & 0o2070, 0o2070);
        assert!(root_fits(dir.path(), nix::unistd::getegid().as_raw()).unwrap());
    }
}
