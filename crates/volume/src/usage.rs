//! emptyDir `sizeLimit` on disk: the bytes a volume uses, against its limit, in the
//! words of the kubelet's eviction manager.

use std::path::Path;

use k8s_openapi::api::core::v1::Pod;

use podhost_rooted::{EntryKind, RootedDir, join_rel};

/// The kubelet's eviction message for an emptyDir over its sizeLimit (`limit` as the
/// manifest wrote it, e.g. `1Gi`).
pub fn usage_exceeded_message(volume: &str, limit: &str) -> String {
    format!("Usage of EmptyDir volume \"{volume}\" exceeds the limit \"{limit}\".")
}

/// What a tree uses: bytes allocated and inodes (the root directory included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TreeUsage {
    pub bytes: u64,
    pub inodes: u64,
}

impl std::ops::Add for TreeUsage {
    type Output = Self;
    fn add(self, o: Self) -> Self {
        Self {
            bytes: self.bytes.saturating_add(o.bytes),
            inodes: self.inodes.saturating_add(o.inodes),
        }
    }
}

/// du of `dir`: allocated blocks (as du counts them) and inodes, not crossing into
/// other filesystems (a mounted overlay rootfs is not counted twice); a hard link
/// counts each time it is met, as the kubelet's own walk counts it. `None` when `dir`
/// does not exist; files vanishing meanwhile are skipped. The one du of emptyDir
/// limits, the statistics and the eviction manager.
pub fn tree_usage(dir: &Path) -> Option<TreeUsage> {
    // Through handles: a directory a container swaps for a link to `/` is not walked.
    let root = RootedDir::open(dir).ok()?;
    let st = root.stat().ok()?;
    let dev = st.st_dev;
    let blocks = |st: &nix::sys::stat::FileStat| u64::try_from(st.st_blocks).unwrap_or(0);
    let mut usage = TreeUsage {
        bytes: blocks(&st).saturating_mul(512),
        inodes: 1,
    };
    // Pending dirs as paths relative to the root, not open handles: a container that
    // makes 100 000 sibling dirs must not run the daemon out of fds (and so out of the
    // count). Each is opened from the root's handle, confined, when its turn comes.
    let mut stack = vec![String::new()];
    while let Some(rel) = stack.pop() {
        // "" opens the root itself ("." beneath its handle).
        let Ok(dir) = root.open_dir(&rel) else {
            continue;
        };
        let Ok(names) = dir.entries() else {
            continue;
        };
        for name in names {
            let Some(name) = name.to_str() else { continue };
            let Ok(Some(st)) = dir.lstat(name) else {
                continue;
            };
            if st.st_dev != dev {
                continue;
            }
            usage.bytes = usage.bytes.saturating_add(blocks(&st).saturating_mul(512));
            usage.inodes += 1;
            if EntryKind::of(&st) == EntryKind::Dir {
                stack.push(join_rel(&rel, name));
            }
        }
    }
    Some(usage)
}

/// Bytes allocated under `dir` (see [`tree_usage`]); 0 when it does not exist.
pub fn disk_usage(dir: &Path) -> u64 {
    tree_usage(dir).map_or(0, |u| u.bytes)
}

/// The first disk emptyDir of `pod` whose usage exceeds its sizeLimit, as the eviction
/// message; `volumes_dir` is `Layout::pod_volumes_dir(uid)`. Memory emptyDirs are left
/// out: their tmpfs `size=` enforces the limit. Call it periodically; evict on `Some`.
pub fn empty_dir_usage_exceeded(pod: &Pod, volumes_dir: &Path) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    for v in spec.volumes.iter().flatten() {
        let Some(e) = &v.empty_dir else { continue };
        if e.medium.as_deref() == Some("Memory") {
            continue;
        }
        let Some(q) = &e.size_limit else { continue };
        let Some(limit) = podhost_model::quantity::bytes(&q.0).and_then(|b| u64::try_from(b).ok())
        else {
            continue;
        };
        let dir = volumes_dir.join(super::plan::EMPTY_DIR_KIND).join(&v.name);
        if disk_usage(&dir) > limit {
            return Some(usage_exceeded_message(&v.name, &q.0));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_the_limit_names_volume_and_limit() {
        let dir = tempfile::tempdir().unwrap();
        let vol = dir.path().join("empty-dir/scratch");
        std::fs::create_dir_all(&vol).unwrap();
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c"}], "volumes": [
                {"name": "scratch", "emptyDir": {"sizeLimit": "64Ki"}}
            ]}
        }))
        .unwrap();
        assert_eq!(empty_dir_usage_exceeded(&pod, dir.path()), None);
        std::fs::create_dir(vol.join("sub")).unwrap();
        std::fs::write(vol.join("sub/big"), vec![1u8; 128 * 1024]).unwrap();
        assert_eq!(
            empty_dir_usage_exceeded(&pod, dir.path()).as_deref(),
            Some("Usage of EmptyDir volume \"scratch\" exceeds the limit \"64Ki\".")
        );
        assert!(disk_usage(&vol) >= 128 * 1024);
    }
}
