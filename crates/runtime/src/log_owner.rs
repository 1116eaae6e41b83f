//! Which pod log directories are this podhost's: `--log-dir` may be shared with a
//! kubelet or another podhost (another `--root-dir`), whose `<ns>_<pod>_<uid>` dirs
//! container GC must never remove. A podhost marks each pod log dir it creates with a
//! file naming its root dir; GC removes an orphaned log dir only when the mark is its
//! own.

use std::path::{Path, PathBuf};

use super::RuntimeError;
use podhost_disk::Layout;

/// `<log-dir>/<ns>_<pod>_<uid>/.podhost-owner`: the owner's root dir and a newline.
pub const OWNER_FILE: &str = ".podhost-owner";

/// The text of this layout's mark: its root dir, made absolute so that two spellings
/// of one root agree.
fn mark(layout: &Layout) -> String {
    let root: PathBuf = std::fs::canonicalize(&layout.root_dir)
        .or_else(|_| std::path::absolute(&layout.root_dir))
        .unwrap_or_else(|_| layout.root_dir.clone());
    format!("{}\n", root.display())
}

/// Creates the pod's log dir if needed and marks it as this podhost's; a dir another
/// podhost marked keeps its mark (and is left to that podhost's GC), with a warning.
/// A new mark is durable once `pending` completes (until then GC, which only removes
/// marked dirs, would at worst leave this one alone).
pub fn claim_pod_log_dir(
    layout: &Layout,
    namespace: &str,
    pod_name: &str,
    uid: &str,
    pending: &mut podhost_disk::PendingDurability,
) -> Result<(), RuntimeError> {
    let dir = layout.pod_log_dir(namespace, pod_name, uid);
    std::fs::create_dir_all(&dir).map_err(|e| RuntimeError::io("create directory", &dir, e))?;
    let ours = mark(layout);
    match std::fs::read_to_string(dir.join(OWNER_FILE)) {
        Ok(text) if text == ours => Ok(()),
        Ok(text) => {
            tracing::warn!(dir = %dir.display(), owner = text.trim(),
                "this pod's log dir is marked by another podhost (same --log-dir, same pod UID); \
                 left to its GC");
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(
            podhost_disk::write_durable_later(&dir.join(OWNER_FILE), ours.as_bytes(), pending)?,
        ),
        Err(e) => Err(RuntimeError::io("read", dir.join(OWNER_FILE), e)),
    }
}

/// Whether `dir` (a pod log dir) carries this layout's mark.
pub fn is_ours(layout: &Layout, dir: &Path) -> bool {
    std::fs::read_to_string(dir.join(OWNER_FILE)).is_ok_and(|text| text == mark(layout))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_marks_once_and_another_root_is_not_ours() {
        let tmp = tempfile::tempdir().unwrap();
        let logs = tmp.path().join("logs");
        let a = Layout::new(tmp.path().join("a"), &logs);
        let b = Layout::new(tmp.path().join("b"), &logs);
        std::fs::create_dir_all(&a.root_dir).unwrap();
        let mut pending = podhost_disk::PendingDurability::default();
        claim_pod_log_dir(&a, "ns", "p", "u1", &mut pending).unwrap();
        assert!(
            !pending.is_empty(),
            "a new mark's fsyncs are left to the caller"
        );
        pending.complete().unwrap();
        let dir = a.pod_log_dir("ns", "p", "u1");
        assert!(is_ours(&a, &dir));
        assert!(!is_ours(&b, &dir));
        // b's claim of the same dir leaves a's mark.
        let mut pending = podhost_disk::PendingDurability::default();
        claim_pod_log_dir(&b, "ns", "p", "u1", &mut pending).unwrap();
        assert!(
            pending.is_empty(),
            "nothing written, nothing to make durable"
        );
        assert!(is_ours(&a, &dir));
        // The same root spelt differently is the same owner.
        let a2 = Layout::new(tmp.path().join("a/../a"), &logs);
        assert!(is_ours(&a2, &dir));
        let unmarked = logs.join("kube-system_etcd_u2");
        std::fs::create_dir_all(&unmarked).unwrap();
        assert!(!is_ours(&a, &unmarked));
    }
}
