//! One probe of one container instance: when it is due and what its consecutive results
//! make of the container's result (the kubelet's prober worker, `worker.go`).
//!
//! A tracker lives as long as its container instance: a new instance (a restart) gets a
//! new tracker, which is how the kubelet's "reset on a new container ID" and "on hold
//! until a new container ID" come about here.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{ProbeKind, ProbeResult, ProbeTiming};

#[derive(Debug, Clone)]
pub struct ProbeTracker {
    kind: ProbeKind,
    timing: ProbeTiming,
    /// When the instance started; the initial delay counts from here.
    started_at: DateTime<Utc>,
    /// The container's result for this probe (what status and the core see).
    result: ProbeResult,
    /// The last raw result and how many times in a row it came.
    last_raw: ProbeResult,
    run: u32,
    /// When the last probe began; the next one is a period later.
    last_probe: Option<DateTime<Utc>>,
    /// A liveness or startup failure was reported: nothing more until a new instance.
    on_hold: bool,
}

impl ProbeTracker {
    pub fn new(kind: ProbeKind, timing: ProbeTiming, started_at: DateTime<Utc>) -> Self {
        Self {
            kind,
            timing,
            started_at,
            result: kind.initial_result(),
            last_raw: ProbeResult::Unknown,
            run: 0,
            last_probe: None,
            on_hold: false,
        }
    }

    pub fn kind(&self) -> ProbeKind {
        self.kind
    }

    pub fn timing(&self) -> &ProbeTiming {
        &self.timing
    }

    /// The container's current result for this probe.
    pub fn result(&self) -> ProbeResult {
        self.result
    }

    /// Whether a liveness/startup failure stopped this probe for the instance.
    pub fn on_hold(&self) -> bool {
        self.on_hold
    }

    /// The grace of the kill this probe's failure causes, when the probe sets its own.
    pub fn termination_grace(&self) -> Option<Duration> {
        self.timing.termination_grace
    }

    /// When the probe should run next, or `None` when it should not run: on hold, a
    /// startup probe once the container has started, liveness and readiness before it
    /// has (`container_started`: the startup probe succeeded, or there is none).
    pub fn next_due(&self, container_started: bool) -> Option<DateTime<Utc>> {
        if self.on_hold {
            return None;
        }
        let runs_now = match self.kind {
            ProbeKind::Startup => !container_started,
            ProbeKind::Liveness | ProbeKind::Readiness => container_started,
        };
        if !runs_now {
            return None;
        }
        let first = self.started_at + self.timing.initial_delay;
        Some(match self.last_probe {
            None => first,
            Some(last) => (last + self.timing.period).max(first),
        })
    }

    /// Folds in the result of the probe that began at `probed_at`; returns the
    /// container's new result when it changed.
    ///
    /// Results count only in consecutive runs reaching the success or failure
    /// threshold; an `Unknown` (the probe could not run) counts toward nothing. A
    /// liveness or startup failure puts the tracker on hold.
    pub fn on_result(&mut self, raw: ProbeResult, probed_at: DateTime<Utc>) -> Option<ProbeResult> {
        self.last_probe = Some(self.last_probe.map_or(probed_at, |l| l.max(probed_at)));
        if self.on_hold || raw == ProbeResult::Unknown {
            return None;
        }
        if raw == self.last_raw {
            self.run = self.run.saturating_add(1);
        } else {
            self.last_raw = raw;
            self.run = 1;
        }
        let threshold = match raw {
            ProbeResult::Success => self.timing.success_threshold,
            _ => self.timing.failure_threshold,
        };
        if self.run < threshold {
            return None;
        }
        let changed = raw != self.result;
        self.result = raw;
        if raw == ProbeResult::Failure && self.kind.failure_restarts() {
            self.on_hold = true;
            self.run = 0;
        }
        changed.then_some(raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ProbeResult::{Failure, Success, Unknown};

    fn t0() -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000, 0).unwrap()
    }

    fn secs(n: i64) -> chrono::TimeDelta {
        chrono::TimeDelta::seconds(n)
    }

    fn tracker(kind: ProbeKind, success: u32, failure: u32) -> ProbeTracker {
        let timing = ProbeTiming {
            success_threshold: success,
            failure_threshold: failure,
            ..ProbeTiming::default()
        };
        ProbeTracker::new(kind, timing, t0())
    }

    /// Feeds results one period apart; returns what each reported.
    fn feed(t: &mut ProbeTracker, results: &[ProbeResult]) -> Vec<Option<ProbeResult>> {
        results
            .iter()
            .enumerate()
            .map(|(i, r)| t.on_result(*r, t0() + secs(10 * i64::try_from(i).unwrap())))
            .collect()
    }

    #[test]
    fn initial_results_are_the_kubelets() {
        assert_eq!(tracker(ProbeKind::Readiness, 1, 3).result(), Failure);
        assert_eq!(tracker(ProbeKind::Liveness, 1, 3).result(), Success);
        assert_eq!(tracker(ProbeKind::Startup, 1, 3).result(), Unknown);
    }

    #[test]
    fn readiness_needs_consecutive_successes_and_failures() {
        let mut t = tracker(ProbeKind::Readiness, 2, 3);
        let got = feed(
            &mut t,
            &[
                Success, Failure, Success, Success, Failure, Failure, Success, Failure, Failure,
                Failure,
            ],
        );
        assert_eq!(
            got,
            vec![
                None,
                None,
                None,
                Some(Success),
                None,
                None,
                None,
                None,
                None,
                Some(Failure)
            ]
        );
        assert!(!t.on_hold(), "readiness never holds");
        assert!(t.next_due(true).is_some());
    }

    #[test]
    fn readiness_reports_only_changes() {
        let mut t = tracker(ProbeKind::Readiness, 1, 1);
        assert_eq!(
            feed(&mut t, &[Failure, Success, Success, Failure]),
            vec![None, Some(Success), None, Some(Failure)]
        );
    }

    #[test]
    fn liveness_failure_after_threshold_reports_and_holds() {
        let mut t = tracker(ProbeKind::Liveness, 1, 3);
        let got = feed(
            &mut t,
            &[Failure, Failure, Success, Failure, Failure, Failure],
        );
        assert_eq!(got, vec![None, None, None, None, None, Some(Failure)]);
        assert!(t.on_hold());
        assert_eq!(t.next_due(true), None, "held until a new instance");
        assert_eq!(
            t.on_result(Success, t0() + secs(100)),
            None,
            "results on hold are ignored"
        );
        assert_eq!(t.result(), Failure);
    }

    #[test]
    fn startup_success_reports_started_and_failure_holds() {
        let mut t = tracker(ProbeKind::Startup, 1, 2);
        assert_eq!(feed(&mut t, &[Failure, Success]), vec![None, Some(Success)]);
        assert_eq!(
            t.next_due(true),
            None,
            "the startup probe stops once started"
        );
        let mut t = tracker(ProbeKind::Startup, 1, 2);
        assert_eq!(feed(&mut t, &[Failure, Failure]), vec![None, Some(Failure)]);
        assert!(t.on_hold());
        assert_eq!(t.next_due(false), None);
    }

    #[test]
    fn unknown_counts_toward_nothing() {
        let mut t = tracker(ProbeKind::Liveness, 1, 2);
        assert_eq!(
            feed(&mut t, &[Failure, Unknown, Failure]),
            vec![None, None, Some(Failure)]
        );
        let mut t = tracker(ProbeKind::Readiness, 1, 1);
        assert_eq!(feed(&mut t, &[Unknown, Unknown]), vec![None, None]);
        assert_eq!(t.result(), Failure);
    }

    #[test]
    fn liveness_and_readiness_wait_for_started_and_startup_stops_then() {
        for kind in [ProbeKind::Liveness, ProbeKind::Readiness] {
            let t = tracker(kind, 1, 3);
            assert_eq!(t.next_due(false), None, "{kind:?} before started");
            assert_eq!(t.next_due(true), Some(t0()));
        }
        let t = tracker(ProbeKind::Startup, 1, 3);
        assert_eq!(t.next_due(false), Some(t0()));
        assert_eq!(t.next_due(true), None);
    }

    #[test]
    fn first_probe_after_the_initial_delay_then_every_period() {
        let timing = ProbeTiming {
            initial_delay: Duration::from_secs(15),
            period: Duration::from_secs(4),
            ..ProbeTiming::default()
        };
        let mut t = ProbeTracker::new(ProbeKind::Readiness, timing, t0());
        assert_eq!(t.next_due(true), Some(t0() + secs(15)));
        t.on_result(Failure, t0() + secs(15));
        assert_eq!(t.next_due(true), Some(t0() + secs(19)));
        // A late probe: the next one is a period after it began.
        t.on_result(Failure, t0() + secs(30));
        assert_eq!(t.next_due(true), Some(t0() + secs(34)));
    }

    #[test]
    fn an_early_result_never_moves_the_first_probe_before_the_delay() {
        let timing = ProbeTiming {
            initial_delay: Duration::from_secs(60),
            period: Duration::from_secs(1),
            ..ProbeTiming::default()
        };
        let mut t = ProbeTracker::new(ProbeKind::Liveness, timing, t0());
        t.on_result(Success, t0());
        assert_eq!(t.next_due(true), Some(t0() + secs(60)));
    }

    #[test]
    fn the_probe_level_grace_is_exposed() {
        let timing = ProbeTiming {
            termination_grace: Some(Duration::from_secs(3)),
            ..ProbeTiming::default()
        };
        let t = ProbeTracker::new(ProbeKind::Liveness, timing, t0());
        assert_eq!(t.termination_grace(), Some(Duration::from_secs(3)));
        assert_eq!(tracker(ProbeKind::Liveness, 1, 3).termination_grace(), None);
    }
}
