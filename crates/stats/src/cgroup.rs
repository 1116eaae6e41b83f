//! One cgroup's numbers, from cgroup v2 (one hierarchy at /sys/fs/cgroup) or v1/hybrid
//! (a hierarchy per controller: cpuacct, memory, blkio, pids). v1 has no per-cgroup
//! pressure files, so there the PSI fields are `None` (absent from the JSON), never zero.

use std::path::{Path, PathBuf};

use podhost_model::stats::parse::{
    IoBytes, blkio_v1, flat_keyed, io_stat_v2, psi, single_value, working_set,
};
use podhost_model::stats::summary::PsiStats;

const MOUNT: &str = "/sys/fs/cgroup";

/// How this host's cgroups are mounted, as far as reading them goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupLayout {
    /// cgroup2 at /sys/fs/cgroup.
    V2,
    /// v1 controllers at /sys/fs/cgroup/<controller>.
    V1,
}

impl CgroupLayout {
    pub fn detect() -> Self {
        if Path::new(MOUNT).join("cgroup.controllers").exists() {
            Self::V2
        } else {
            Self::V1
        }
    }
}

/// What one read of a cgroup found; `None` = the file was not there or not readable.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CgroupSample {
    pub cpu_usage_ns: Option<u64>,
    pub memory_usage: Option<u64>,
    pub memory_working_set: Option<u64>,
    pub memory_rss: Option<u64>,
    /// The memory limit (`None` = unlimited).
    pub memory_limit: Option<u64>,
    pub page_faults: Option<u64>,
    pub major_page_faults: Option<u64>,
    pub io: Option<IoBytes>,
    pub processes: Option<u64>,
    pub cpu_psi: Option<PsiStats>,
    pub memory_psi: Option<PsiStats>,
    pub io_psi: Option<PsiStats>,
}

/// Reads cgroups by their path relative to every hierarchy (`/…/kubepods/…/pod<uid>`).
#[derive(Debug, Clone)]
pub struct CgroupReader {
    layout: CgroupLayout,
    mount: PathBuf,
}

/// v1 reports "no limit" as a huge page-aligned number (`PAGE_COUNTER_MAX` pages).
const V1_UNLIMITED: u64 = 1 << 62;

impl CgroupReader {
    pub fn new(layout: CgroupLayout) -> Self {
        Self::with_mount(layout, MOUNT)
    }

    /// A reader of cgroup files under `mount` (tests point it at a fake tree).
    pub fn with_mount(layout: CgroupLayout, mount: impl Into<PathBuf>) -> Self {
        Self {
            layout,
            mount: mount.into(),
        }
    }

    pub fn layout(&self) -> CgroupLayout {
        self.layout
    }

    /// The cgroup's directory in the hierarchy that holds `controller` (v1), or in the
    /// one hierarchy (v2).
    fn dir(&self, controller: &str, rel: &str) -> PathBuf {
        let rel = rel.trim_start_matches('/');
        match self.layout {
            CgroupLayout::V2 => self.mount.join(rel),
            CgroupLayout::V1 => self.mount.join(controller).join(rel),
        }
    }

    /// Whether the cgroup exists (its cpu accounting directory does).
    pub fn exists(&self, rel: &str) -> bool {
        self.dir("cpuacct", rel).is_dir()
    }

    fn read(&self, controller: &str, rel: &str, file: &str) -> Option<String> {
        std::fs::read_to_string(self.dir(controller, rel).join(file)).ok()
    }

    /// The cgroup's CPU usage counter alone (ns), one file read.
    pub fn cpu_usage_ns(&self, rel: &str) -> Option<u64> {
        match self.layout {
            CgroupLayout::V2 => self
                .read("", rel, "cpu.stat")
                .and_then(|t| flat_keyed(&t).get("usage_usec").copied())
                .map(|us| us.saturating_mul(1000)),
            CgroupLayout::V1 => self
                .read("cpuacct", rel, "cpuacct.usage")
                .and_then(|t| single_value(&t)),
        }
    }

    pub fn sample(&self, rel: &str) -> CgroupSample {
        match self.layout {
            CgroupLayout::V2 => self.sample_v2(rel),
            CgroupLayout::V1 => self.sample_v1(rel),
        }
    }

    fn sample_v2(&self, rel: &str) -> CgroupSample {
        let cpu = self.read("", rel, "cpu.stat").map(|t| flat_keyed(&t));
        let stat = self.read("", rel, "memory.stat").map(|t| flat_keyed(&t));
        let usage = self
            .read("", rel, "memory.current")
            .and_then(|t| single_value(&t));
        let stat_value = |k: &str| stat.as_ref().and_then(|s| s.get(k).copied());
        CgroupSample {
            cpu_usage_ns: cpu
                .and_then(|c| c.get("usage_usec").copied())
                .map(|us| us.saturating_mul(1000)),
            memory_usage: usage,
            memory_working_set: usage
                .map(|u| working_set(u, stat_value("inactive_file").unwrap_or(0))),
            memory_rss: stat_value("anon"),
            memory_limit: self
                .read("", rel, "memory.max")
                .and_then(|t| single_value(&t)),
            page_faults: stat_value("pgfault"),
            major_page_faults: stat_value("pgmajfault"),
            io: self.read("", rel, "io.stat").map(|t| io_stat_v2(&t)),
            processes: self
                .read("", rel, "pids.current")
                .and_then(|t| single_value(&t)),
            cpu_psi: self.read("", rel, "cpu.pressure").and_then(|t| psi(&t)),
            memory_psi: self.read("", rel, "memory.pressure").and_then(|t| psi(&t)),
            io_psi: self.read("", rel, "io.pressure").and_then(|t| psi(&t)),
        }
    }

    fn sample_v1(&self, rel: &str) -> CgroupSample {
        let stat = self
            .read("memory", rel, "memory.stat")
            .map(|t| flat_keyed(&t));
        let usage = self
            .read("memory", rel, "memory.usage_in_bytes")
            .and_then(|t| single_value(&t));
        // The `total_` keys count the whole subtree (a pod's containers), as usage does.
        let stat_value = |k: &str| stat.as_ref().and_then(|s| s.get(k).copied());
        let io = self
            .read("blkio", rel, "blkio.throttle.io_service_bytes_recursive")
            .or_else(|| self.read("blkio", rel, "blkio.throttle.io_service_bytes"))
            .map(|t| blkio_v1(&t));
        CgroupSample {
            cpu_usage_ns: self
                .read("cpuacct", rel, "cpuacct.usage")
                .and_then(|t| single_value(&t)),
            memory_usage: usage,
            memory_working_set: usage
                .map(|u| working_set(u, stat_value("total_inactive_file").unwrap_or(0))),
            memory_rss: stat_value("total_rss"),
            memory_limit: self
                .read("memory", rel, "memory.limit_in_bytes")
                .and_then(|t| single_value(&t))
                .filter(|l| *l < V1_UNLIMITED),
            page_faults: stat_value("total_pgfault"),
            major_page_faults: stat_value("total_pgmajfault"),
            io,
            processes: self
                .read("pids", rel, "pids.current")
                .and_then(|t| single_value(&t)),
            cpu_psi: None,
            memory_psi: None,
            io_psi: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, file: &str, text: &str) {
        let dir = root.join(rel);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(file), text).unwrap();
    }

    #[test]
    fn v2_files_to_a_sample() {
        let tmp = tempfile::tempdir().unwrap();
        let rel = "x/kubepods/podu/web";
        write(
            tmp.path(),
            rel,
            "cpu.stat",
            "usage_usec 1500\nuser_usec 1000\n",
        );
        write(tmp.path(), rel, "memory.current", "10000\n");
        write(
            tmp.path(),
            rel,
            "memory.stat",
            "anon 6000\ninactive_file 3000\npgfault 7\npgmajfault 2\n",
        );
        write(tmp.path(), rel, "memory.max", "max\n");
        write(
            tmp.path(),
            rel,
            "io.stat",
            "8:0 rbytes=10 wbytes=20 rios=1 wios=1\n",
        );
        write(tmp.path(), rel, "pids.current", "3\n");
        write(
            tmp.path(),
            rel,
            "memory.pressure",
            "some avg10=2.00 avg60=1.00 avg300=0.50 total=77\nfull avg10=1.00 avg60=0.00 avg300=0.00 total=11\n",
        );
        let s = CgroupReader::with_mount(CgroupLayout::V2, tmp.path()).sample(&format!("/{rel}"));
        assert_eq!(s.cpu_usage_ns, Some(1_500_000));
        assert_eq!(s.memory_usage, Some(10000));
        assert_eq!(s.memory_working_set, Some(7000));
        assert_eq!(s.memory_rss, Some(6000));
        assert_eq!(s.memory_limit, None);
        assert_eq!(s.page_faults, Some(7));
        assert_eq!(s.major_page_faults, Some(2));
        assert_eq!(
            s.io,
            Some(IoBytes {
                read: 10,
                write: 20
            })
        );
        assert_eq!(s.processes, Some(3));
        assert_eq!(s.memory_psi.unwrap().some.total, 77);
        assert_eq!(s.cpu_psi, None, "no cpu.pressure file, no cpu PSI");
    }

    #[test]
    fn v1_files_to_a_sample_without_psi() {
        let tmp = tempfile::tempdir().unwrap();
        let rel = "x/kubepods/podu";
        write(
            tmp.path(),
            &format!("cpuacct/{rel}"),
            "cpuacct.usage",
            "123456\n",
        );
        write(
            tmp.path(),
            &format!("memory/{rel}"),
            "memory.usage_in_bytes",
            "9000\n",
        );
        write(
            tmp.path(),
            &format!("memory/{rel}"),
            "memory.stat",
            "rss 1\ninactive_file 1\ntotal_rss 4000\ntotal_inactive_file 1000\ntotal_pgfault 5\ntotal_pgmajfault 0\n",
        );
        write(
            tmp.path(),
            &format!("memory/{rel}"),
            "memory.limit_in_bytes",
            "9223372036854771712\n",
        );
        write(
            tmp.path(),
            &format!("blkio/{rel}"),
            "blkio.throttle.io_service_bytes",
            "8:0 Read 100\n8:0 Write 200\n8:0 Total 300\nTotal 300\n",
        );
        let r = CgroupReader::with_mount(CgroupLayout::V1, tmp.path());
        assert!(r.exists(rel));
        let s = r.sample(rel);
        assert_eq!(s.cpu_usage_ns, Some(123456));
        assert_eq!(s.memory_working_set, Some(8000));
        assert_eq!(s.memory_rss, Some(4000));
        assert_eq!(s.memory_limit, None);
        assert_eq!(
            s.io,
            Some(IoBytes {
                read: 100,
                write: 200
            })
        );
        assert_eq!(s.processes, None);
        assert!(s.cpu_psi.is_none() && s.memory_psi.is_none() && s.io_psi.is_none());
    }
}
