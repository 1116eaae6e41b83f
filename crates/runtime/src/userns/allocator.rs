//! Per-pod blocks of 65536 host IDs, persisted under `<root-dir>/userns/`.
//!
//! One JSON file maps pod UID → block base, rewritten whole (temp, fsync, rename) on
//! every change, so a daemon killed at any point finds each pod's block again and no
//! block is ever handed to two pods. Blocks come from the `--userns-range`; a block
//! held from an earlier, different range stays its pod's until the pod is gone.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::range::{BLOCK_SIZE, IdRange};
use super::{IdMap, UsernsError};

/// The file that holds the allocations.
pub const ALLOCATIONS_FILE: &str = "blocks.json";

#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Record {
    /// Pod UID → the base of its block.
    pods: BTreeMap<String, u32>,
}

/// The node's allocator (one per daemon; methods take `&self`).
#[derive(Debug)]
pub struct UsernsAllocator {
    path: PathBuf,
    range: IdRange,
    pods: Mutex<BTreeMap<String, u32>>,
}

impl UsernsAllocator {
    /// Loads the allocations kept in `dir` (none if the file is missing).
    pub fn open(dir: &Path, range: IdRange) -> Result<Self, UsernsError> {
        let path = dir.join(ALLOCATIONS_FILE);
        let pods = match std::fs::read(&path) {
            Ok(bytes) => {
                let record: Record =
                    serde_json::from_slice(&bytes).map_err(|e| UsernsError::Corrupt {
                        path: path.clone(),
                        message: e.to_string(),
                    })?;
                let mut seen = BTreeSet::new();
                for (pod, base) in &record.pods {
                    if base % BLOCK_SIZE != 0 || *base == 0 || !seen.insert(*base) {
                        return Err(UsernsError::Corrupt {
                            path: path.clone(),
                            message: format!("pod {pod} holds an invalid or shared block {base}"),
                        });
                    }
                }
                record.pods
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(UsernsError::io("read", &path, e)),
        };
        Ok(Self {
            path,
            range,
            pods: Mutex::new(pods),
        })
    }

    pub fn range(&self) -> IdRange {
        self.range
    }

    /// The pod's block: the one it holds, or the lowest free one, persisted before
    /// it is returned.
    pub fn allocate(&self, pod_uid: &str) -> Result<IdMap, UsernsError> {
        let mut pods = self.lock();
        if let Some(base) = pods.get(pod_uid) {
            return Ok(IdMap { base: *base });
        }
        let used: BTreeSet<u32> = pods.values().copied().collect();
        let base = (0..self.range.blocks)
            .map(|i| self.range.base_of(i))
            .find(|b| !used.contains(b))
            .ok_or_else(|| UsernsError::Exhausted {
                pod: pod_uid.to_string(),
                range: self.range.to_string(),
                used: pods.len(),
            })?;
        pods.insert(pod_uid.to_string(), base);
        if let Err(e) = self.persist(&pods) {
            pods.remove(pod_uid);
            return Err(e);
        }
        tracing::info!(pod = pod_uid, base, "user namespace block allocated");
        Ok(IdMap { base })
    }

    /// The pod's block, if it holds one.
    pub fn get(&self, pod_uid: &str) -> Option<IdMap> {
        self.lock().get(pod_uid).map(|base| IdMap { base: *base })
    }

    /// Frees the pod's block; returns what it held.
    pub fn release(&self, pod_uid: &str) -> Result<Option<IdMap>, UsernsError> {
        let mut pods = self.lock();
        let Some(base) = pods.remove(pod_uid) else {
            return Ok(None);
        };
        if let Err(e) = self.persist(&pods) {
            pods.insert(pod_uid.to_string(), base);
            return Err(e);
        }
        tracing::info!(pod = pod_uid, base, "user namespace block released");
        Ok(Some(IdMap { base }))
    }

    /// Frees the blocks of every pod for which `live` is false (container GC's pass
    /// over pods that are gone); returns them.
    pub fn release_unless(
        &self,
        live: impl Fn(&str) -> bool,
    ) -> Result<Vec<(String, IdMap)>, UsernsError> {
        let mut pods = self.lock();
        let gone: Vec<(String, u32)> = pods
            .iter()
            .filter(|(uid, _)| !live(uid))
            .map(|(uid, base)| (uid.clone(), *base))
            .collect();
        if gone.is_empty() {
            return Ok(Vec::new());
        }
        for (uid, _) in &gone {
            pods.remove(uid);
        }
        if let Err(e) = self.persist(&pods) {
            pods.extend(gone.iter().cloned());
            return Err(e);
        }
        for (uid, base) in &gone {
            tracing::info!(pod = %uid, base, "user namespace block of a gone pod released");
        }
        Ok(gone
            .into_iter()
            .map(|(uid, base)| (uid, IdMap { base }))
            .collect())
    }

    /// Every pod's block.
    pub fn allocations(&self) -> Vec<(String, IdMap)> {
        self.lock()
            .iter()
            .map(|(uid, base)| (uid.clone(), IdMap { base: *base }))
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, u32>> {
        // A panic while holding the lock leaves a consistent map (every change is
        // undone on error before the guard drops), so poisoning is ignored.
        self.pods.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn persist(&self, pods: &BTreeMap<String, u32>) -> Result<(), UsernsError> {
        let record = Record { pods: pods.clone() };
        let bytes = serde_json::to_vec_pretty(&record).map_err(|e| UsernsError::Corrupt {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        podhost_disk::write_atomic(&self.path, &bytes).map_err(|e| match e {
            podhost_disk::DiskError::Io { what, path, source } => {
                UsernsError::io(what, path, source)
            }
            other => UsernsError::io(
                "write",
                &self.path,
                std::io::Error::other(other.to_string()),
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(first_block: u32, blocks: u32) -> IdRange {
        IdRange {
            first_block,
            blocks,
        }
    }

    #[test]
    fn blocks_do_not_overlap_and_are_kept_per_pod() {
        let dir = tempfile::tempdir().unwrap();
        let a = UsernsAllocator::open(dir.path(), range(2, 3)).unwrap();
        let p1 = a.allocate("pod-1").unwrap();
        let p2 = a.allocate("pod-2").unwrap();
        assert_eq!(p1.base, 2 * BLOCK_SIZE);
        assert_eq!(p2.base, 3 * BLOCK_SIZE);
        assert_eq!(a.allocate("pod-1").unwrap(), p1, "a pod keeps its block");
        assert_eq!(a.get("pod-2"), Some(p2));
        assert_eq!(p1.map_line(), "0 131072 65536\n");
        assert_eq!(p2.host_id(1000), 3 * BLOCK_SIZE + 1000);
    }

    #[test]
    fn exhaustion_is_a_clear_error_and_release_frees_the_block() {
        let dir = tempfile::tempdir().unwrap();
        let a = UsernsAllocator::open(dir.path(), range(1, 2)).unwrap();
        a.allocate("a").unwrap();
        let b = a.allocate("b").unwrap();
        let err = a.allocate("c").unwrap_err().to_string();
        assert!(err.contains("pod c"), "{err}");
        assert!(err.contains("65536:131072"), "{err}");
        assert!(err.contains("widen the range"), "{err}");
        assert_eq!(a.release("b").unwrap(), Some(b));
        assert_eq!(a.release("b").unwrap(), None);
        assert_eq!(a.allocate("c").unwrap(), b, "the freed block is reused");
    }

    #[test]
    fn survives_a_reopen_and_gc_releases_gone_pods() {
        let dir = tempfile::tempdir().unwrap();
        let (x, y) = {
            let a = UsernsAllocator::open(dir.path(), range(1, 4)).unwrap();
            (a.allocate("x").unwrap(), a.allocate("y").unwrap())
        };
        // A new daemon (the old one was killed) sees the same blocks.
        let a = UsernsAllocator::open(dir.path(), range(1, 4)).unwrap();
        assert_eq!(a.get("x"), Some(x));
        assert_eq!(a.allocate("y").unwrap(), y);
        assert_ne!(a.allocate("z").unwrap(), x);
        let gone = a.release_unless(|uid| uid == "y").unwrap();
        let gone: Vec<&str> = gone.iter().map(|(u, _)| u.as_str()).collect();
        assert_eq!(gone, ["x", "z"]);
        let a = UsernsAllocator::open(dir.path(), range(1, 4)).unwrap();
        assert_eq!(a.allocations(), vec![("y".to_string(), y)]);
    }

    #[test]
    fn blocks_from_an_older_range_stay_and_are_never_handed_out_twice() {
        let dir = tempfile::tempdir().unwrap();
        let old = UsernsAllocator::open(dir.path(), range(5, 2))
            .unwrap()
            .allocate("old")
            .unwrap();
        // The range now starts below and overlaps the old block.
        let a = UsernsAllocator::open(dir.path(), range(4, 3)).unwrap();
        let n1 = a.allocate("n1").unwrap();
        let n2 = a.allocate("n2").unwrap();
        assert_eq!(n1.base, 4 * BLOCK_SIZE);
        assert_eq!(n2.base, 6 * BLOCK_SIZE);
        assert_ne!(n2, old);
        assert_eq!(a.get("old"), Some(old));
    }

    #[test]
    fn a_corrupt_file_names_itself() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(ALLOCATIONS_FILE), b"{not json").unwrap();
        let err = UsernsAllocator::open(dir.path(), IdRange::DEFAULT)
            .unwrap_err()
            .to_string();
        assert!(err.contains(ALLOCATIONS_FILE), "{err}");
        std::fs::write(
            dir.path().join(ALLOCATIONS_FILE),
            br#"{"pods":{"a":131072,"b":131072}}"#,
        )
        .unwrap();
        let err = UsernsAllocator::open(dir.path(), IdRange::DEFAULT)
            .unwrap_err()
            .to_string();
        assert!(err.contains("shared block"), "{err}");
    }
}
