//! Filesystem numbers: a filesystem's capacity and free space and inodes (statvfs), and
//! a directory tree's usage in the Summary's shape (the du is `volume::tree_usage`).

use std::path::Path;

use chrono::{DateTime, Utc};

use podhost_model::stats::summary::FsStats;

/// The filesystem holding `path`: capacity, available (to unprivileged users, as df),
/// used, and inodes. `None` when `path` cannot be reached.
pub fn filesystem(path: &Path, time: DateTime<Utc>) -> Option<FsStats> {
    let st = nix::sys::statvfs::statvfs(path).ok()?;
    let frsize = st.fragment_size();
    let blocks = st.blocks();
    let files = st.files();
    Some(FsStats {
        time,
        available_bytes: Some(st.blocks_available().saturating_mul(frsize)),
        capacity_bytes: Some(blocks.saturating_mul(frsize)),
        used_bytes: Some(
            blocks
                .saturating_sub(st.blocks_free())
                .saturating_mul(frsize),
        ),
        inodes_free: Some(st.files_free()),
        inodes: Some(files),
        inodes_used: Some(files.saturating_sub(st.files_free())),
    })
}

pub use podhost_volume::{TreeUsage, tree_usage};

/// A tree's usage in the Summary's shape, with the free space of the filesystem it is
/// on (`fs`), as the kubelet reports a container's rootfs and logs.
pub fn usage_stats(usage: TreeUsage, fs: Option<&FsStats>, time: DateTime<Utc>) -> FsStats {
    FsStats {
        time,
        available_bytes: fs.and_then(|f| f.available_bytes),
        capacity_bytes: fs.and_then(|f| f.capacity_bytes),
        used_bytes: Some(usage.bytes),
        inodes_free: fs.and_then(|f| f.inodes_free),
        inodes: fs.and_then(|f| f.inodes),
        inodes_used: Some(usage.inodes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn du_counts_blocks_and_inodes_of_a_real_tree() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("sub")).unwrap();
        std::fs::write(tmp.path().join("sub/f"), vec![1u8; 64 * 1024]).unwrap();
        std::fs::write(tmp.path().join("g"), b"x").unwrap();
        let u = tree_usage(tmp.path()).unwrap();
        assert_eq!(u.inodes, 4, "root, sub, sub/f, g");
        assert!(u.bytes >= 64 * 1024, "{u:?}");
        assert!(tree_usage(&tmp.path().join("missing")).is_none());
    }

    #[test]
    fn statvfs_of_a_real_filesystem() {
        let tmp = tempfile::tempdir().unwrap();
        let fs = filesystem(tmp.path(), Utc::now()).unwrap();
        let cap = fs.capacity_bytes.unwrap();
        assert!(cap > 0);
        assert!(fs.available_bytes.unwrap() <= cap);
        assert!(fs.used_bytes.unwrap() <= cap);
    }
}
