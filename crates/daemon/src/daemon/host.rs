//! Facts about the host the daemon checks once at start.

use std::path::Path;

use nix::fcntl::{Flock, FlockArg};

use super::DaemonError;
use podhost_model::cgroup_enforcement::{
    UNENFORCED_NODE_EVENT_REASON, V1_NODE_EVENT_REASON, V1_NOT_ENFORCED,
};
use podhost_model::qos::DAEMON_OOM_SCORE_ADJ;
use podhost_model::rlimits::Rlimit;
use podhost_runtime::node_cgroups::{Enforcement, NodeCgroups};
use podhost_runtime::rlimit_host::hard_limit;
use podhost_status::{EventKind, StatusStore};

/// Holds an exclusive flock on `<root>/daemon.lock` for the daemon's life (until the
/// returned guard is dropped), and records in it the API socket (`None`: `--runonce`),
/// for CLIs given `--root-dir` to name it.
pub fn lock_root(root: &Path, socket: Option<&Path>) -> Result<Flock<std::fs::File>, DaemonError> {
    let path = podhost_disk::daemon_lock::path(root);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| DaemonError::Dir {
            path: path.clone(),
            source,
        })?;
    let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock)
        .map_err(|_| DaemonError::Locked(root.to_path_buf()))?;
    podhost_disk::daemon_lock::record_socket(&lock, socket)
        .map_err(|source| DaemonError::Dir { path, source })?;
    Ok(lock)
}

/// Sets the node's cgroup tree up and says plainly what is and is not enforced.
pub fn node_cgroups(flag: Option<String>, pod_pids_limit: Option<i64>) -> NodeCgroups {
    let node = NodeCgroups::setup(flag, pod_pids_limit);
    match &node.enforcement {
        Enforcement::Full => tracing::info!(root = %node.root, "cgroup v2: limits enforced"),
        Enforcement::V1ContainerLimits { .. } => tracing::warn!(
            root = %node.root,
            "{}",
            v1_message(&node)
        ),
        Enforcement::Unenforced(reason) => tracing::warn!(
            root = %node.root,
            "{}",
            unenforced_message(reason)
        ),
    }
    node
}

/// What a cgroup v1 / hybrid host enforces and what not (log line and node event).
fn v1_message(node: &NodeCgroups) -> String {
    let mut missing: Vec<&str> = V1_NOT_ENFORCED.to_vec();
    if !node.v1_swap_accounting() {
        missing.push(
            "the swap limit (no memory.memsw: swap accounting is off, containers may swap past \
             their memory limit)",
        );
    }
    format!(
        "cgroup v1/hybrid host: each container's memory, CPU and pids limits are enforced \
         through the v1 hierarchies under {}; NOT enforced: {}",
        node.root,
        missing.join("; ")
    )
}

fn unenforced_message(reason: &str) -> String {
    format!(
        "{reason}: containers get their own cgroups, but CPU/memory/pids limits, QoS cgroups \
         and cgroup OOM detection are NOT enforced (degraded mode)"
    )
}

/// The node event at start on a host where not everything is enforced (cluster mode
/// posts node events to the API server).
pub fn report_cgroup_enforcement(node: &NodeCgroups, store: &StatusStore) {
    match &node.enforcement {
        Enforcement::Full => {}
        Enforcement::V1ContainerLimits { .. } => {
            store.node_event(EventKind::Warning, V1_NODE_EVENT_REASON, v1_message(node));
        }
        Enforcement::Unenforced(reason) => store.node_event(
            EventKind::Warning,
            UNENFORCED_NODE_EVENT_REASON,
            unenforced_message(reason),
        ),
    }
}

/// Whether this process holds CAP_SYS_RESOURCE (to raise hard rlimits and lower
/// oom_score_adj).
pub fn has_cap_sys_resource() -> bool {
    const CAP_SYS_RESOURCE: u32 = 24;
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << CAP_SYS_RESOURCE) != 0)
}

/// The node's memory in bytes (MemTotal), for the Burstable oom_score_adj formula.
pub fn memory_capacity() -> i64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<i64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(1 << 30)
}

/// The daemon's own protections, as the kubelet's: oom_score_adj −999 and
/// RLIMIT_NOFILE `max_open_files` (maxOpenFiles, 1,000,000 by default). Clamped with a
/// warning where the host forbids them.
pub fn tune_daemon_process(max_open_files: u64) {
    if let Err(e) = std::fs::write("/proc/self/oom_score_adj", DAEMON_OOM_SCORE_ADJ.to_string()) {
        tracing::warn!(
            error = %e,
            "cannot set the daemon's oom_score_adj to {DAEMON_OOM_SCORE_ADJ} (needs CAP_SYS_RESOURCE); \
             the kernel may pick the daemon before containers when memory runs out"
        );
    }
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap_or((1024, 1024));
    let wanted = max_open_files;
    let target = if has_cap_sys_resource() {
        wanted
    } else {
        wanted.min(hard)
    };
    if target < wanted {
        tracing::warn!(
            hard,
            "cannot raise the daemon's RLIMIT_NOFILE to {wanted} (hard limit {hard}, no CAP_SYS_RESOURCE); using {target}"
        );
    }
    if let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, target, target) {
        tracing::warn!(error = %e, "cannot set the daemon's RLIMIT_NOFILE to {target}");
    }
}

/// The containers' default rlimits (`--default-rlimits`), clamped once to what the host
/// allows when podhost may not raise hard limits (no CAP_SYS_RESOURCE), with a warning.
pub fn container_default_rlimits(wanted: Vec<Rlimit>) -> Vec<Rlimit> {
    if has_cap_sys_resource() {
        return wanted;
    }
    wanted
        .into_iter()
        .map(|mut r| {
            if let Some(hard) = hard_limit(&r.resource).filter(|h| r.hard > *h) {
                tracing::warn!(
                    "cannot give containers RLIMIT_{} {}:{}: the host's hard limit is {hard} and \
                     podhost lacks CAP_SYS_RESOURCE; using {}:{hard}",
                    r.resource.to_ascii_uppercase(),
                    r.soft,
                    r.hard,
                    r.soft.min(hard)
                );
                r.hard = hard;
                r.soft = r.soft.min(hard);
            }
            r
        })
        .collect()
}

/// SIGTERM and SIGINT, caught from the moment this is made: made before the API socket
/// exists, a stop sent as soon as the socket answers still ends the daemon through its
/// cleanup (socket removed, statuses flushed) instead of the signal's default action.
pub struct StopSignals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl StopSignals {
    pub fn install() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// Resolves on the next SIGTERM or SIGINT (or one that came since [`Self::install`]).
    pub async fn wait(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

/// The node's IPs in pods' `status.hostIP(s)`: cluster mode's `--node-ip` when given
/// (the Node's InternalIP, which is what a kubelet reports), else [`host_ips`].
pub fn node_host_ips(node_ips: &[std::net::IpAddr]) -> Vec<String> {
    if node_ips.is_empty() {
        host_ips()
    } else {
        node_ips.iter().map(ToString::to_string).collect()
    }
}

/// The node's IPs as the downward API reports them (`status.hostIP(s)`): the source
/// address of the IPv4 and IPv6 default routes (no packet is sent), else the
/// addresses the host name resolves to; loopback only when there is nothing else.
pub fn host_ips() -> Vec<String> {
    use std::net::{IpAddr, ToSocketAddrs, UdpSocket};
    let routed = |bind: &str, probe: &str| -> Option<IpAddr> {
        let socket = UdpSocket::bind(bind).ok()?;
        socket.connect(probe).ok()?;
        Some(socket.local_addr().ok()?.ip())
    };
    // Documentation addresses: connect() only picks a route and a source address.
    let mut ips: Vec<IpAddr> = [
        routed("0.0.0.0:0", "192.0.2.1:9"),
        routed("[::]:0", "[2001:db8::1]:9"),
    ]
    .into_iter()
    .flatten()
    .filter(|ip| !ip.is_unspecified())
    .collect();
    if ips.is_empty() {
        let host = nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .unwrap_or_default();
        ips = (host.as_str(), 0)
            .to_socket_addrs()
            .map(|addrs| {
                addrs
                    .map(|a| a.ip())
                    .filter(|ip| !ip.is_loopback())
                    .collect()
            })
            .unwrap_or_default();
    }
    if ips.is_empty() {
        tracing::warn!(
            "the node has no routed or resolvable IP; the downward API reports 127.0.0.1 as status.hostIP"
        );
        ips.push(IpAddr::from([127, 0, 0, 1]));
    }
    ips.dedup();
    ips.iter().map(ToString::to_string).collect()
}

/// The node's capacity for the downward API's default limits: CPUs this process may
/// use, MemTotal, and the size of the filesystem holding `root_dir`.
pub fn node_capacity(root_dir: &Path) -> podhost_model::downward::NodeCapacity {
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let storage = nix::sys::statvfs::statvfs(root_dir)
        .map(|s| s.blocks().saturating_mul(s.fragment_size()))
        .unwrap_or(0);
    podhost_model::downward::NodeCapacity {
        cpu_millis: i64::try_from(cpus).unwrap_or(1).saturating_mul(1000),
        memory_bytes: memory_capacity(),
        ephemeral_storage_bytes: i64::try_from(storage).unwrap_or(i64::MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_ip_flag_is_the_pods_host_ip() {
        let given: Vec<std::net::IpAddr> =
            vec!["10.7.0.2".parse().unwrap(), "fd00::2".parse().unwrap()];
        assert_eq!(node_host_ips(&given), vec!["10.7.0.2", "fd00::2"]);
        assert_eq!(node_host_ips(&[]), host_ips());
    }
}
