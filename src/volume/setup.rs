//! Per-pod volume setup: the emptyDir directories and tmpfs mounts and the content
//! volumes' tmpfs, under `pods/<uid>/volumes/`. Idempotent: a volume already made (a
//! restarted daemon) is kept as it is, its data untouched.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use nix::mount::{MsFlags, mount};

use super::VolumeError;
use super::ownership::apply_fs_group;
use super::plan::{PodVolumePlan, VolumeSource};

/// Makes every emptyDir and content volume of the pod (hostPath volumes are checked
/// per container start, where a failure is the container's config error). Call it once
/// per pod before its first container starts, and again after a daemon restart.
pub fn setup_pod_volumes(plan: &PodVolumePlan) -> Result<(), VolumeError> {
    for v in &plan.volumes {
        match &v.source {
            VolumeSource::EmptyDir {
                memory, tmpfs_size, ..
            } => {
                make_dir(&v.host_path, 0o777)?;
                if *memory {
                    mount_tmpfs(&v.host_path, 0o1777, *tmpfs_size, MsFlags::empty())?;
                }
                if let Some(gid) = plan.fs_group {
                    apply_fs_group(&v.host_path, gid, plan.fs_group_on_root_mismatch)?;
                }
            }
            VolumeSource::Content { tmpfs_size, .. } => {
                make_dir(&v.host_path, 0o755)?;
                // Secrets never reach a disk: every content volume is a tmpfs.
                // Its files are written by `content` before a container that mounts it
                // starts, and kept fresh while the pod runs (the worker drives both).
                mount_tmpfs(&v.host_path, 0o755, *tmpfs_size, MsFlags::MS_NOEXEC)?;
            }
            VolumeSource::HostPath { .. } | VolumeSource::Unsupported { .. } => {}
        }
    }
    Ok(())
}

/// The directory with exactly `mode` (umask aside), made once.
fn make_dir(dir: &Path, mode: u32) -> Result<(), VolumeError> {
    if !dir.is_dir() {
        std::fs::create_dir_all(dir).map_err(|e| VolumeError::io("create", dir, e))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode))
            .map_err(|e| VolumeError::io("set the mode of", dir, e))?;
    }
    Ok(())
}

/// Whether something is mounted on `dir` (it sits on another device than its parent).
pub(super) fn is_mount_point(dir: &Path) -> Result<bool, VolumeError> {
    let parent = dir.parent().unwrap_or(dir);
    let dev = |p: &Path| {
        std::fs::symlink_metadata(p)
            .map(|m| m.dev())
            .map_err(|e| VolumeError::io("stat", p, e))
    };
    Ok(dev(dir)? != dev(parent)?)
}

/// A tmpfs on `dir` (nosuid, nodev and `extra`), unless one is there already.
fn mount_tmpfs(
    dir: &Path,
    mode: u32,
    size: Option<u64>,
    extra: MsFlags,
) -> Result<(), VolumeError> {
    if is_mount_point(dir)? {
        return Ok(());
    }
    let mut data = format!("mode={mode:o}");
    if let Some(size) = size {
        data.push_str(&format!(",size={size}"));
    }
    mount(
        Some("tmpfs"),
        dir,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | extra,
        Some(data.as_str()),
    )
    .map_err(|e| VolumeError::errno("mount a tmpfs on", dir, e))
}
