//! fsGroup on a volume, as the kubelet's `SetVolumeOwnership`: every file and dir
//! group-owned by fsGroup, group rw (and x on dirs), setgid on dirs so new files
//! inherit the group. `OnRootMismatch` skips the walk when the root already fits.
//!
//! It runs once, when the volume is set up before any container of the pod runs (as
//! the kubelet's `SetUp`), never while a container can change the tree; and even then
//! through the rooted layer, on fds: a symlink is re-owned itself, never followed, and
//! an entry that vanishes or changes type under the walk is skipped.

use podhost_rooted::{GroupBits, RootedDir, WalkCount, set_group_tree};

use super::VolumeError;

const GROUP_RW: u32 = 0o060;
const GROUP_X: u32 = 0o010;
const SETGID: u32 = 0o2000;

/// The bits fsGroup adds to dirs and to everything else.
const FS_GROUP_BITS: GroupBits = GroupBits {
    dir: GROUP_RW | GROUP_X | SETGID,
    file: GROUP_RW,
};

/// Whether the volume's root already has the group and the bits (the kubelet's
/// `requiresPermissionChange` is its negation).
fn root_fits(root: &RootedDir, gid: u32) -> Result<bool, VolumeError> {
    let st = root.stat()?;
    let want = FS_GROUP_BITS.dir;
    Ok(st.st_gid == gid && st.st_mode & want == want)
}

/// Applies fsGroup `gid` to the volume `root` and, unless `on_root_mismatch` finds it
/// done, to everything below it on the same filesystem.
pub fn apply_fs_group(
    root: &RootedDir,
    gid: u32,
    on_root_mismatch: bool,
) -> Result<WalkCount, VolumeError> {
    if on_root_mismatch && root_fits(root, gid)? {
        return Ok(WalkCount::default());
    }
    Ok(set_group_tree(root, gid, FS_GROUP_BITS)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    #[test]
    fn group_bits_and_setgid_down_the_tree() {
        // Group 0 is one every test process may chown to (as root or as its member).
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/f"), b"x").unwrap();
        std::fs::set_permissions(dir.path().join("sub/f"), PermissionsExt::from_mode(0o600))
            .unwrap();
        let root = RootedDir::open(dir.path()).unwrap();
        let gid = nix::unistd::getegid().as_raw();
        let count = apply_fs_group(&root, gid, false).unwrap();
        assert_eq!(count.changed, 3);
        let mode = |p: &str| std::fs::metadata(dir.path().join(p)).unwrap().mode() & 0o7777;
        assert_eq!(mode("sub/f"), 0o660);
        assert_eq!(mode("sub") & 0o2070, 0o2070);
        assert!(root_fits(&root, gid).unwrap());
        // OnRootMismatch: the root fits, nothing is walked.
        assert_eq!(
            apply_fs_group(&root, gid, true).unwrap(),
            WalkCount::default()
        );
    }
}
