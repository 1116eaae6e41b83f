//! The shim's kernel-facing chores: its own cgroup leaf and OOM score, the container's
//! OOM score, and the OOM verdict from memory.events around the container's life.

use std::path::Path;

use crate::model::qos::SHIM_OOM_SCORE_ADJ;
use crate::runtime::cgroup_v2::{MemoryEvents, read_memory_events, read_number};
use crate::runtime::records::ShimConfig;

/// Moves the shim into its leaf cgroup and sets its own OOM score (clamped: the host may
/// forbid lowering it).
pub fn settle_shim(cfg: &ShimConfig) {
    let pid_file = cfg.bundle.join(crate::runtime::records::SHIM_PID_FILE);
    if let Err(e) =
        crate::runtime::fsutil::write_atomic(&pid_file, std::process::id().to_string().as_bytes())
    {
        tracing::warn!(error = %e, "cannot record the shim's pid");
    }
    if let Some(leaf) = &cfg.shim_cgroup {
        let procs = leaf.join("cgroup.procs");
        if let Err(e) = std::fs::write(&procs, std::process::id().to_string()) {
            tracing::warn!(error = %e, cgroup = %leaf.display(), "cannot move the shim into its cgroup");
        }
    }
    write_oom_score_adj("self", SHIM_OOM_SCORE_ADJ);
}

/// Writes `/proc/<who>/oom_score_adj`; where the host forbids it, keeps the inherited
/// value and says so.
pub fn write_oom_score_adj(who: &str, value: i32) {
    let path = format!("/proc/{who}/oom_score_adj");
    if let Err(e) = std::fs::write(&path, value.to_string()) {
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        tracing::warn!(
            error = %e,
            "cannot set {path} to {value} (lowering needs CAP_SYS_RESOURCE); it stays {}",
            current.trim()
        );
    }
}

/// memory.events of the container's cgroup right after it was created.
pub fn oom_baseline(cgroup_dir: Option<&Path>) -> Option<MemoryEvents> {
    cgroup_dir.and_then(read_memory_events)
}

/// Whether the kernel OOM-killed a process of the container during its life, compared
/// with the baseline (the kernel may count one kill twice, so only growth matters), and
/// the memory peak and limit; read before libcontainer removes the cgroup.
pub fn oom_verdict(
    cgroup_dir: Option<&Path>,
    baseline: Option<MemoryEvents>,
) -> (bool, Option<u64>, Option<u64>) {
    let Some(dir) = cgroup_dir else {
        return (false, None, None);
    };
    let after = read_memory_events(dir);
    let killed = match (baseline, after) {
        (Some(b), Some(a)) => a.oom_kill > b.oom_kill || a.oom_group_kill > b.oom_group_kill,
        (None, Some(a)) => a.oom_kill > 0,
        _ => false,
    };
    (
        killed,
        read_number(dir, "memory.peak"),
        read_number(dir, "memory.max"),
    )
}
