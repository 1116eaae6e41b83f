//! Per-pod volume setup: the emptyDir directories and tmpfs mounts and the content
//! volumes' tmpfs, under `pods/<uid>/volumes/`. Idempotent: a volume already made (a
//! restarted daemon) is kept as it is, its data untouched.

use std::path::Path;

use nix::mount::{MsFlags, mount};

use super::VolumeError;
use super::ownership::apply_fs_group;
use super::plan::{PodVolumePlan, VolumeSource};
use podhost_rooted::RootedDir;

/// Whether the pod's containers may already have touched its volumes: on a restarted
/// daemon adopting a pod whose containers ran, the volumes are theirs to change, and
/// the daemon keeps out of them (no fsGroup walk while a container can swap entries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodVolumesState {
    /// No container of the pod has started yet: volumes are set up whole.
    BeforeContainers,
    /// A container of the pod has started (a restarted daemon adopting it): volumes
    /// that exist are kept as they are.
    ContainersRan,
}

/// Makes every emptyDir and content volume of the pod (hostPath volumes are checked
/// per container start, where a failure is the container's config error). Call it once
/// per pod before its first container starts, and again after a daemon restart.
pub fn setup_pod_volumes(plan: &PodVolumePlan, state: PodVolumesState) -> Result<(), VolumeError> {
    for v in &plan.volumes {
        match &v.source {
            VolumeSource::EmptyDir {
                memory, tmpfs_size, ..
            } => {
                let (_, created) = make_dir(&v.host_path, 0o777)?;
                if *memory {
                    mount_tmpfs(&v.host_path, 0o1777, *tmpfs_size, MsFlags::empty())?;
                }
                // fsGroup once, at set-up (the kubelet's SetUp), before any container
                // of the pod can write the volume; a volume made by an earlier daemon
                // for containers that never ran gets it too.
                if let Some(gid) = plan.fs_group
                    && (created || state == PodVolumesState::BeforeContainers)
                {
                    let root = RootedDir::open(&v.host_path)?;
                    apply_fs_group(&root, gid, plan.fs_group_on_root_mismatch)?;
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

/// The volume dir with exactly `mode` (umask aside), made once, in its kind's dir
/// (podhost's own, made here too); true when it was made now.
fn make_dir(dir: &Path, mode: u32) -> Result<(RootedDir, bool), VolumeError> {
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name().and_then(|n| n.to_str()))
    else {
        return Err(VolumeError::io(
            "create",
            dir,
            std::io::Error::from(std::io::ErrorKind::InvalidInput),
        ));
    };
    // not a container's path: the kind's dir in the pod dir (the volume is made below it)
    std::fs::create_dir_all(parent).map_err(|e| VolumeError::io("create", parent, e))?;
    Ok(RootedDir::open(parent)?.make_dir_created(name, mode)?)
}

/// Whether something is mounted on `dir` (it sits on another device than its parent).
pub(super) fn is_mount_point(dir: &Path) -> Result<bool, VolumeError> {
    let parent = dir.parent().unwrap_or(dir);
    let dev = |p: &Path| -> Result<u64, VolumeError> { Ok(RootedDir::open(p)?.stat()?.st_dev) };
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
