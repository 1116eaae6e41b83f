//! CPU arithmetic of the kubelet's cgroups (kubelet-semantics §8), in one place.

/// The CFS period podhost uses, in microseconds (the kubelet's default).
pub const CPU_PERIOD_US: u64 = 100_000;
/// The smallest quota the kubelet writes, in microseconds.
pub const MIN_QUOTA_US: i64 = 1_000;
pub const MIN_SHARES: u64 = 2;
pub const MAX_SHARES: u64 = 262_144;

/// `MilliCPUToShares`: 0 → 2, else milli·1024/1000 clamped to [2, 262144].
pub fn milli_cpu_to_shares(milli: i64) -> u64 {
    if milli <= 0 {
        return MIN_SHARES;
    }
    (super::convert::non_negative_u64(milli).saturating_mul(1024) / 1000)
        .clamp(MIN_SHARES, MAX_SHARES)
}

/// `MilliCPUToQuota`: no limit → none; else milli·period/1000, at least 1000 µs.
pub fn milli_cpu_to_quota(milli: i64) -> Option<i64> {
    if milli <= 0 {
        return None;
    }
    Some((milli * CPU_PERIOD_US as i64 / 1000).max(MIN_QUOTA_US))
}

/// cgroup v2 `cpu.weight` from v1 shares, with the mapping libcontainer 0.7 (and runc ≥
/// 1.3 / opencontainers/cgroups ≥ 0.0.3) uses for containers: quadratic in log2, so that
/// 1024 shares → 100, the v2 default. podhost uses the same mapping for pod and QoS
/// cgroups, so that siblings compare on one scale (the kubelet's linear formula would
/// give 39 for 1024 shares there).
pub fn shares_to_weight(shares: u64) -> u64 {
    if shares <= MIN_SHARES {
        return 1;
    }
    if shares >= MAX_SHARES {
        return 10_000;
    }
    let l = (shares as f64).log2();
    let exponent = (l * l + 125.0 * l) / 612.0 - 7.0 / 34.0;
    super::convert::f64_to_u64_saturating(10f64.powf(exponent).ceil()).clamp(1, 10_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares() {
        assert_eq!(milli_cpu_to_shares(0), 2);
        assert_eq!(milli_cpu_to_shares(1), 2);
        assert_eq!(milli_cpu_to_shares(1000), 1024);
        assert_eq!(milli_cpu_to_shares(250), 256);
        assert_eq!(milli_cpu_to_shares(1_000_000), 262_144);
    }

    #[test]
    fn quota() {
        assert_eq!(milli_cpu_to_quota(0), None);
        assert_eq!(milli_cpu_to_quota(500), Some(50_000));
        assert_eq!(milli_cpu_to_quota(5), Some(1_000), "min quota");
        assert_eq!(milli_cpu_to_quota(2500), Some(250_000));
    }

    #[test]
    fn weight_matches_runc_mapping() {
        assert_eq!(shares_to_weight(2), 1);
        assert_eq!(shares_to_weight(1024), 100);
        assert_eq!(shares_to_weight(262_144), 10_000);
        // Cross-checked with the formula evaluated independently (Python).
        assert_eq!(shares_to_weight(256), 35);
        assert_eq!(shares_to_weight(512), 59);
        assert_eq!(shares_to_weight(2048), 174);
        let mut last = 0;
        for s in (2..=262_144).step_by(97) {
            let w = shares_to_weight(s);
            assert!(w >= last && (1..=10_000).contains(&w), "monotonic at {s}");
            last = w;
        }
    }
}
