//! emptyDir `sizeLimit` on disk: the bytes a volume uses, against its limit, in the
//! words of the kubelet's eviction manager.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use k8s_openapi::api::core::v1::Pod;

/// The kubelet's eviction message for an emptyDir over its sizeLimit (`limit` as the
/// manifest wrote it, e.g. `1Gi`).
pub fn usage_exceeded_message(volume: &str, limit: &str) -> String {
    format!("Usage of EmptyDir volume \"{volume}\" exceeds the limit \"{limit}\".")
}

/// Bytes allocated under `dir` (blocks, as du counts them), not crossing into other
/// filesystems; files that vanish meanwhile are skipped.
pub fn disk_usage(dir: &Path) -> u64 {
    let Ok(root) = std::fs::symlink_metadata(dir) else {
        return 0;
    };
    let dev = root.dev();
    let mut total = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(meta) = e.metadata() else { continue };
            if meta.dev() != dev {
                continue;
            }
            total = total.saturating_add(meta.blocks().saturating_mul(512));
            if meta.is_dir() {
                stack.push(e.path());
            }
        }
    }
    total
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
        let Some(limit) = crate::model::quantity::bytes(&q.0).and_then(|b| u64::try_from(b).ok())
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
