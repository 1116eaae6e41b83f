//! The node's numbers from /proc: CPU time (/proc/stat), memory as the kubelet counts it
//! (/proc/meminfo: available = capacity − working set), page faults (/proc/vmstat),
//! pressure (/proc/pressure/*), interfaces (/proc/net/dev of the daemon's namespace),
//! the process limit and count.

use chrono::{DateTime, Utc};

use podhost_model::stats::parse::{
    flat_keyed, meminfo, net_dev, proc_stat_busy_ticks, psi, working_set,
};
use podhost_model::stats::summary::{
    InterfaceStats, MemoryStats, NetworkStats, PsiStats, RlimitStats,
};

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// The node-wide pressure of one resource (`cpu`, `memory`, `io`).
pub fn pressure(resource: &str) -> Option<PsiStats> {
    read(&format!("/proc/pressure/{resource}")).and_then(|t| psi(&t))
}

/// CPU time used by the whole node, in nanoseconds.
pub fn cpu_usage_ns() -> Option<u64> {
    let ticks = proc_stat_busy_ticks(&read("/proc/stat")?)?;
    let hz = u64::try_from(nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok()??).ok()?;
    Some(ticks.saturating_mul(1_000_000_000 / hz.max(1)))
}

/// When the node booted (`btime` of /proc/stat): the node's start time.
pub fn boot_time() -> Option<DateTime<Utc>> {
    let text = read("/proc/stat")?;
    let secs = text
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    DateTime::from_timestamp(secs, 0)
}

/// The node's memory as the kubelet's eviction manager sees it.
pub fn memory(time: DateTime<Utc>) -> Option<MemoryStats> {
    let m = meminfo(&read("/proc/meminfo")?);
    let total = *m.get("MemTotal")?;
    let usage = total.saturating_sub(m.get("MemFree").copied().unwrap_or(0));
    let ws = working_set(usage, m.get("Inactive(file)").copied().unwrap_or(0));
    let vm = read("/proc/vmstat").map(|t| flat_keyed(&t));
    Some(MemoryStats {
        time,
        available_bytes: Some(total.saturating_sub(ws)),
        usage_bytes: Some(usage),
        working_set_bytes: Some(ws),
        rss_bytes: m.get("AnonPages").copied(),
        page_faults: vm.as_ref().and_then(|v| v.get("pgfault").copied()),
        major_page_faults: vm.as_ref().and_then(|v| v.get("pgmajfault").copied()),
        psi: pressure("memory"),
    })
}

/// `MemTotal`, for `top node`'s percentage.
pub fn memory_capacity() -> Option<u64> {
    meminfo(&read("/proc/meminfo")?).get("MemTotal").copied()
}

/// Interfaces of the daemon's network namespace (the host's, unless the daemon runs in
/// another one, as tests do).
pub fn network(time: DateTime<Utc>) -> Option<NetworkStats> {
    network_stats(net_dev(&read("/proc/net/dev")?), time)
}

/// The Summary's network object: the default interface (`eth0` as the kubelet's, else
/// the first by name) inline, and all of them. `None` without any interface but `lo`.
pub fn network_stats(
    mut interfaces: Vec<InterfaceStats>,
    time: DateTime<Utc>,
) -> Option<NetworkStats> {
    interfaces.sort_by(|a, b| a.name.cmp(&b.name));
    let default = interfaces
        .iter()
        .find(|i| i.name == "eth0")
        .or_else(|| interfaces.first())
        .cloned()?;
    Some(NetworkStats {
        time,
        default,
        interfaces,
    })
}

/// `pid_max` and the number of processes (the total of /proc/loadavg's `running/total`).
pub fn rlimit(time: DateTime<Utc>) -> RlimitStats {
    let max_pid = read("/proc/sys/kernel/pid_max").and_then(|t| t.trim().parse().ok());
    let running_processes = read("/proc/loadavg")
        .and_then(|t| t.split_whitespace().nth(3)?.split_once('/')?.1.parse().ok());
    RlimitStats {
        time,
        max_pid,
        running_processes,
    }
}

/// Logical CPUs, for `top node`'s percentage.
pub fn cpu_count() -> u64 {
    std::thread::available_parallelism()
        .map(|n| n.get() as u64)
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_nodes_numbers_are_plausible() {
        let now = Utc::now();
        let m = memory(now).unwrap();
        let cap = memory_capacity().unwrap();
        assert!(m.working_set_bytes.unwrap() <= cap);
        assert_eq!(
            m.available_bytes.unwrap() + m.working_set_bytes.unwrap(),
            cap
        );
        assert!(cpu_usage_ns().unwrap() > 0);
        assert!(boot_time().unwrap() < now);
        let r = rlimit(now);
        assert!(r.running_processes.unwrap() > 0);
        assert!(r.max_pid.unwrap() >= r.running_processes.unwrap());
    }

    #[test]
    fn default_interface_is_eth0_else_the_first() {
        let i = |n: &str| InterfaceStats {
            name: n.into(),
            ..Default::default()
        };
        let now = Utc::now();
        let n = network_stats(vec![i("veth1"), i("eth0")], now).unwrap();
        assert_eq!(n.default.name, "eth0");
        let n = network_stats(vec![i("ens3"), i("br0")], now).unwrap();
        assert_eq!(n.default.name, "br0");
        assert!(network_stats(vec![], now).is_none());
    }
}
