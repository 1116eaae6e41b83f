//! Parsers of the kernel's statistics files, pure (the text in, numbers out): cgroup v2
//! (`cpu.stat`, `memory.stat`, `io.stat`, `*.pressure`), cgroup v1 (`memory.stat`,
//! `blkio.throttle.io_service_bytes`), and /proc (`stat`, `meminfo`, `vmstat`,
//! `net/dev`). Lines they do not know are skipped: kernels add fields.

use std::collections::HashMap;

use super::summary::{InterfaceStats, PsiData, PsiStats};

/// `key value` lines (`memory.stat`, `cpu.stat`, `/proc/vmstat`, `memory.events`).
pub fn flat_keyed(text: &str) -> HashMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let key = it.next()?;
            let value = it.next()?.parse().ok()?;
            Some((key.to_string(), value))
        })
        .collect()
}

/// A single number (`memory.current`, `cpuacct.usage`, `pids.current`); `max` and
/// unparsable text are `None`.
pub fn single_value(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// A pressure file (`cpu.pressure`, `/proc/pressure/memory`):
/// `some avg10=0.00 avg60=0.00 avg300=0.00 total=0` and the same for `full`. A file
/// without a `some` line is not PSI (`None`); a missing `full` line (cpu before 5.13)
/// is zeros, as the kernel means it.
pub fn psi(text: &str) -> Option<PsiStats> {
    let mut some = None;
    let mut full = PsiData::default();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let kind = fields.next();
        let mut data = PsiData::default();
        for f in fields {
            let Some((k, v)) = f.split_once('=') else {
                continue;
            };
            match k {
                "avg10" => data.avg10 = v.parse().ok()?,
                "avg60" => data.avg60 = v.parse().ok()?,
                "avg300" => data.avg300 = v.parse().ok()?,
                "total" => data.total = v.parse().ok()?,
                _ => {}
            }
        }
        match kind {
            Some("some") => some = Some(data),
            Some("full") => full = data,
            _ => {}
        }
    }
    Some(PsiStats { full, some: some? })
}

/// Bytes read and written, summed over devices.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoBytes {
    pub read: u64,
    pub write: u64,
}

/// cgroup v2 `io.stat`: `8:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0` per device.
pub fn io_stat_v2(text: &str) -> IoBytes {
    let mut out = IoBytes::default();
    for f in text.split_whitespace() {
        match f.split_once('=') {
            Some(("rbytes", v)) => out.read += v.parse::<u64>().unwrap_or(0),
            Some(("wbytes", v)) => out.write += v.parse::<u64>().unwrap_or(0),
            _ => {}
        }
    }
    out
}

/// cgroup v1 `blkio.throttle.io_service_bytes[_recursive]`: `8:0 Read 4096` per device
/// and operation, and a `Total` line (skipped).
pub fn blkio_v1(text: &str) -> IoBytes {
    let mut out = IoBytes::default();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if let [_dev, op, value] = f.as_slice() {
            let value: u64 = value.parse().unwrap_or(0);
            match *op {
                "Read" => out.read += value,
                "Write" => out.write += value,
                _ => {}
            }
        }
    }
    out
}

/// The `cpu` line of /proc/stat: busy time (all but idle and iowait) in clock ticks.
pub fn proc_stat_busy_ticks(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is inside user/nice).
    let total: u64 = ticks.iter().take(8).sum();
    let idle = ticks.get(3).copied().unwrap_or(0) + ticks.get(4).copied().unwrap_or(0);
    Some(total.saturating_sub(idle))
}

/// /proc/meminfo as bytes (`MemTotal: 123 kB` → `MemTotal` → 123·1024).
pub fn meminfo(text: &str) -> HashMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let (key, rest) = l.split_once(':')?;
            let mut it = rest.split_whitespace();
            let n: u64 = it.next()?.parse().ok()?;
            let factor = if it.next() == Some("kB") { 1024 } else { 1 };
            Some((key.to_string(), n.saturating_mul(factor)))
        })
        .collect()
}

/// /proc/net/dev: every interface's receive and transmit bytes and errors, `lo` left
/// out (the kubelet counts no loopback traffic).
pub fn net_dev(text: &str) -> Vec<InterfaceStats> {
    text.lines()
        .skip(2)
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            let name = name.trim();
            if name == "lo" {
                return None;
            }
            let v: Vec<u64> = rest
                .split_whitespace()
                .map(|x| x.parse().unwrap_or(0))
                .collect();
            // rx: bytes packets errs drop fifo frame compressed multicast; tx: the same 8.
            Some(InterfaceStats {
                name: name.to_string(),
                rx_bytes: v.first().copied(),
                rx_errors: v.get(2).copied(),
                tx_bytes: v.get(8).copied(),
                tx_errors: v.get(10).copied(),
            })
        })
        .collect()
}

/// The memory cgroup's working set as the kubelet (cadvisor) defines it: usage minus
/// the inactive file cache, never below zero.
pub fn working_set(usage: u64, inactive_file: u64) -> u64 {
    usage.saturating_sub(inactive_file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psi_some_and_full_lines() {
        let p = psi("some avg10=1.50 avg60=0.25 avg300=0.00 total=12345\n\
                     full avg10=0.75 avg60=0.00 avg300=0.00 total=99\n")
        .unwrap();
        assert_eq!(p.some.avg10, 1.5);
        assert_eq!(p.some.avg60, 0.25);
        assert_eq!(p.some.total, 12345);
        assert_eq!(p.full.avg10, 0.75);
        assert_eq!(p.full.total, 99);
    }

    #[test]
    fn psi_without_full_is_zero_full_and_garbage_is_none() {
        let p = psi("some avg10=0.10 avg60=0.00 avg300=0.00 total=7\n").unwrap();
        assert_eq!(p.full, PsiData::default());
        assert_eq!(p.some.total, 7);
        assert!(psi("").is_none());
        assert!(psi("some avg10=x avg60=0 avg300=0 total=1").is_none());
    }

    #[test]
    fn memory_stat_v2_and_v1_are_flat_keyed() {
        let v2 = flat_keyed("anon 4096\nfile 8192\ninactive_file 1024\npgfault 10\npgmajfault 1\n");
        assert_eq!(v2["anon"], 4096);
        assert_eq!(v2["inactive_file"], 1024);
        let v1 = flat_keyed("cache 0\nrss 2\ntotal_rss 40960\ntotal_inactive_file 5\n");
        assert_eq!(v1["total_rss"], 40960);
        assert_eq!(working_set(100, v1["total_inactive_file"]), 95);
        assert_eq!(working_set(1, 5), 0);
    }

    #[test]
    fn cpu_stat_v2_usage_usec() {
        let s = flat_keyed("usage_usec 2500\nuser_usec 2000\nsystem_usec 500\nnr_periods 0\n");
        assert_eq!(s["usage_usec"], 2500);
    }

    #[test]
    fn single_values_and_max() {
        assert_eq!(single_value("123\n"), Some(123));
        assert_eq!(single_value("max\n"), None);
    }

    #[test]
    fn io_stat_v2_sums_devices() {
        let io = io_stat_v2(
            "8:0 rbytes=100 wbytes=200 rios=1 wios=2 dbytes=0 dios=0\n\
             253:1 rbytes=5 wbytes=7 rios=1 wios=1 dbytes=0 dios=0\n",
        );
        assert_eq!(
            io,
            IoBytes {
                read: 105,
                write: 207
            }
        );
    }

    #[test]
    fn blkio_v1_sums_reads_and_writes_not_totals() {
        let io = blkio_v1(
            "8:0 Read 4096\n8:0 Write 8192\n8:0 Sync 0\n8:0 Async 12288\n8:0 Total 12288\n\
             8:16 Write 1\nTotal 12289\n",
        );
        assert_eq!(
            io,
            IoBytes {
                read: 4096,
                write: 8193
            }
        );
    }

    #[test]
    fn proc_stat_busy_leaves_out_idle_and_iowait() {
        let text = "cpu  100 5 50 1000 20 3 2 1 0 0\ncpu0 50 2 25 500 10 1 1 0 0 0\n";
        assert_eq!(proc_stat_busy_ticks(text), Some(100 + 5 + 50 + 3 + 2 + 1));
        assert_eq!(proc_stat_busy_ticks("intr 1"), None);
    }

    #[test]
    fn meminfo_in_bytes() {
        let m = meminfo("MemTotal:       2048 kB\nMemFree: 1024 kB\nHugePages_Total: 0\n");
        assert_eq!(m["MemTotal"], 2048 * 1024);
        assert_eq!(m["HugePages_Total"], 0);
    }

    #[test]
    fn net_dev_skips_headers_and_loopback() {
        let text = "Inter-|   Receive                                                |  Transmit\n \
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
lo:     100       1    0    0    0     0          0         0      100       1    0    0    0     0       0          0\n  \
eth0:    1500      10    2    0    0     0          0         0      700       7    3    0    0     0       0          0\n";
        let i = net_dev(text);
        assert_eq!(i.len(), 1);
        assert_eq!(i[0].name, "eth0");
        assert_eq!(i[0].rx_bytes, Some(1500));
        assert_eq!(i[0].rx_errors, Some(2));
        assert_eq!(i[0].tx_bytes, Some(700));
        assert_eq!(i[0].tx_errors, Some(3));
    }
}
