//! A container's memory counters in whichever hierarchy counts them: `memory.events`,
//! `memory.peak` and `memory.max` of its cgroup v2 directory, or, in the v1 memory
//! hierarchy, the `oom_kill` line of `memory.oom_control` (kernel 4.13 and later),
//! `memory.max_usage_in_bytes` and `memory.limit_in_bytes`.

use std::path::Path;

use super::cgroup_v2::{MemoryEvents, read_memory_events, read_number};

/// v1's "no limit": the page counter's maximum in bytes (9223372036854771712 with 4 KiB
/// pages); anything this large is not a limit anyone set.
const V1_UNLIMITED_FROM: u64 = 1 << 62;

/// The OOM counters of the container's memory cgroup `dir` (v2 or v1). `None` when the
/// directory counts nothing (gone, or a v1 kernel before 4.13 without `oom_kill`).
pub fn read_oom_counters(dir: &Path) -> Option<MemoryEvents> {
    read_memory_events(dir).or_else(|| {
        std::fs::read_to_string(dir.join("memory.oom_control"))
            .ok()
            .and_then(|t| parse_oom_control(&t))
    })
}

/// The v1 `memory.oom_control` text as [`MemoryEvents`]: its `oom_kill` count (v1 has
/// no group kill); `None` without that line.
pub fn parse_oom_control(text: &str) -> Option<MemoryEvents> {
    let kills = text.lines().find_map(|l| {
        let (key, value) = l.split_once(char::is_whitespace)?;
        (key == "oom_kill").then(|| value.trim().parse::<u64>().ok())?
    })?;
    Some(MemoryEvents {
        oom_kill: kills,
        ..MemoryEvents::default()
    })
}

/// The container's peak memory use in bytes.
pub fn read_peak(dir: &Path) -> Option<u64> {
    read_number(dir, "memory.peak").or_else(|| read_number(dir, "memory.max_usage_in_bytes"))
}

/// The container's memory limit in bytes; `None` when it has none.
pub fn read_limit(dir: &Path) -> Option<u64> {
    if dir.join("memory.max").exists() {
        return read_number(dir, "memory.max");
    }
    read_number(dir, "memory.limit_in_bytes").filter(|l| *l < V1_UNLIMITED_FROM)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oom_control_of_a_v1_cgroup_after_one_kill() {
        let text = "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n";
        assert_eq!(
            parse_oom_control(text),
            Some(MemoryEvents {
                oom_kill: 1,
                ..MemoryEvents::default()
            })
        );
    }

    #[test]
    fn oom_control_of_an_old_kernel_counts_nothing() {
        assert_eq!(parse_oom_control("oom_kill_disable 0\nunder_oom 0\n"), None);
    }

    #[test]
    fn v1_files_give_the_counters_the_peak_and_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::write(
            p.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
        )
        .unwrap();
        std::fs::write(p.join("memory.max_usage_in_bytes"), "33554432\n").unwrap();
        std::fs::write(p.join("memory.limit_in_bytes"), "33554432\n").unwrap();
        assert_eq!(read_oom_counters(p).map(|e| e.oom_kill), Some(2));
        assert_eq!(read_peak(p), Some(32 << 20));
        assert_eq!(read_limit(p), Some(32 << 20));
        std::fs::write(p.join("memory.limit_in_bytes"), "9223372036854771712\n").unwrap();
        assert_eq!(read_limit(p), None, "v1's unlimited is no limit");
    }

    #[test]
    fn v2_files_win_where_they_exist() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::write(
            p.join("memory.events"),
            "max 3\noom 1\noom_kill 1\noom_group_kill 1\n",
        )
        .unwrap();
        std::fs::write(p.join("memory.peak"), "100\n").unwrap();
        std::fs::write(p.join("memory.max"), "max\n").unwrap();
        assert_eq!(read_oom_counters(p).map(|e| e.oom_group_kill), Some(1));
        assert_eq!(read_peak(p), Some(100));
        assert_eq!(read_limit(p), None);
    }
}
