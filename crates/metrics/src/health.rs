//! The health registry behind `/healthz`: named loops report progress, and a loop
//! that stopped progressing is reported stuck, with its name and for how long.
//!
//! Two kinds of component, because "stuck" means different things:
//! - a **periodic** loop (the manifest source's rescans, the GC loops) must beat at
//!   least every period; it is stuck once silent for [`periodic_limit`]`(period)`:
//!   three periods (one missed tick and one slow pass are normal on a loaded 2-core
//!   host), and never less than a minute, so that short test periods do not flap. The
//!   kubelet's sync loop rule is the same shape: max(2 × its period, 5 min).
//! - an **on-demand** worker (the pod manager applying a scan, the status writer
//!   writing files) is healthy while idle however long; it is stuck when it has been
//!   busy past its limit without progress. An idle manager with no pods is healthy.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

/// The shortest silence that makes a periodic loop stuck.
pub const MIN_PERIODIC_LIMIT: Duration = Duration::from_secs(60);

/// How long an on-demand worker may stay busy without progress (one file write, one
/// scan applied: milliseconds normally; a minute means a blocked disk or lock).
pub const BUSY_LIMIT: Duration = Duration::from_secs(60);

/// The silence after which a loop with this period is stuck.
pub fn periodic_limit(period: Duration) -> Duration {
    period.saturating_mul(3).max(MIN_PERIODIC_LIMIT)
}

#[derive(Debug, Clone, Copy)]
enum Rule {
    /// Must beat at least this often.
    Every { period: Duration, limit: Duration },
    /// Must make progress this often while busy.
    WhileBusy { limit: Duration },
}

#[derive(Debug, Clone, Copy)]
struct Component {
    rule: Rule,
    last_progress: Instant,
    busy: bool,
}

/// A component that stopped progressing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stuck {
    pub name: &'static str,
    /// Time since its last progress.
    pub age: Duration,
    /// What was expected of it.
    pub expected: String,
}

impl std::fmt::Display for Stuck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: stuck, no progress for {}s ({})",
            self.name,
            self.age.as_secs(),
            self.expected
        )
    }
}

/// Named components and their last progress. Cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct HealthRegistry {
    components: Arc<Mutex<BTreeMap<&'static str, Component>>>,
}

static HEALTH: LazyLock<HealthRegistry> = LazyLock::new(HealthRegistry::default);

/// The daemon's registry (what `/healthz` checks).
pub fn health() -> &'static HealthRegistry {
    &HEALTH
}

impl HealthRegistry {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<&'static str, Component>> {
        self.components.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn add(&self, name: &'static str, rule: Rule, now: Instant) -> Heartbeat {
        self.lock().insert(
            name,
            Component {
                rule,
                last_progress: now,
                busy: false,
            },
        );
        Heartbeat {
            registry: self.clone(),
            name,
        }
    }

    /// Registers (or re-registers) a loop that beats every `period`.
    pub fn periodic(&self, name: &'static str, period: Duration) -> Heartbeat {
        self.periodic_at(name, period, Instant::now())
    }

    pub fn periodic_at(&self, name: &'static str, period: Duration, now: Instant) -> Heartbeat {
        let limit = periodic_limit(period);
        self.add(name, Rule::Every { period, limit }, now)
    }

    /// Registers a worker that may idle forever but must progress within `limit`
    /// while busy.
    pub fn on_demand(&self, name: &'static str, limit: Duration) -> Heartbeat {
        self.on_demand_at(name, limit, Instant::now())
    }

    pub fn on_demand_at(&self, name: &'static str, limit: Duration, now: Instant) -> Heartbeat {
        self.add(name, Rule::WhileBusy { limit }, now)
    }

    /// The components stuck at `now`, by name.
    pub fn check_at(&self, now: Instant) -> Vec<Stuck> {
        self.lock()
            .iter()
            .filter_map(|(name, c)| {
                let age = now.saturating_duration_since(c.last_progress);
                let (limit, expected) = match c.rule {
                    Rule::Every { period, limit } => (
                        limit,
                        format!(
                            "expected every {}s, stuck after {}s",
                            period.as_secs_f64(),
                            limit.as_secs()
                        ),
                    ),
                    Rule::WhileBusy { .. } if !c.busy => return None,
                    Rule::WhileBusy { limit } => (
                        limit,
                        format!("busy with one task for longer than {}s", limit.as_secs()),
                    ),
                };
                (age > limit).then_some(Stuck {
                    name,
                    age,
                    expected,
                })
            })
            .collect()
    }

    /// The components stuck now.
    pub fn check(&self) -> Vec<Stuck> {
        self.check_at(Instant::now())
    }

    fn update(&self, name: &'static str, f: impl FnOnce(&mut Component)) {
        if let Some(c) = self.lock().get_mut(name) {
            f(c);
        }
    }
}

/// A component's handle for reporting progress.
#[derive(Debug, Clone)]
pub struct Heartbeat {
    registry: HealthRegistry,
    name: &'static str,
}

impl Heartbeat {
    /// The component made progress (a periodic loop's iteration, one file written).
    pub fn beat(&self) {
        self.beat_at(Instant::now());
    }

    pub fn beat_at(&self, now: Instant) {
        self.registry.update(self.name, |c| c.last_progress = now);
    }

    /// An on-demand worker took up work: it must progress from now on.
    pub fn busy(&self) {
        self.busy_at(Instant::now());
    }

    pub fn busy_at(&self, now: Instant) {
        self.registry.update(self.name, |c| {
            if !c.busy {
                c.busy = true;
                c.last_progress = now;
            }
        });
    }

    /// The worker is done with its work (healthy however long it then idles).
    pub fn idle(&self) {
        self.registry.update(self.name, |c| c.busy = false);
    }

    pub fn name(&self) -> &'static str {
        self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_periodic_loop_is_stuck_after_three_periods_and_never_before_a_minute() {
        let reg = HealthRegistry::default();
        let t0 = Instant::now();
        let gc = reg.periodic_at("container GC", Duration::from_secs(60), t0);
        let scans = reg.periodic_at("manifest source", Duration::from_secs(2), t0);
        assert!(reg.check_at(t0 + Duration::from_secs(59)).is_empty());
        let stuck = reg.check_at(t0 + Duration::from_secs(61));
        assert_eq!(stuck.len(), 1, "{stuck:?}");
        assert_eq!(stuck[0].name, "manifest source");
        assert_eq!(stuck[0].age, Duration::from_secs(61));
        assert_eq!(
            stuck[0].to_string(),
            "manifest source: stuck, no progress for 61s (expected every 2s, stuck after 60s)"
        );
        scans.beat_at(t0 + Duration::from_secs(61));
        gc.beat_at(t0 + Duration::from_secs(100));
        assert!(reg.check_at(t0 + Duration::from_secs(121)).is_empty());
        let stuck = reg.check_at(t0 + Duration::from_secs(281));
        let names: Vec<_> = stuck.iter().map(|s| s.name).collect();
        assert_eq!(names, ["container GC", "manifest source"]);
        assert_eq!(stuck[0].age, Duration::from_secs(181));
    }

    #[test]
    fn an_idle_worker_is_healthy_forever_and_a_busy_one_is_stuck_past_its_limit() {
        let reg = HealthRegistry::default();
        let t0 = Instant::now();
        let writer = reg.on_demand_at("status writer", BUSY_LIMIT, t0);
        assert!(reg.check_at(t0 + Duration::from_secs(86_400)).is_empty());
        let t1 = t0 + Duration::from_secs(100_000);
        writer.busy_at(t1);
        writer.beat_at(t1 + Duration::from_secs(50));
        assert!(reg.check_at(t1 + Duration::from_secs(100)).is_empty());
        let stuck = reg.check_at(t1 + Duration::from_secs(111));
        assert_eq!(stuck.len(), 1);
        assert_eq!(stuck[0].name, "status writer");
        assert_eq!(stuck[0].age, Duration::from_secs(61));
        assert!(
            stuck[0].to_string().contains("busy with one task"),
            "{}",
            stuck[0]
        );
        writer.idle();
        assert!(reg.check_at(t1 + Duration::from_secs(10_000)).is_empty());
    }

    #[test]
    fn becoming_busy_again_does_not_reset_the_clock_of_unfinished_work() {
        let reg = HealthRegistry::default();
        let t0 = Instant::now();
        let manager = reg.on_demand_at("pod manager", BUSY_LIMIT, t0);
        manager.busy_at(t0);
        manager.busy_at(t0 + Duration::from_secs(59));
        assert_eq!(reg.check_at(t0 + Duration::from_secs(61)).len(), 1);
    }
}
