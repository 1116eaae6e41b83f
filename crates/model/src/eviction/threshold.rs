//! Eviction thresholds as the kubelet's flags write them (`memory.available<100Mi`,
//! `nodefs.available<10%`), their soft grace periods and minimum reclaims, parsed into
//! [`Threshold`]s (`pkg/kubelet/eviction/helpers.go` `ParseThresholdConfig`).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use super::EvictionConfigError;

/// What the eviction manager observes on the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Signal {
    MemoryAvailable,
    NodeFsAvailable,
    NodeFsInodesFree,
    ImageFsAvailable,
    ImageFsInodesFree,
    PidAvailable,
}

impl Signal {
    pub const ALL: [Signal; 6] = [
        Signal::MemoryAvailable,
        Signal::NodeFsAvailable,
        Signal::NodeFsInodesFree,
        Signal::ImageFsAvailable,
        Signal::ImageFsInodesFree,
        Signal::PidAvailable,
    ];

    /// The kubelet's name of the signal.
    pub fn name(self) -> &'static str {
        match self {
            Signal::MemoryAvailable => "memory.available",
            Signal::NodeFsAvailable => "nodefs.available",
            Signal::NodeFsInodesFree => "nodefs.inodesFree",
            Signal::ImageFsAvailable => "imagefs.available",
            Signal::ImageFsInodesFree => "imagefs.inodesFree",
            Signal::PidAvailable => "pid.available",
        }
    }

    fn from_name(name: &str) -> Option<Signal> {
        Signal::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The resource the signal is about, as the kubelet's eviction message names it.
    pub fn resource(self) -> Resource {
        match self {
            Signal::MemoryAvailable => Resource::Memory,
            Signal::NodeFsAvailable | Signal::ImageFsAvailable => Resource::EphemeralStorage,
            Signal::NodeFsInodesFree | Signal::ImageFsInodesFree => Resource::Inodes,
            Signal::PidAvailable => Resource::Pids,
        }
    }

    /// The node condition the signal raises.
    pub fn condition(self) -> NodeCondition {
        match self {
            Signal::MemoryAvailable => NodeCondition::MemoryPressure,
            Signal::PidAvailable => NodeCondition::PidPressure,
            _ => NodeCondition::DiskPressure,
        }
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What an eviction reclaims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    Memory,
    EphemeralStorage,
    Inodes,
    Pids,
}

impl Resource {
    pub fn name(self) -> &'static str {
        match self {
            Resource::Memory => "memory",
            Resource::EphemeralStorage => "ephemeral-storage",
            Resource::Inodes => "inodes",
            Resource::Pids => "pids",
        }
    }

    /// Bytes are written with binary suffixes (`100Mi`), counts with decimal ones.
    pub fn is_bytes(self) -> bool {
        matches!(self, Resource::Memory | Resource::EphemeralStorage)
    }
}

/// A node condition of the eviction manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NodeCondition {
    MemoryPressure,
    DiskPressure,
    PidPressure,
}

impl NodeCondition {
    pub const ALL: [NodeCondition; 3] = [
        NodeCondition::MemoryPressure,
        NodeCondition::DiskPressure,
        NodeCondition::PidPressure,
    ];

    /// The condition's type as the API spells it.
    pub fn name(self) -> &'static str {
        match self {
            NodeCondition::MemoryPressure => "MemoryPressure",
            NodeCondition::DiskPressure => "DiskPressure",
            NodeCondition::PidPressure => "PIDPressure",
        }
    }

    /// The condition's reason on the Node (the kubelet's `setters.go`).
    pub fn condition_reason(self, pressure: bool) -> &'static str {
        match (self, pressure) {
            (NodeCondition::MemoryPressure, true) => "KubeletHasInsufficientMemory",
            (NodeCondition::MemoryPressure, false) => "KubeletHasSufficientMemory",
            (NodeCondition::DiskPressure, true) => "KubeletHasDiskPressure",
            (NodeCondition::DiskPressure, false) => "KubeletHasNoDiskPressure",
            (NodeCondition::PidPressure, true) => "KubeletHasInsufficientPID",
            (NodeCondition::PidPressure, false) => "KubeletHasSufficientPID",
        }
    }

    /// The condition's message on the Node.
    pub fn message(self, pressure: bool) -> &'static str {
        match (self, pressure) {
            (NodeCondition::MemoryPressure, true) => "kubelet has insufficient memory available",
            (NodeCondition::MemoryPressure, false) => "kubelet has sufficient memory available",
            (NodeCondition::DiskPressure, true) => "kubelet has disk pressure",
            (NodeCondition::DiskPressure, false) => "kubelet has no disk pressure",
            (NodeCondition::PidPressure, true) => "kubelet has insufficient PID available",
            (NodeCondition::PidPressure, false) => "kubelet has sufficient PID available",
        }
    }

    /// The kubelet's node event when the condition becomes true / false
    /// (`NodeHasSufficientMemory`… are the kubelet's names for "no pressure").
    pub fn event_reason(self, pressure: bool) -> &'static str {
        match (self, pressure) {
            (NodeCondition::MemoryPressure, true) => "NodeHasInsufficientMemory",
            (NodeCondition::MemoryPressure, false) => "NodeHasSufficientMemory",
            (NodeCondition::DiskPressure, true) => "NodeHasDiskPressure",
            (NodeCondition::DiskPressure, false) => "NodeHasNoDiskPressure",
            (NodeCondition::PidPressure, true) => "NodeHasInsufficientPID",
            (NodeCondition::PidPressure, false) => "NodeHasSufficientPID",
        }
    }
}

/// A threshold's value: an absolute quantity (bytes, inodes, pids) or a fraction of
/// the signal's capacity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ThresholdValue {
    Quantity(i64),
    /// 0.0–1.0.
    Fraction(f64),
}

impl ThresholdValue {
    /// The value as a quantity, given the signal's capacity.
    pub fn quantity(self, capacity: i64) -> i64 {
        match self {
            ThresholdValue::Quantity(q) => q,
            // Rounded as the kubelet's `int64(float64(capacity) * percentage)`.
            ThresholdValue::Fraction(f) => {
                let q = crate::convert::f64_to_u64_saturating(capacity as f64 * f);
                i64::try_from(q).unwrap_or(i64::MAX)
            }
        }
    }
}

/// One eviction threshold: `signal < value`, hard (grace zero) or soft.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    pub signal: Signal,
    pub value: ThresholdValue,
    /// How long the signal must stay under the value before pods are evicted; zero
    /// for a hard threshold.
    pub grace: Duration,
    /// How much beyond the value an eviction must get back before the threshold counts
    /// as resolved (`--eviction-minimum-reclaim`).
    pub min_reclaim: Option<ThresholdValue>,
}

impl Threshold {
    pub fn is_hard(&self) -> bool {
        self.grace.is_zero()
    }
}

/// The kubelet's Linux default of `--eviction-hard`.
pub const DEFAULT_HARD: &str =
    "memory.available<100Mi,nodefs.available<10%,imagefs.available<15%,nodefs.inodesFree<5%";

/// Every threshold of the four flags: hard ones, soft ones (each with its grace
/// period), with the minimum reclaims applied to the thresholds of their signal. A
/// zero value turns its threshold off, as in the kubelet.
pub fn parse_thresholds(
    hard: &str,
    soft: &str,
    soft_grace: &str,
    min_reclaim: &str,
) -> Result<Vec<Threshold>, EvictionConfigError> {
    let graces = parse_map("--eviction-soft-grace-period", soft_grace, |s, v| {
        parse_duration(v).ok_or_else(|| EvictionConfigError::Duration {
            signal: s.name(),
            value: v.to_string(),
        })
    })?;
    let reclaims = parse_map("--eviction-minimum-reclaim", min_reclaim, |s, v| {
        parse_value(s, v)
    })?;
    let mut out = Vec::new();
    for (flag, text, soft) in [
        ("--eviction-hard", hard, false),
        ("--eviction-soft", soft, true),
    ] {
        let mut seen = Vec::new();
        for statement in items(text) {
            let (name, value) =
                statement
                    .split_once('<')
                    .ok_or_else(|| EvictionConfigError::Operator {
                        flag,
                        statement: statement.to_string(),
                    })?;
            let signal = signal(flag, name.trim())?;
            if seen.contains(&signal) {
                return Err(EvictionConfigError::Duplicate {
                    flag,
                    signal: signal.name(),
                });
            }
            seen.push(signal);
            let value = parse_value(signal, value.trim())?;
            let grace = if soft {
                match graces.get(&signal) {
                    Some(g) => *g,
                    None => {
                        return Err(EvictionConfigError::NoGrace {
                            signal: signal.name(),
                        });
                    }
                }
            } else {
                Duration::ZERO
            };
            let off = match value {
                ThresholdValue::Quantity(q) => q == 0,
                ThresholdValue::Fraction(f) => f == 0.0,
            };
            if !off {
                out.push(Threshold {
                    signal,
                    value,
                    grace,
                    min_reclaim: reclaims.get(&signal).copied(),
                });
            }
        }
    }
    Ok(out)
}

fn items(text: &str) -> impl Iterator<Item = &str> {
    text.split(',').map(str::trim).filter(|s| !s.is_empty())
}

fn signal(flag: &'static str, name: &str) -> Result<Signal, EvictionConfigError> {
    Signal::from_name(name).ok_or_else(|| EvictionConfigError::Signal {
        flag,
        name: name.to_string(),
    })
}

/// `signal=value,…` into a map, each value parsed by `parse`.
fn parse_map<T>(
    flag: &'static str,
    text: &str,
    parse: impl Fn(Signal, &str) -> Result<T, EvictionConfigError>,
) -> Result<BTreeMap<Signal, T>, EvictionConfigError> {
    let mut out = BTreeMap::new();
    for item in items(text) {
        let (name, value) = item
            .split_once('=')
            .ok_or_else(|| EvictionConfigError::Operator {
                flag,
                statement: item.to_string(),
            })?;
        let signal = signal(flag, name.trim())?;
        out.insert(signal, parse(signal, value.trim())?);
    }
    Ok(out)
}

/// `10%` or a quantity (`100Mi`, `1000`); never negative, a percentage at most 100.
fn parse_value(signal: Signal, text: &str) -> Result<ThresholdValue, EvictionConfigError> {
    let bad = || EvictionConfigError::Value {
        signal: signal.name(),
        value: text.to_string(),
    };
    if let Some(percent) = text.strip_suffix('%') {
        let p: f64 = percent.trim().parse().map_err(|_| bad())?;
        if !(0.0..=100.0).contains(&p) {
            return Err(bad());
        }
        return Ok(ThresholdValue::Fraction(p / 100.0));
    }
    let q = crate::quantity::bytes(text).ok_or_else(bad)?;
    if q < 0 {
        return Err(bad());
    }
    Ok(ThresholdValue::Quantity(q))
}

/// A Go duration (`1m30s`, `90s`, `1.5h`, `500ms`), as the kubelet's flags take them.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    if rest == "0" {
        return Some(Duration::ZERO);
    }
    let mut total = 0.0f64;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += number * seconds;
    }
    Duration::try_from_secs_f64(total).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_hard_set_is_the_kubelets() {
        let t = parse_thresholds(DEFAULT_HARD, "", "", "").unwrap();
        let got: Vec<_> = t.iter().map(|t| (t.signal, t.value, t.grace)).collect();
        assert_eq!(
            got,
            [
                (
                    Signal::MemoryAvailable,
                    ThresholdValue::Quantity(100 << 20),
                    Duration::ZERO
                ),
                (
                    Signal::NodeFsAvailable,
                    ThresholdValue::Fraction(0.10),
                    Duration::ZERO
                ),
                (
                    Signal::ImageFsAvailable,
                    ThresholdValue::Fraction(0.15),
                    Duration::ZERO
                ),
                (
                    Signal::NodeFsInodesFree,
                    ThresholdValue::Fraction(0.05),
                    Duration::ZERO
                ),
            ]
        );
        assert!(t.iter().all(Threshold::is_hard));
    }

    #[test]
    fn soft_thresholds_take_their_grace_and_min_reclaim_applies_to_both() {
        let t = parse_thresholds(
            "memory.available<50Mi",
            "memory.available<200Mi, nodefs.available<20%",
            "memory.available=1m30s,nodefs.available=10s",
            "memory.available=10Mi,nodefs.available=5%",
        )
        .unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t[0].grace, Duration::ZERO);
        assert_eq!(t[1].grace, Duration::from_secs(90));
        assert_eq!(t[2].grace, Duration::from_secs(10));
        assert_eq!(t[0].min_reclaim, Some(ThresholdValue::Quantity(10 << 20)));
        assert_eq!(t[1].min_reclaim, Some(ThresholdValue::Quantity(10 << 20)));
        assert_eq!(t[2].min_reclaim, Some(ThresholdValue::Fraction(0.05)));
    }

    #[test]
    fn a_zero_value_turns_the_threshold_off() {
        let t = parse_thresholds("memory.available<0,nodefs.available<0%", "", "", "").unwrap();
        assert!(t.is_empty());
    }

    #[test]
    fn errors_name_the_flag_signal_and_value() {
        let err = |h: &str, s: &str, g: &str, m: &str| {
            parse_thresholds(h, s, g, m).unwrap_err().to_string()
        };
        assert_eq!(
            err("memory.available>1Gi", "", "", ""),
            "--eviction-hard: `memory.available>1Gi` is not `signal<value` (only `<` is supported)"
        );
        assert!(err("memory.free<1Gi", "", "", "").contains("unknown signal `memory.free`"));
        assert!(
            err("nodefs.available<120%", "", "", "")
                .contains("nodefs.available: `120%` is not a quantity or a percentage")
        );
        assert!(err("memory.available<-1", "", "", "").contains("`-1`"));
        assert!(
            err("memory.available<1Gi,memory.available<2Gi", "", "", "")
                .contains("memory.available is given twice")
        );
        assert!(
            err("", "memory.available<1Gi", "", "")
                .contains("soft threshold memory.available has no grace period")
        );
        assert!(
            err("", "memory.available<1Gi", "memory.available=soon", "")
                .contains("`soon` is not a duration")
        );
    }

    #[test]
    fn go_durations() {
        assert_eq!(parse_duration("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("1.5h"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("0"), Some(Duration::ZERO));
        assert_eq!(parse_duration("10"), None);
        assert_eq!(parse_duration(""), None);
    }

    #[test]
    fn a_percentage_is_of_the_capacity() {
        assert_eq!(ThresholdValue::Fraction(0.10).quantity(1000), 100);
        assert_eq!(ThresholdValue::Quantity(7).quantity(1000), 7);
    }
}
