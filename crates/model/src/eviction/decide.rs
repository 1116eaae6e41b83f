//! One round of the eviction manager, pure (`eviction_manager.go` `synchronize`, up to
//! choosing what to reclaim): which thresholds are met (soft ones only after their
//! grace period, a threshold acted on stays met until its minimum reclaim is back),
//! which node conditions hold (kept for the pressure transition period after the
//! signal recovered), and which threshold to act on.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::threshold::{NodeCondition, Signal, Threshold};

/// One signal's reading: what is available, of how much.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    pub available: i64,
    pub capacity: i64,
}

/// The readings of one round; a signal that could not be read is absent (its
/// thresholds are then not met).
pub type Observations = BTreeMap<Signal, Observation>;

/// Whether `t` is met by `observations`; with `enforce_min_reclaim`, the threshold's
/// value is raised by its minimum reclaim (a threshold being resolved).
pub fn is_met(t: &Threshold, observations: &Observations, enforce_min_reclaim: bool) -> bool {
    let Some(o) = observations.get(&t.signal) else {
        return false;
    };
    let mut value = t.value.quantity(o.capacity);
    if enforce_min_reclaim && let Some(r) = t.min_reclaim {
        value = value.saturating_add(r.quantity(o.capacity));
    }
    o.available < value
}

/// A node condition's change this round, for the node event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConditionChange {
    pub condition: NodeCondition,
    pub pressure: bool,
}

/// What a round found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Assessment {
    /// Thresholds met past their grace period, the one to act on first.
    pub met: Vec<Threshold>,
    /// The node conditions that hold now.
    pub conditions: Vec<NodeCondition>,
    /// Conditions that changed this round.
    pub changes: Vec<ConditionChange>,
}

impl Assessment {
    /// The threshold to reclaim for: memory first, then the others in signal order (the
    /// kubelet's `byEvictionPriority`).
    pub fn to_reclaim(&self) -> Option<&Threshold> {
        self.met.first()
    }
}

/// The manager's memory between rounds.
#[derive(Debug, Clone, Default)]
pub struct EvictionState {
    /// When each met threshold was first seen met (index into the settings' list).
    first_observed: BTreeMap<usize, DateTime<Utc>>,
    /// When each condition's signal was last seen over a threshold.
    condition_last_observed: BTreeMap<NodeCondition, DateTime<Utc>>,
    /// The thresholds acted on last round (kept met until their minimum reclaim).
    acted_on: Vec<usize>,
    conditions: Vec<NodeCondition>,
}

impl EvictionState {
    /// The thresholds were replaced (a reload): what was remembered by their positions
    /// is dropped, so soft thresholds start their grace again; the node's conditions and
    /// their transition period carry on.
    pub fn thresholds_changed(&mut self) {
        self.first_observed.clear();
        self.acted_on.clear();
    }

    /// One round at `now` with these readings.
    pub fn assess(
        &mut self,
        thresholds: &[Threshold],
        observations: &Observations,
        transition_period: Duration,
        now: DateTime<Utc>,
    ) -> Assessment {
        let met: Vec<usize> = (0..thresholds.len())
            .filter(|&i| {
                is_met(&thresholds[i], observations, false)
                    || (self.acted_on.contains(&i) && is_met(&thresholds[i], observations, true))
            })
            .collect();
        self.first_observed.retain(|i, _| met.contains(i));
        for &i in &met {
            self.first_observed.entry(i).or_insert(now);
        }
        for &i in &met {
            self.condition_last_observed
                .insert(thresholds[i].signal.condition(), now);
        }
        let transition = chrono::Duration::from_std(transition_period).unwrap_or_default();
        self.condition_last_observed
            .retain(|_, at| now.signed_duration_since(*at) < transition || *at == now);
        let conditions: Vec<NodeCondition> = NodeCondition::ALL
            .into_iter()
            .filter(|c| self.condition_last_observed.contains_key(c))
            .collect();
        let changes = NodeCondition::ALL
            .into_iter()
            .filter(|c| conditions.contains(c) != self.conditions.contains(c))
            .map(|condition| ConditionChange {
                condition,
                pressure: conditions.contains(&condition),
            })
            .collect();
        self.conditions = conditions.clone();
        let mut due: Vec<usize> = met
            .into_iter()
            .filter(|i| {
                let since = self.first_observed[i];
                let grace = chrono::Duration::from_std(thresholds[*i].grace).unwrap_or_default();
                now.signed_duration_since(since) >= grace
            })
            .collect();
        due.sort_by_key(|&i| (thresholds[i].signal != Signal::MemoryAvailable, i));
        self.acted_on = due.clone();
        Assessment {
            met: due.into_iter().map(|i| thresholds[i].clone()).collect(),
            conditions,
            changes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::threshold::parse_thresholds;
    use super::*;

    fn t0() -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000, 0).unwrap()
    }

    fn at(secs: i64) -> DateTime<Utc> {
        t0() + chrono::Duration::seconds(secs)
    }

    fn obs(signal: Signal, available: i64, capacity: i64) -> Observations {
        [(
            signal,
            Observation {
                available,
                capacity,
            },
        )]
        .into()
    }

    const MI: i64 = 1 << 20;
    const FIVE_MIN: Duration = Duration::from_secs(300);

    #[test]
    fn a_hard_threshold_is_met_at_once_and_raises_the_condition() {
        let t = parse_thresholds("memory.available<100Mi", "", "", "").unwrap();
        let mut s = EvictionState::default();
        let a = s.assess(
            &t,
            &obs(Signal::MemoryAvailable, 200 * MI, 1000 * MI),
            FIVE_MIN,
            at(0),
        );
        assert!(a.met.is_empty() && a.conditions.is_empty() && a.changes.is_empty());
        let a = s.assess(
            &t,
            &obs(Signal::MemoryAvailable, 90 * MI, 1000 * MI),
            FIVE_MIN,
            at(10),
        );
        assert_eq!(
            a.to_reclaim().map(|t| t.signal),
            Some(Signal::MemoryAvailable)
        );
        assert_eq!(a.conditions, [NodeCondition::MemoryPressure]);
        assert_eq!(
            a.changes,
            [ConditionChange {
                condition: NodeCondition::MemoryPressure,
                pressure: true
            }]
        );
    }

    #[test]
    fn a_soft_threshold_waits_for_its_grace_period_and_restarts_it_after_recovering() {
        let t = parse_thresholds("", "nodefs.available<20%", "nodefs.available=30s", "").unwrap();
        let mut s = EvictionState::default();
        let low = obs(Signal::NodeFsAvailable, 10, 100);
        let ok = obs(Signal::NodeFsAvailable, 50, 100);
        let a = s.assess(&t, &low, FIVE_MIN, at(0));
        assert!(a.met.is_empty());
        // The condition is raised at once; only the eviction waits.
        assert_eq!(a.conditions, [NodeCondition::DiskPressure]);
        assert!(s.assess(&t, &low, FIVE_MIN, at(29)).met.is_empty());
        s.assess(&t, &ok, FIVE_MIN, at(30));
        assert!(s.assess(&t, &low, FIVE_MIN, at(40)).met.is_empty());
        assert_eq!(s.assess(&t, &low, FIVE_MIN, at(70)).met.len(), 1);
    }

    #[test]
    fn new_thresholds_restart_the_grace_and_keep_the_condition() {
        let old = parse_thresholds("", "nodefs.available<20%", "nodefs.available=30s", "").unwrap();
        let new = parse_thresholds(
            "memory.available<1Mi",
            "nodefs.available<25%",
            "nodefs.available=30s",
            "",
        )
        .unwrap();
        let mut s = EvictionState::default();
        let low = obs(Signal::NodeFsAvailable, 10, 100);
        s.assess(&old, &low, FIVE_MIN, at(0));
        s.thresholds_changed();
        // At 30 s the old threshold would be due; the new one waits its own 30 s.
        let a = s.assess(&new, &low, FIVE_MIN, at(30));
        assert!(a.met.is_empty());
        assert_eq!(a.conditions, [NodeCondition::DiskPressure]);
        assert!(a.changes.is_empty(), "the condition did not flap");
        assert_eq!(s.assess(&new, &low, FIVE_MIN, at(60)).met.len(), 1);
    }

    #[test]
    fn the_condition_stays_for_the_transition_period() {
        let t = parse_thresholds("memory.available<100Mi", "", "", "").unwrap();
        let mut s = EvictionState::default();
        let low = obs(Signal::MemoryAvailable, 10 * MI, 1000 * MI);
        let ok = obs(Signal::MemoryAvailable, 500 * MI, 1000 * MI);
        s.assess(&t, &low, FIVE_MIN, at(0));
        let a = s.assess(&t, &ok, FIVE_MIN, at(10));
        assert!(a.met.is_empty());
        assert_eq!(a.conditions, [NodeCondition::MemoryPressure]);
        assert!(a.changes.is_empty());
        let a = s.assess(&t, &ok, FIVE_MIN, at(299));
        assert_eq!(a.conditions, [NodeCondition::MemoryPressure]);
        let a = s.assess(&t, &ok, FIVE_MIN, at(300));
        assert!(a.conditions.is_empty());
        assert_eq!(
            a.changes,
            [ConditionChange {
                condition: NodeCondition::MemoryPressure,
                pressure: false
            }]
        );
    }

    #[test]
    fn a_threshold_acted_on_stays_met_until_its_minimum_reclaim_is_back() {
        let t = parse_thresholds("nodefs.available<10%", "", "", "nodefs.available=5%").unwrap();
        let mut s = EvictionState::default();
        assert_eq!(
            s.assess(&t, &obs(Signal::NodeFsAvailable, 9, 100), FIVE_MIN, at(0))
                .met
                .len(),
            1
        );
        // Above 10% but under 10% + 5%: still being resolved.
        assert_eq!(
            s.assess(&t, &obs(Signal::NodeFsAvailable, 12, 100), FIVE_MIN, at(10))
                .met
                .len(),
            1
        );
        assert!(
            s.assess(&t, &obs(Signal::NodeFsAvailable, 15, 100), FIVE_MIN, at(20))
                .met
                .is_empty()
        );
        // Without a previous action, 12% is simply not met.
        let mut fresh = EvictionState::default();
        assert!(
            fresh
                .assess(&t, &obs(Signal::NodeFsAvailable, 12, 100), FIVE_MIN, at(0))
                .met
                .is_empty()
        );
    }

    #[test]
    fn memory_is_reclaimed_before_disk() {
        let t =
            parse_thresholds("nodefs.available<10%,memory.available<100Mi", "", "", "").unwrap();
        let mut both = obs(Signal::NodeFsAvailable, 1, 100);
        both.extend(obs(Signal::MemoryAvailable, MI, 1000 * MI));
        let a = EvictionState::default().assess(&t, &both, FIVE_MIN, at(0));
        let signals: Vec<_> = a.met.iter().map(|t| t.signal).collect();
        assert_eq!(signals, [Signal::MemoryAvailable, Signal::NodeFsAvailable]);
        assert_eq!(
            a.conditions,
            [NodeCondition::MemoryPressure, NodeCondition::DiskPressure]
        );
    }

    #[test]
    fn an_unread_signal_meets_no_threshold() {
        let t = parse_thresholds("pid.available<100", "", "", "").unwrap();
        let a = EvictionState::default().assess(&t, &Observations::new(), FIVE_MIN, at(0));
        assert!(a.met.is_empty());
    }
}
