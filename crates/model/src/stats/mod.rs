//! Node, pod and container statistics as pure data: the kubelet's Summary API types
//! (`summary`), the parsers of the kernel's statistics files (`parse`), the cadvisor
//! Prometheus text (`cadvisor`), the kubelet's resource metrics (`resource`), and the CPU rate between two samples.

pub mod cadvisor;
pub mod parse;
pub mod resource;
pub mod summary;

/// `usageNanoCores`: CPU nanoseconds used per wall-clock second between two samples
/// (`(usage_ns, at_ns)` each). `None` without a usable interval or when the counter
/// went backwards (the cgroup was recreated: a restarted container).
pub fn nano_cores(previous: (u64, u64), current: (u64, u64)) -> Option<u64> {
    let used = current.0.checked_sub(previous.0)?;
    let elapsed = current.1.checked_sub(previous.1).filter(|e| *e > 0)?;
    u64::try_from(u128::from(used) * 1_000_000_000 / u128::from(elapsed)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nano_cores_from_two_samples() {
        // Half a core: 0.5 s of CPU in 1 s.
        assert_eq!(
            nano_cores((1_000, 0), (500_001_000, 1_000_000_000)),
            Some(500_000_000)
        );
        assert_eq!(nano_cores((10, 5), (5, 10)), None);
        assert_eq!(nano_cores((10, 5), (20, 5)), None);
    }
}
