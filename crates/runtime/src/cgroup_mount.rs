//! Whether a cgroup hierarchy is mounted where libcgroups looks for it.
//!
//! `ip netns exec` (and any tool that mounts a fresh sysfs over /sys) leaves
//! /sys/fs/cgroup an empty directory: every container would then fail with libcgroups'
//! "failed to detect cgroup setup". The daemon checks once at start and refuses with the
//! reason instead.

use std::path::{Path, PathBuf};

use nix::sys::statfs::{CGROUP_SUPER_MAGIC, CGROUP2_SUPER_MAGIC, statfs};

/// The standard place of the cgroup hierarchies.
pub const CGROUP_MOUNT_POINT: &str = "/sys/fs/cgroup";

/// No cgroup hierarchy where libcgroups looks for one.
#[derive(Debug, thiserror::Error)]
pub enum CgroupMountError {
    /// The directory is there, but holds neither cgroup2 nor any v1 controller.
    #[error(
        "no cgroup hierarchy is mounted at {path} (it is {found}): containers cannot be \
         created. Under `ip netns exec` or another tool that mounts a fresh /sys this is \
         expected; start podhost outside it (each pod gets its own network namespace \
         anyway), or mount the hierarchy first (`mount -t cgroup2 cgroup2 {path}`)"
    )]
    NotMounted { path: PathBuf, found: String },
    /// The directory cannot be examined at all.
    #[error("cannot examine {path}, where the cgroup hierarchy is mounted: {source}")]
    Unreadable {
        path: PathBuf,
        #[source]
        source: nix::Error,
    },
}

/// Checks that `dir` is a cgroup2 mount, or holds at least one mounted v1 controller.
pub fn require_cgroup_mount(dir: &Path) -> Result<(), CgroupMountError> {
    let unreadable = |source| CgroupMountError::Unreadable {
        path: dir.to_path_buf(),
        source,
    };
    let top = statfs(dir).map_err(unreadable)?;
    if top.filesystem_type() == CGROUP2_SUPER_MAGIC {
        return Ok(());
    }
    // A v1 (or hybrid) host: a tmpfs with one mount per controller below it.
    let v1_controller_mounted = std::fs::read_dir(dir)
        .map(|entries| {
            entries.flatten().any(|e| {
                statfs(&e.path()).is_ok_and(|s| {
                    s.filesystem_type() == CGROUP_SUPER_MAGIC
                        || s.filesystem_type() == CGROUP2_SUPER_MAGIC
                })
            })
        })
        .unwrap_or(false);
    if v1_controller_mounted {
        return Ok(());
    }
    Err(CgroupMountError::NotMounted {
        path: dir.to_path_buf(),
        found: describe_fs(&top),
    })
}

/// The filesystem type's name, for the error.
fn describe_fs(st: &nix::sys::statfs::Statfs) -> String {
    use nix::sys::statfs::{SYSFS_MAGIC, TMPFS_MAGIC};
    match st.filesystem_type() {
        SYSFS_MAGIC => "a directory of sysfs, with nothing mounted on it".to_string(),
        TMPFS_MAGIC => "a tmpfs with no cgroup controller mounted in it".to_string(),
        other => format!("a filesystem of type {:#x}, not cgroup", other.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_directory_is_not_a_cgroup_mount_and_the_error_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let err = require_cgroup_mount(dir.path()).unwrap_err();
        let text = err.to_string();
        assert!(text.contains(&dir.path().display().to_string()), "{text}");
        assert!(text.contains("ip netns exec"), "{text}");
    }

    #[test]
    fn a_missing_directory_is_an_error_too() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("cgroup");
        assert!(matches!(
            require_cgroup_mount(&gone),
            Err(CgroupMountError::Unreadable { .. })
        ));
    }

    #[test]
    fn the_hosts_hierarchy_is_accepted() {
        // Every machine that runs these tests runs containers, so it has one.
        require_cgroup_mount(Path::new(CGROUP_MOUNT_POINT)).unwrap();
    }
}
