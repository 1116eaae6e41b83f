//! The fallback where idmapped mounts are missing: a copy of a snapshot with every
//! owner shifted into the pod's block, cached per mapping at
//! `<root-dir>/snapshots-idmapped/<base>/<snapshot>` and shared by every pod that
//! holds that block. Built under a temp name and renamed into place, so concurrent
//! shims never see half a copy; the loser of a race drops its own.

use std::collections::HashMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt, lchown};
use std::path::{Path, PathBuf};

use super::range::BLOCK_SIZE;
use super::{IdMap, UsernsError};

/// Where the copies live, under the root dir.
pub const COPIES_DIR: &str = "snapshots-idmapped";

/// The copy of `snapshot` for `map` (which may not exist yet).
pub fn copy_path(root_dir: &Path, map: IdMap, snapshot: &Path) -> PathBuf {
    let name = snapshot
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    root_dir
        .join(COPIES_DIR)
        .join(map.base.to_string())
        .join(name)
}

/// The host ID a file owned by `id` gets: its mapped ID, or the mapped overflow ID
/// (65534, "nobody") for IDs the pod cannot see.
fn shifted(map: IdMap, id: u32) -> u32 {
    if id < BLOCK_SIZE {
        map.host_id(id)
    } else {
        map.host_id(65534)
    }
}

/// The copy of `snapshot` for `map`, made now if it is not cached; returns its path
/// and whether it was made by this call.
pub fn ensure_copy(
    root_dir: &Path,
    map: IdMap,
    snapshot: &Path,
) -> Result<(PathBuf, bool), UsernsError> {
    let dest = copy_path(root_dir, map, snapshot);
    if dest.is_dir() {
        return Ok((dest, false));
    }
    let parent = dest.parent().unwrap_or(root_dir);
    std::fs::create_dir_all(parent).map_err(|e| UsernsError::io("create directory", parent, e))?;
    let tmp = parent.join(format!(
        ".{}.tmp.{}",
        dest.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&tmp);
    let mut links = HashMap::new();
    if let Err(e) = copy_tree(snapshot, &tmp, map, &mut links) {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    if let Ok(d) = std::fs::File::open(&tmp) {
        let _ = d.sync_all();
    }
    match std::fs::rename(&tmp, &dest) {
        Ok(()) => Ok((dest, true)),
        // Another shim finished first: its copy is as good as ours.
        Err(_) if dest.is_dir() => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok((dest, false))
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Err(UsernsError::io("rename into", &dest, e))
        }
    }
}

/// Copies `src` to the new path `dst` (never following a symlink), shifting owners;
/// hard links stay hard links (`links`: source inode → first copy).
fn copy_tree(
    src: &Path,
    dst: &Path,
    map: IdMap,
    links: &mut HashMap<(u64, u64), PathBuf>,
) -> Result<(), UsernsError> {
    let meta = std::fs::symlink_metadata(src).map_err(|e| UsernsError::io("stat", src, e))?;
    let ft = meta.file_type();
    if ft.is_dir() {
        std::fs::create_dir(dst).map_err(|e| UsernsError::io("create directory", dst, e))?;
        let entries = std::fs::read_dir(src).map_err(|e| UsernsError::io("read", src, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| UsernsError::io("read", src, e))?;
            copy_tree(&entry.path(), &dst.join(entry.file_name()), map, links)?;
        }
    } else if ft.is_symlink() {
        let target = std::fs::read_link(src).map_err(|e| UsernsError::io("read link", src, e))?;
        std::os::unix::fs::symlink(&target, dst)
            .map_err(|e| UsernsError::io("create symlink", dst, e))?;
    } else if meta.nlink() > 1
        && let Some(first) = links.get(&(meta.dev(), meta.ino()))
    {
        std::fs::hard_link(first, dst).map_err(|e| UsernsError::io("link", dst, e))?;
        return Ok(());
    } else if ft.is_file() {
        // copy_file_range underneath: a reflink where the filesystem has them.
        std::fs::copy(src, dst).map_err(|e| UsernsError::io("copy", src, e))?;
        if meta.nlink() > 1 {
            links.insert((meta.dev(), meta.ino()), dst.to_path_buf());
        }
    } else {
        // Device nodes (the overlay whiteouts, 0:0), fifos, sockets.
        let kind = nix::sys::stat::SFlag::from_bits_truncate(meta.mode() & libc::S_IFMT);
        let perm = nix::sys::stat::Mode::from_bits_truncate(meta.mode() & 0o7777);
        nix::sys::stat::mknod(dst, kind, perm, meta.rdev())
            .map_err(|e| UsernsError::sys(format!("mknod {}", dst.display()), e))?;
    }
    lchown(
        dst,
        Some(shifted(map, meta.uid())),
        Some(shifted(map, meta.gid())),
    )
    .map_err(|e| UsernsError::io("chown", dst, e))?;
    copy_xattrs(src, dst)?;
    if !ft.is_symlink() {
        // After the chown, which clears setuid/setgid bits.
        std::fs::set_permissions(dst, std::fs::Permissions::from_mode(meta.mode() & 0o7777))
            .map_err(|e| UsernsError::io("chmod", dst, e))?;
    }
    let times = [
        nix::sys::time::TimeSpec::new(meta.atime(), meta.atime_nsec()),
        nix::sys::time::TimeSpec::new(meta.mtime(), meta.mtime_nsec()),
    ];
    let _ = nix::sys::stat::utimensat(
        nix::fcntl::AT_FDCWD,
        dst,
        &times[0],
        &times[1],
        nix::sys::stat::UtimensatFlags::NoFollowSymlink,
    );
    Ok(())
}

/// The overlay's and the image's own xattrs. File capabilities are left out: a
/// copied v2 `security.capability` would name the host's root, which the pod's
/// namespace cannot see, so the kernel would ignore it anyway.
fn copy_xattrs(src: &Path, dst: &Path) -> Result<(), UsernsError> {
    let Ok(names) = xattr::list(src) else {
        return Ok(()); // a filesystem without xattrs
    };
    for name in names {
        if name == "security.capability" {
            continue;
        }
        if let Ok(Some(value)) = xattr::get(src, &name) {
            xattr::set(dst, &name, &value).map_err(|e| UsernsError::io("set xattr on", dst, e))?;
        }
    }
    Ok(())
}

/// Removes the copies of a block no pod holds any more, and copies of snapshots
/// that image GC removed; returns how many directories went.
pub fn prune(root_dir: &Path, held: &[IdMap], snapshots_dir: &Path) -> usize {
    let mut removed = 0;
    let Ok(blocks) = std::fs::read_dir(root_dir.join(COPIES_DIR)) else {
        return 0;
    };
    for block in blocks.flatten() {
        let name = block.file_name().to_string_lossy().into_owned();
        let is_held = name
            .parse::<u32>()
            .map(|base| held.iter().any(|m| m.base == base))
            .unwrap_or(false);
        if !is_held {
            if std::fs::remove_dir_all(block.path()).is_ok() {
                removed += 1;
            }
            continue;
        }
        let Ok(copies) = std::fs::read_dir(block.path()) else {
            continue;
        };
        for copy in copies.flatten() {
            let name = copy.file_name().to_string_lossy().into_owned();
            let stale = match name.strip_prefix('.') {
                // A copy in the making: stale once the shim making it is gone.
                Some(tmp) => tmp
                    .rsplit_once(".tmp.")
                    .is_none_or(|(_, pid)| !Path::new("/proc").join(pid).exists()),
                None => !snapshots_dir.join(&name).is_dir(),
            };
            if stale && std::fs::remove_dir_all(copy.path()).is_ok() {
                removed += 1;
            }
        }
    }
    removed
}
