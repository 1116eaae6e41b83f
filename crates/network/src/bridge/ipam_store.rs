//! The host-local IPAM's state, one file per allocated address in the layout of CNI's
//! host-local plugin: `<state>/ipam/<network>-<prefix>/<ip>` holds the UID of the pod
//! that has it (created with O_EXCL; not fsynced, see `super::records` for why), and
//! `last_reserved_ip` the last address handed out (a hint for round robin: losing it
//! only restarts the round). The files are the truth; an in-memory index of them, made
//! when the daemon starts, answers questions without reading the directory again.
//! One daemon owns a state directory; callers serialize access with a mutex.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::OpenOptions;
use std::io::Write;
use std::net::IpAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::BridgeError;
use podhost_model::net::{Cidr, ipam::next_free};

const LAST_RESERVED: &str = "last_reserved_ip";

/// One pod CIDR's allocations.
#[derive(Debug)]
struct Range {
    cidr: Cidr,
    dir: PathBuf,
    /// address → the UID that holds it.
    held: BTreeMap<IpAddr, String>,
    last: Option<IpAddr>,
}

/// The allocations of every pod CIDR.
#[derive(Debug)]
pub(super) struct IpamStore {
    ranges: Vec<Range>,
}

/// An address chosen for a pod; `new` when its file is still to be made.
#[derive(Debug, Clone, Copy)]
pub(super) struct Planned {
    range: usize,
    pub ip: IpAddr,
    new: bool,
}

impl IpamStore {
    /// Loads (creating the directories) the allocations of `cidrs` under `state_dir`.
    pub(super) fn open(state_dir: &Path, cidrs: &[Cidr]) -> Result<Self, BridgeError> {
        let mut ranges = Vec::new();
        for cidr in cidrs {
            let dir = state_dir.join("ipam").join(cidr.file_name());
            std::fs::create_dir_all(&dir).map_err(|e| BridgeError::io("create", &dir, e))?;
            let mut held = BTreeMap::new();
            let entries = std::fs::read_dir(&dir).map_err(|e| BridgeError::io("list", &dir, e))?;
            for entry in entries {
                let entry = entry.map_err(|e| BridgeError::io("list", &dir, e))?;
                let name = entry.file_name().to_string_lossy().into_owned();
                let Ok(ip) = name.parse::<IpAddr>() else {
                    continue;
                };
                // An empty file is an allocation cut short by a crash: it belongs to no
                // live pod, so reconcile releases it.
                let uid = std::fs::read_to_string(entry.path())
                    .map_err(|e| BridgeError::io("read", &entry.path(), e))?;
                held.insert(ip, uid.trim().to_string());
            }
            let last = std::fs::read_to_string(dir.join(LAST_RESERVED))
                .ok()
                .and_then(|s| s.trim().parse().ok());
            ranges.push(Range {
                cidr: *cidr,
                dir,
                held,
                last,
            });
        }
        Ok(Self { ranges })
    }

    /// The addresses `uid` holds, IPv4 first (the CIDRs' order).
    #[cfg(test)]
    pub(super) fn held_by(&self, uid: &str) -> Vec<IpAddr> {
        self.ranges
            .iter()
            .flat_map(|r| r.held.iter().filter(|(_, u)| *u == uid).map(|(ip, _)| *ip))
            .collect()
    }

    /// Every UID holding an address.
    pub(super) fn holders(&self) -> BTreeSet<String> {
        self.ranges
            .iter()
            .flat_map(|r| r.held.values().cloned())
            .collect()
    }

    /// One address per CIDR for `uid`: the one it holds, or the next free one. Nothing
    /// is written: [`IpamStore::commit`] does that, after the caller recorded the plan.
    pub(super) fn plan(&self, uid: &str) -> Result<Vec<Planned>, BridgeError> {
        let mut out = Vec::new();
        for (index, range) in self.ranges.iter().enumerate() {
            if let Some((ip, _)) = range.held.iter().find(|(_, u)| *u == uid) {
                out.push(Planned {
                    range: index,
                    ip: *ip,
                    new: false,
                });
                continue;
            }
            let taken: BTreeSet<IpAddr> = range.held.keys().copied().collect();
            let ip = next_free(&range.cidr, &taken, range.last).ok_or_else(|| {
                BridgeError::IpamExhausted {
                    cidr: range.cidr.to_string(),
                    held: range.held.len(),
                }
            })?;
            out.push(Planned {
                range: index,
                ip,
                new: true,
            });
        }
        Ok(out)
    }

    /// Makes the files of the planned new addresses and advances the round robin.
    pub(super) fn commit(&mut self, uid: &str, planned: &[Planned]) -> Result<(), BridgeError> {
        for p in planned.iter().filter(|p| p.new) {
            let range = &mut self.ranges[p.range];
            let path = range.dir.join(p.ip.to_string());
            create_exclusive(&path, uid)?;
            range.held.insert(p.ip, uid.to_string());
            range.last = Some(p.ip);
            write_hint(&range.dir.join(LAST_RESERVED), &p.ip.to_string());
        }
        Ok(())
    }

    /// Deletes every address `uid` holds (fine when it holds none); returns them.
    pub(super) fn release(&mut self, uid: &str) -> Result<Vec<IpAddr>, BridgeError> {
        let mut released = Vec::new();
        for range in &mut self.ranges {
            let mine: Vec<IpAddr> = range
                .held
                .iter()
                .filter(|(_, u)| *u == uid)
                .map(|(ip, _)| *ip)
                .collect();
            for ip in &mine {
                let path = range.dir.join(ip.to_string());
                match std::fs::remove_file(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(BridgeError::io("delete the IPAM entry", &path, e)),
                }
                range.held.remove(ip);
                released.push(*ip);
            }
        }
        Ok(released)
    }
}

/// Creates `path` with `uid` in it, refusing to overwrite; an existing file with the
/// same UID is this allocation made before a crash, and fine.
fn create_exclusive(path: &Path, uid: &str) -> Result<(), BridgeError> {
    let opened = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(path);
    let mut f = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let holder = std::fs::read_to_string(path).unwrap_or_default();
            if holder.trim() == uid {
                return Ok(());
            }
            return Err(BridgeError::IpamConflict {
                path: path.to_path_buf(),
                holder: holder.trim().to_string(),
            });
        }
        Err(e) => return Err(BridgeError::io("create the IPAM entry", path, e)),
    };
    f.write_all(uid.as_bytes())
        .map_err(|e| BridgeError::io("write the IPAM entry", path, e))
}

/// Replaces a hint file without fsync: a lost hint costs nothing but the round robin's
/// position, so it is not worth a disk flush per pod.
fn write_hint(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    if std::fs::write(&tmp, text).is_ok() {
        let _ = std::fs::rename(&tmp, path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidrs() -> Vec<Cidr> {
        vec![
            "10.0.0.0/29".parse().unwrap(),
            "fd00::/120".parse().unwrap(),
        ]
    }

    fn allocate(store: &mut IpamStore, uid: &str) -> Vec<IpAddr> {
        let plan = store.plan(uid).unwrap();
        store.commit(uid, &plan).unwrap();
        plan.iter().map(|p| p.ip).collect()
    }

    #[test]
    fn allocations_are_files_holding_the_uid_and_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = IpamStore::open(dir.path(), &cidrs()).unwrap();
        let ips = allocate(&mut store, "a");
        assert_eq!(ips[0].to_string(), "10.0.0.2");
        assert_eq!(ips[1].to_string(), "fd00::2");
        let file = dir.path().join("ipam/10.0.0.0-29/10.0.0.2");
        assert_eq!(std::fs::read_to_string(file).unwrap(), "a");
        let again = IpamStore::open(dir.path(), &cidrs()).unwrap();
        assert_eq!(again.held_by("a"), ips);
        assert_eq!(
            again
                .plan("a")
                .unwrap()
                .iter()
                .map(|p| p.ip)
                .collect::<Vec<_>>(),
            ips
        );
    }

    #[test]
    fn round_robin_continues_after_a_reopen_and_release_deletes_the_files() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = IpamStore::open(dir.path(), &cidrs()).unwrap();
        allocate(&mut store, "a");
        store.release("a").unwrap();
        assert!(store.held_by("a").is_empty());
        assert!(!dir.path().join("ipam/10.0.0.0-29/10.0.0.2").exists());
        let mut store = IpamStore::open(dir.path(), &cidrs()).unwrap();
        let b = allocate(&mut store, "b");
        assert_eq!(
            b[0].to_string(),
            "10.0.0.3",
            "the freed .2 is not reused first"
        );
        assert_eq!(store.holders(), BTreeSet::from(["b".to_string()]));
    }

    #[test]
    fn a_full_range_is_an_error_naming_it_and_a_foreign_file_is_a_conflict() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = IpamStore::open(dir.path(), &cidrs()[..1]).unwrap();
        for uid in ["a", "b", "c", "d", "e"] {
            allocate(&mut store, uid);
        }
        let err = store.plan("f").unwrap_err();
        assert!(err.to_string().contains("10.0.0.0/29"), "{err}");
        store.release("c").unwrap();
        let plan = store.plan("f").unwrap();
        // Another writer took the address behind this store's back.
        std::fs::write(
            dir.path()
                .join("ipam/10.0.0.0-29")
                .join(plan[0].ip.to_string()),
            "x",
        )
        .unwrap();
        let err = store.commit("f", &plan).unwrap_err();
        assert!(matches!(err, BridgeError::IpamConflict { .. }), "{err}");
    }
}
