//! CPU counter readings kept between samples, for the CPU rates (`usageNanoCores`).
//!
//! The background housekeeping reads only the CPU counters (a file per cgroup); the full
//! sample (memory, disk usage, network) is taken when a request asks for statistics. A
//! rate needs an earlier reading of the same counter: the newest one at least
//! [`MIN_RATE_WINDOW`] old, so that a request right after a housekeeping reading still
//! gets a rate over a meaningful window (at most [`super::HOUSEKEEPING_INTERVAL`] plus
//! that, while the daemon runs).

use std::collections::HashMap;
use std::time::Duration;

use podhost_model::stats::nano_cores;

/// The shortest window a CPU rate is computed over.
pub const MIN_RATE_WINDOW: Duration = Duration::from_secs(1);

/// A counter's value (ns of CPU) and when it was read (ns since the collector started).
pub type Reading = (u64, u64);

/// The last two readings of one counter that are at least [`MIN_RATE_WINDOW`] apart.
#[derive(Debug, Clone, Copy)]
struct Kept {
    older: Option<Reading>,
    newer: Reading,
}

/// Readings by counter key (a cgroup path, `/` for the node).
#[derive(Debug, Default)]
pub struct CpuReadings {
    kept: HashMap<String, Kept>,
}

/// One pass's readings: begun, recorded into while the pass reads, then finished.
#[derive(Debug)]
pub struct Pass {
    before: HashMap<String, Kept>,
    now: HashMap<String, Kept>,
}

impl CpuReadings {
    /// Starts a pass over every counter; counters the pass does not read are forgotten
    /// when it finishes (their cgroup is gone).
    pub fn begin(&mut self) -> Pass {
        Pass {
            before: std::mem::take(&mut self.kept),
            now: HashMap::new(),
        }
    }

    /// Keeps the pass's readings.
    pub fn finish(&mut self, pass: Pass) {
        self.kept = pass.now;
    }
}

impl Pass {
    /// Records `reading` of `key` and returns its rate in nanocores over the window since
    /// the newest earlier reading at least [`MIN_RATE_WINDOW`] old (`None` without one).
    pub fn record(&mut self, key: &str, reading: Reading) -> Option<u64> {
        let window = u64::try_from(MIN_RATE_WINDOW.as_nanos()).unwrap_or(u64::MAX);
        let old_enough = |r: &Reading| reading.1.saturating_sub(r.1) >= window;
        let Some(before) = self.before.get(key).copied() else {
            self.now.insert(
                key.to_string(),
                Kept {
                    older: None,
                    newer: reading,
                },
            );
            return None;
        };
        let base = Some(before.newer)
            .filter(old_enough)
            .or(before.older.filter(old_enough));
        let kept = if old_enough(&before.newer) {
            Kept {
                older: Some(before.newer),
                newer: reading,
            }
        } else {
            before
        };
        self.now.insert(key.to_string(), kept);
        base.and_then(|b| nano_cores(b, reading))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn pass_of(r: &mut CpuReadings, key: &str, reading: Reading) -> Option<u64> {
        let mut pass = r.begin();
        let rate = pass.record(key, reading);
        r.finish(pass);
        rate
    }

    #[test]
    fn a_rate_needs_an_earlier_reading_a_window_old() {
        let mut r = CpuReadings::default();
        assert_eq!(
            pass_of(&mut r, "/a", (0, 0)),
            None,
            "first reading: no rate"
        );
        // 0.2 s later: too short a window, and the reading is not kept as the base.
        assert_eq!(pass_of(&mut r, "/a", (S / 10, S / 5)), None);
        // 10 s after the first: half a core over the 10 s.
        assert_eq!(pass_of(&mut r, "/a", (5 * S, 10 * S)), Some(S / 2));
        // 0.1 s later: the rate is over the window from the first reading (>= 1 s).
        assert_eq!(
            pass_of(&mut r, "/a", (5 * S + S / 10, 10 * S + S / 10)),
            Some(
                u64::try_from(
                    u128::from(5 * S + S / 10) * u128::from(S) / u128::from(10 * S + S / 10)
                )
                .unwrap()
            )
        );
    }

    #[test]
    fn counters_not_read_in_a_pass_are_forgotten() {
        let mut r = CpuReadings::default();
        pass_of(&mut r, "/gone", (0, 0));
        pass_of(&mut r, "/other", (0, 2 * S));
        assert_eq!(
            pass_of(&mut r, "/gone", (S, 4 * S)),
            None,
            "forgotten: no base"
        );
    }
}
