//! The node's eviction signals, read as the kubelet computes them:
//! `memory.available` = capacity − working set of the root cgroup (usage −
//! inactive_file, cgroup v1 or v2), `nodefs.*` = statvfs of the root dir, `imagefs.*` =
//! statvfs of the image store (the same readings when it is on the same filesystem),
//! `pid.available` = the pid limit − the threads running. Blocking reads of /proc, /sys
//! and statvfs: call from `spawn_blocking`.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use podhost_model::eviction::{Observation, Observations, Signal};

const CGROUP_MOUNT: &str = "/sys/fs/cgroup";

/// Where the readings come from.
#[derive(Debug, Clone)]
pub struct SignalSources {
    /// `--root-dir`: the node filesystem.
    pub root_dir: std::path::PathBuf,
    /// The image store's directory (on the root dir's filesystem or its own).
    pub image_dir: std::path::PathBuf,
}

impl SignalSources {
    /// Whether images live on a filesystem of their own (the kubelet's dedicated
    /// imagefs): only then do imagefs signals rank and reclaim separately.
    pub fn dedicated_image_fs(&self) -> bool {
        let dev = |p: &Path| std::fs::metadata(p).map(|m| m.dev()).ok();
        dev(&self.root_dir) != dev(&self.image_dir)
    }
}

/// Every signal that can be read now; one that cannot is left out (and logged).
pub fn observe(sources: &SignalSources) -> Observations {
    let mut out = Observations::new();
    match memory_available() {
        Some(o) => {
            out.insert(Signal::MemoryAvailable, o);
        }
        None => tracing::debug!("eviction: memory.available cannot be read"),
    }
    let nodefs = filesystem(&sources.root_dir);
    if let Some((bytes, inodes)) = nodefs {
        out.insert(Signal::NodeFsAvailable, bytes);
        out.insert(Signal::NodeFsInodesFree, inodes);
    }
    // Without a filesystem of their own, images are on nodefs: one reading for both, as
    // the kubelet does, so the two signals never disagree by what was written between
    // two statvfs calls.
    let imagefs = if sources.dedicated_image_fs() {
        filesystem(&sources.image_dir)
    } else {
        nodefs
    };
    if let Some((bytes, inodes)) = imagefs {
        out.insert(Signal::ImageFsAvailable, bytes);
        out.insert(Signal::ImageFsInodesFree, inodes);
    }
    if let Some(o) = pid_available() {
        out.insert(Signal::PidAvailable, o);
    }
    out
}

/// A `key value` line of a file like `memory.stat` or `/proc/meminfo` (the value's first
/// word; `kB` values of meminfo are turned into bytes).
pub fn stat_value(text: &str, key: &str) -> Option<i64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(key)?;
        let rest = rest.strip_prefix(':').unwrap_or(rest);
        if !rest.starts_with(char::is_whitespace) {
            return None;
        }
        let mut words = rest.split_whitespace();
        let v: i64 = words.next()?.parse().ok()?;
        Some(if words.next() == Some("kB") {
            v * 1024
        } else {
            v
        })
    })
}

fn read(path: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// Whether the host has the unified (v2-only) cgroup hierarchy.
fn unified() -> bool {
    Path::new(CGROUP_MOUNT).join("cgroup.controllers").exists()
}

/// capacity − (usage − inactive_file) of the root cgroup. On v2 the root has no
/// memory.current: usage is MemTotal − MemFree, as runc's cgroup library emulates it.
fn memory_available() -> Option<Observation> {
    let meminfo = read("/proc/meminfo")?;
    let capacity = stat_value(&meminfo, "MemTotal")?;
    let (usage, inactive_file) = if unified() {
        let usage = capacity - stat_value(&meminfo, "MemFree")?;
        let inactive = read(Path::new(CGROUP_MOUNT).join("memory.stat"))
            .and_then(|s| stat_value(&s, "inactive_file"))
            .or_else(|| stat_value(&meminfo, "Inactive(file)"))?;
        (usage, inactive)
    } else {
        let v1 = Path::new(CGROUP_MOUNT).join("memory");
        let usage = read(v1.join("memory.usage_in_bytes"))?
            .trim()
            .parse()
            .ok()?;
        let inactive =
            read(v1.join("memory.stat")).and_then(|s| stat_value(&s, "total_inactive_file"))?;
        (usage, inactive)
    };
    let working_set = (usage - inactive_file).max(0);
    Some(Observation {
        available: capacity - working_set,
        capacity,
    })
}

/// (bytes, inodes) available to unprivileged users, of the filesystem holding `path`.
fn filesystem(path: &Path) -> Option<(Observation, Observation)> {
    let s = nix::sys::statvfs::statvfs(path).ok()?;
    let size =
        |blocks: u64| i64::try_from(blocks.saturating_mul(s.fragment_size())).unwrap_or(i64::MAX);
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    Some((
        Observation {
            available: size(s.blocks_available()),
            capacity: size(s.blocks()),
        },
        Observation {
            available: count(s.files_free()),
            capacity: count(s.files()),
        },
    ))
}

/// min(pid_max, threads-max) − the threads that exist (`/proc/loadavg`'s 4th field).
fn pid_available() -> Option<Observation> {
    let limit = |p: &str| read(p).and_then(|s| s.trim().parse::<i64>().ok());
    let capacity = match (
        limit("/proc/sys/kernel/pid_max"),
        limit("/proc/sys/kernel/threads-max"),
    ) {
        (Some(a), Some(b)) => a.min(b),
        (a, b) => a.or(b)?,
    };
    let loadavg = read("/proc/loadavg")?;
    let running: i64 = loadavg
        .split_whitespace()
        .nth(3)?
        .split_once('/')?
        .1
        .parse()
        .ok()?;
    Some(Observation {
        available: capacity - running,
        capacity,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_values_of_memory_stat_and_meminfo() {
        let stat = "anon 100\ninactive_file 4096\nactive_file 1\ntotal_inactive_file 8192\n";
        assert_eq!(stat_value(stat, "inactive_file"), Some(4096));
        assert_eq!(stat_value(stat, "total_inactive_file"), Some(8192));
        let meminfo = "MemTotal:       16384 kB\nMemFree:  1024 kB\nInactive(file):   2 kB\n";
        assert_eq!(stat_value(meminfo, "MemTotal"), Some(16384 * 1024));
        assert_eq!(stat_value(meminfo, "Inactive(file)"), Some(2048));
        assert_eq!(stat_value(meminfo, "Mem"), None);
    }

    /// The real readings of this machine: every signal is there and plausible.
    #[test]
    fn this_hosts_signals_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let sources = SignalSources {
            root_dir: dir.path().to_path_buf(),
            image_dir: dir.path().to_path_buf(),
        };
        assert!(!sources.dedicated_image_fs());
        let o = observe(&sources);
        for s in podhost_model::eviction::Signal::ALL {
            let v = o.get(&s).unwrap_or_else(|| panic!("{s} not read"));
            assert!(v.capacity > 0 && v.available <= v.capacity, "{s}: {v:?}");
        }
        assert_eq!(o[&Signal::NodeFsAvailable], o[&Signal::ImageFsAvailable]);
        let memory = o[&Signal::MemoryAvailable];
        assert!(memory.available > 0, "{memory:?}");
    }
}
