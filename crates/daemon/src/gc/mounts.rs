//! Mount points under a directory (from /proc/self/mountinfo), so that nothing is
//! deleted through a mount: a container's overlay rootfs, the pod's namespace handles.

use std::io;
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, umount2};

use super::GcError;

/// Decodes mountinfo's octal escapes (`\040` space, `\011` tab, `\012` newline,
/// `\134` backslash).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 4 <= b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = u32::from(b[i + 1] - b'0') * 64
                + u32::from(b[i + 2] - b'0') * 8
                + u32::from(b[i + 3] - b'0');
            // \400..\777 are not bytes: kept as written.
            match u8::try_from(v) {
                Ok(byte) => out.push(byte),
                Err(_) => out.extend_from_slice(&b[i..i + 4]),
            }
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Mount points listed in `mountinfo` at or below `dir`, deepest first.
fn mounts_under_in(mountinfo: &str, dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|mp| PathBuf::from(unescape(mp)))
        .filter(|mp| mp.starts_with(dir))
        .collect();
    out.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    out.dedup();
    out
}

/// Mount points at or below `dir` in this mount namespace, deepest first.
pub(crate) fn mounts_under(dir: &Path) -> Result<Vec<PathBuf>, GcError> {
    let dir = match std::fs::canonicalize(dir) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(GcError::io("resolve", dir, e)),
    };
    let mountinfo = "/proc/self/mountinfo";
    let info = std::fs::read_to_string(mountinfo).map_err(|e| GcError::io("read", mountinfo, e))?;
    Ok(mounts_under_in(&info, &dir))
}

/// Detaches (MNT_DETACH) every mount at or below `dir`, then checks that none is left.
pub(crate) fn detach_all_under(dir: &Path) -> Result<(), GcError> {
    // Stacked mounts on one point need one umount each: a few rounds.
    for _ in 0..8 {
        let mounts = mounts_under(dir)?;
        if mounts.is_empty() {
            return Ok(());
        }
        for mp in mounts {
            match umount2(&mp, MntFlags::MNT_DETACH) {
                Ok(()) => tracing::info!(mount = %mp.display(), "container GC: unmounted"),
                Err(nix::Error::EINVAL) | Err(nix::Error::ENOENT) => {}
                Err(source) => return Err(GcError::Unmount { mount: mp, source }),
            }
        }
    }
    let left = mounts_under(dir)?;
    if left.is_empty() {
        Ok(())
    } else {
        Err(GcError::StillMounted {
            dir: dir.to_path_buf(),
            left,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_mounts_below_deepest_first_with_escapes() {
        let info = "22 1 0:21 / /proc rw - proc proc rw\n\
                    90 30 0:50 / /var/lib/podhost/pods/u1/containers/c/0/rootfs rw - overlay overlay rw\n\
                    91 30 0:4 net:[1] /var/lib/podhost/pods/u1/ns/net rw - nsfs nsfs rw\n\
                    92 30 0:51 / /var/lib/podhost/pods/u10/x rw - tmpfs tmpfs rw\n\
                    93 30 0:52 / /var/lib/podhost/pods/u1/with\\040space rw - tmpfs tmpfs rw\n";
        let got = mounts_under_in(info, Path::new("/var/lib/podhost/pods/u1"));
        assert_eq!(
            got,
            vec![
                PathBuf::from("/var/lib/podhost/pods/u1/containers/c/0/rootfs"),
                PathBuf::from("/var/lib/podhost/pods/u1/ns/net"),
                PathBuf::from("/var/lib/podhost/pods/u1/with space"),
            ]
        );
    }
}
