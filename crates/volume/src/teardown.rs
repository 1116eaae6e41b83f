//! Releasing a pod's volumes: every mount under `pods/<uid>/volumes` is unmounted
//! (latest first; a busy one is retried, never lazily detached), then the dir is removed
//! without following a symlink or crossing into another filesystem. A hostPath is only
//! ever unmounted (its subPath binds): nothing inside one is deleted.

use std::path::Path;
use std::time::Duration;

use nix::errno::Errno;
use nix::mount::{MntFlags, umount2};

use super::VolumeError;
use super::mountinfo;
use podhost_disk::Layout;
use podhost_rooted::RootedDir;

/// Unmount attempts for a busy mount, 100 ms apart.
const UNMOUNT_TRIES: u32 = 20;

/// Unmounts and removes the pod's volumes dir. On error the dir is kept (with whatever
/// is still mounted) and the caller must not delete the pod dir: a later call (the next
/// daemon's) retries.
pub fn teardown_pod_volumes(layout: &Layout, uid: &str) -> Result<(), VolumeError> {
    let dir = layout.pod_volumes_dir(uid);
    // not a container's path: the pod's volumes dir itself (what is below it is removed on handles)
    if std::fs::symlink_metadata(&dir).is_err() {
        return Ok(());
    }
    // not a container's path: as above
    let dir = std::fs::canonicalize(&dir).map_err(|e| VolumeError::io("resolve", &dir, e))?;
    for point in mountinfo::mounts_under(&dir)? {
        unmount_retrying(&point)?;
    }
    // Re-read: something mounted meanwhile must not be deleted through.
    if let Some(point) = mountinfo::mounts_under(&dir)?.into_iter().next() {
        return Err(VolumeError::StillMounted {
            path: point,
            tries: UNMOUNT_TRIES,
        });
    }
    // Through handles: what a container left in an emptyDir (links to host paths
    // among it) is removed, never followed; another filesystem is not entered, and the
    // directory it is mounted on fails the removal (busy).
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name().and_then(|n| n.to_str()))
    else {
        return Ok(());
    };
    RootedDir::open(parent)?.remove_tree(name)?;
    Ok(())
}

fn unmount_retrying(point: &Path) -> Result<(), VolumeError> {
    for attempt in 1..=UNMOUNT_TRIES {
        match umount2(point, MntFlags::UMOUNT_NOFOLLOW) {
            Ok(()) | Err(Errno::EINVAL | Errno::ENOENT) => return Ok(()),
            Err(Errno::EBUSY) => {
                tracing::warn!(mount = %point.display(), attempt, "volume mount busy; retrying");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(VolumeError::errno("unmount", point, e)),
        }
    }
    Err(VolumeError::StillMounted {
        path: point.to_path_buf(),
        tries: UNMOUNT_TRIES,
    })
}

/// At daemon start: releases the volumes of pod dirs that no pod owns any more (no
/// `status.json`: the daemon was killed after forgetting the pod, before its dir was
/// gone). Pods the daemon still knows release theirs when they finish.
pub fn sweep_orphan_volumes(layout: &Layout) {
    // not a container's path: the daemon's pods dir
    let Ok(pods) = std::fs::read_dir(layout.pods_dir()) else {
        return;
    };
    for pod in pods.flatten() {
        let Some(uid) = pod.file_name().to_str().map(str::to_string) else {
            continue;
        };
        // not a container's path: the pod dir's own records
        if layout.pod_dir(&uid).join("status.json").exists() {
            continue;
        }
        // not a container's path: as above
        if !layout.pod_volumes_dir(&uid).exists() {
            continue;
        }
        match teardown_pod_volumes(layout, &uid) {
            Ok(()) => tracing::info!(uid, "released the volumes of a pod that is gone"),
            Err(e) => {
                tracing::warn!(uid, error = %e, "cannot release the volumes of a pod that is gone")
            }
        }
    }
}
