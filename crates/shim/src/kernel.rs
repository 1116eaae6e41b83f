//! The shim's kernel-facing chores: its own cgroup leaf and OOM score, the container's
//! OOM score, and the OOM verdict from memory.events around the container's life.

use std::path::Path;

use podhost_model_core::qos::SHIM_OOM_SCORE_ADJ;
use podhost_runtime::cgroup_attach_primer::{AttachPrimer, own_cgroup_procs};
use podhost_runtime::cgroup_memory::{read_limit, read_oom_counters, read_peak};
use podhost_runtime::cgroup_v2::MemoryEvents;
use podhost_runtime::not_applied::{NotApplied, OOM_SCORE_ADJ_NOT_APPLIED};
use podhost_runtime::shim_config::ShimConfig;

/// Records the shim's pid and sets its own OOM score (clamped: the host may forbid
/// lowering it). Its move into its leaf cgroup is [`start_cgroup_primer`]'s first write.
pub fn settle_shim(cfg: &ShimConfig) {
    let pid_file = cfg.bundle.join(podhost_disk::records::SHIM_PID_FILE);
    if let Err(e) =
        podhost_disk::write_boot_scoped(&pid_file, std::process::id().to_string().as_bytes())
    {
        tracing::warn!(error = %e, "cannot record the shim's pid");
    }
    if let Err(n) = write_oom_score_adj("self", SHIM_OOM_SCORE_ADJ) {
        tracing::warn!("the shim's own {}", n.message());
    }
}

/// Starts the cgroup-migration primer (runtime::cgroup_attach_primer) before the start's
/// slow steps: its first write moves the shim into its leaf where it has one (cgroup v2),
/// else "moves" it where it already is. `None` (said in the log) where it cannot start:
/// the start then only loses the primer's head start.
pub fn start_cgroup_primer(cfg: &ShimConfig) -> Option<AttachPrimer> {
    let procs = match &cfg.shim_cgroup {
        Some(leaf) => leaf.join("cgroup.procs"),
        None => own_cgroup_procs()?,
    };
    AttachPrimer::start(&procs)
        .inspect_err(|e| {
            let what = if cfg.shim_cgroup.is_some() {
                "cannot move the shim into its cgroup"
            } else {
                "the cgroup primer cannot start"
            };
            tracing::warn!(error = %e, "{what}");
        })
        .ok()
}

/// Ends the primer once libcontainer's cgroup writes are done; a refused move into the
/// shim's leaf is said in the log, as it was when the shim made it itself.
pub fn finish_cgroup_primer(cfg: &ShimConfig, primer: Option<AttachPrimer>) {
    if let Some(primer) = primer
        && let Err(e) = primer.finish()
    {
        match &cfg.shim_cgroup {
            Some(leaf) => {
                tracing::warn!(error = %e, cgroup = %leaf.display(), "cannot move the shim into its cgroup")
            }
            None => tracing::debug!(error = %e, "the cgroup primer's write was refused"),
        }
    }
}

/// Writes `/proc/<who>/oom_score_adj`; where the host forbids it, the process keeps the
/// value it has, and the error says which and why.
pub fn write_oom_score_adj(who: &str, value: i32) -> Result<(), NotApplied> {
    let path = format!("/proc/{who}/oom_score_adj");
    let Err(e) = std::fs::write(&path, value.to_string()) else {
        return Ok(());
    };
    let current = std::fs::read_to_string(&path)
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    let lowering = current.is_some_and(|c| value < c);
    let why = match e.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) if lowering => format!(
            "writing {path}: {e}; lowering oom_score_adj needs CAP_SYS_RESOURCE, which podhost \
             lacks on this host (run it with that capability for the kubelet's OOM policy)"
        ),
        _ => format!("writing {path}: {e}"),
    };
    Err(NotApplied {
        reason: OOM_SCORE_ADJ_NOT_APPLIED.into(),
        setting: "oom_score_adj".into(),
        wanted: value.to_string(),
        actual: current.map_or_else(|| "an unknown value".into(), |c| c.to_string()),
        why,
    })
}

/// The OOM counters of the container's memory cgroup (v2 memory.events, v1
/// memory.oom_control) right after it was created.
pub fn oom_baseline(cgroup_dir: Option<&Path>) -> Option<MemoryEvents> {
    cgroup_dir.and_then(read_oom_counters)
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
    let after = read_oom_counters(dir);
    let killed = match (baseline, after) {
        (Some(b), Some(a)) => a.oom_kill > b.oom_kill || a.oom_group_kill > b.oom_group_kill,
        (None, Some(a)) => a.oom_kill > 0,
        _ => false,
    };
    (killed, read_peak(dir), read_limit(dir))
}

/// Whether the container's init exits within `grace` (left unreaped: the monitor's
/// `reap_until` collects its status). The wait sleeps on a pidfd and costs no CPU.
/// Debug builds with `PODHOST_TEST_SHIM_AWAIT_EXIT` set (inherited from the daemon)
/// wait for the exit however long it takes, so that tests take this path for certain.
pub fn init_exits_within(init_pid: i32, grace: std::time::Duration) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
    use std::os::fd::AsFd;
    let await_exit =
        cfg!(debug_assertions) && std::env::var_os("PODHOST_TEST_SHIM_AWAIT_EXIT").is_some();
    let flags = if await_exit {
        WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT
    } else {
        // A pidfd turns readable when its process exits (before it is reaped). Without
        // one (kernels before 5.3) the exit is only looked at once.
        if let Ok(fd) = podhost_runtime::shim_client::pidfd_open(init_pid) {
            let timeout = PollTimeout::try_from(grace).unwrap_or(PollTimeout::ZERO);
            let _ = poll(&mut [PollFd::new(fd.as_fd(), PollFlags::POLLIN)], timeout);
        }
        WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT
    };
    matches!(
        waitid(Id::Pid(nix::unistd::Pid::from_raw(init_pid)), flags),
        Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..))
    )
}
