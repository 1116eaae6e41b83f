//! The host's device nodes, for a privileged container (containerd gives it every
//! device of the host's /dev, as `docker run --privileged` does).

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use oci_spec::runtime::{LinuxDevice, LinuxDeviceBuilder, LinuxDeviceType};

/// Directories of /dev that are not device nodes of the host (each container mounts
/// its own) and are left out.
const SKIPPED: [&str; 4] = ["/dev/pts", "/dev/shm", "/dev/mqueue", "/dev/.udev"];

/// Every char and block device under /dev (recursively, symlinks not followed),
/// except the container's own standard ones, which the runtime creates itself.
pub fn host_devices() -> Vec<LinuxDevice> {
    let mut out = Vec::new();
    walk(Path::new("/dev"), &mut out, 0);
    out
}

fn walk(dir: &Path, out: &mut Vec<LinuxDevice>, depth: usize) {
    if depth > 8 || SKIPPED.iter().any(|s| Path::new(s) == dir) {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path: PathBuf = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let ft = meta.file_type();
        if ft.is_dir() {
            walk(&path, out, depth + 1);
            continue;
        }
        let typ = if ft.is_char_device() {
            LinuxDeviceType::C
        } else if ft.is_block_device() {
            LinuxDeviceType::B
        } else {
            continue;
        };
        // The runtime makes these for every container.
        if ["/dev/console", "/dev/ptmx", "/dev/tty"]
            .iter()
            .any(|s| Path::new(s) == path)
        {
            continue;
        }
        let rdev = meta.rdev();
        if let Ok(dev) = LinuxDeviceBuilder::default()
            .path(path)
            .typ(typ)
            .major(nix::sys::stat::major(rdev) as i64)
            .minor(nix::sys::stat::minor(rdev) as i64)
            .file_mode(meta.mode() & 0o7777)
            .uid(meta.uid())
            .gid(meta.gid())
            .build()
        {
            out.push(dev);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// /dev/null is a char device on every Linux host.
    #[test]
    fn finds_the_hosts_null_device() {
        let devs = host_devices();
        let null = devs
            .iter()
            .find(|d| d.path() == Path::new("/dev/null"))
            .expect("/dev/null listed");
        assert_eq!((null.major(), null.minor()), (1, 3));
        assert!(devs.iter().all(|d| !d.path().starts_with("/dev/pts")));
    }
}
