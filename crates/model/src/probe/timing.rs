//! A probe's timing and thresholds with the API's defaults (`SetDefaults_Probe`).

use std::time::Duration;

use k8s_openapi::api::core::v1::Probe;

use crate::convert::non_negative_u64;

/// When and how often a probe runs, and how many consecutive results count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeTiming {
    pub initial_delay: Duration,
    pub timeout: Duration,
    pub period: Duration,
    pub success_threshold: u32,
    pub failure_threshold: u32,
    /// The probe-level `terminationGracePeriodSeconds`: the grace of the kill a failed
    /// liveness or startup probe causes, instead of the pod's.
    pub termination_grace: Option<Duration>,
}

impl Default for ProbeTiming {
    fn default() -> Self {
        Self {
            initial_delay: Duration::ZERO,
            timeout: Duration::from_secs(1),
            period: Duration::from_secs(10),
            success_threshold: 1,
            failure_threshold: 3,
            termination_grace: None,
        }
    }
}

impl ProbeTiming {
    /// The probe's timing; unset or zero fields take the API's defaults (the API server
    /// defaults a zero as an unset field), negative ones too (validation refuses them).
    pub fn of(probe: &Probe) -> Self {
        let d = Self::default();
        let secs = |v: Option<i32>, default: Duration| match v {
            Some(s) if s > 0 => Duration::from_secs(non_negative_u64(i64::from(s))),
            _ => default,
        };
        let count = |v: Option<i32>, default: u32| match v {
            Some(n) if n > 0 => u32::try_from(n).unwrap_or(default),
            _ => default,
        };
        Self {
            initial_delay: secs(probe.initial_delay_seconds, d.initial_delay),
            timeout: secs(probe.timeout_seconds, d.timeout),
            period: secs(probe.period_seconds, d.period),
            success_threshold: count(probe.success_threshold, d.success_threshold),
            failure_threshold: count(probe.failure_threshold, d.failure_threshold),
            termination_grace: probe
                .termination_grace_period_seconds
                .map(|s| Duration::from_secs(non_negative_u64(s))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_probe_takes_the_api_defaults() {
        let t = ProbeTiming::of(&Probe::default());
        assert_eq!(t.timeout, Duration::from_secs(1));
        assert_eq!(t.period, Duration::from_secs(10));
        assert_eq!(t.success_threshold, 1);
        assert_eq!(t.failure_threshold, 3);
        assert_eq!(t.initial_delay, Duration::ZERO);
        assert_eq!(t.termination_grace, None);
    }

    #[test]
    fn zero_is_defaulted_as_the_api_server_does_and_set_values_are_kept() {
        let t = ProbeTiming::of(&Probe {
            timeout_seconds: Some(0),
            period_seconds: Some(0),
            success_threshold: Some(0),
            failure_threshold: Some(0),
            ..Probe::default()
        });
        assert_eq!(t, ProbeTiming::default());
        let t = ProbeTiming::of(&Probe {
            initial_delay_seconds: Some(5),
            timeout_seconds: Some(3),
            period_seconds: Some(2),
            success_threshold: Some(2),
            failure_threshold: Some(7),
            termination_grace_period_seconds: Some(4),
            ..Probe::default()
        });
        assert_eq!(t.initial_delay, Duration::from_secs(5));
        assert_eq!(t.timeout, Duration::from_secs(3));
        assert_eq!(t.period, Duration::from_secs(2));
        assert_eq!((t.success_threshold, t.failure_threshold), (2, 7));
        assert_eq!(t.termination_grace, Some(Duration::from_secs(4)));
    }
}
