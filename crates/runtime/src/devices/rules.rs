//! The device rules podhost gives containers, and their normalized form.
//!
//! Rules are OCI `linux.resources.devices` entries, in order, with the cgroup v1
//! meaning (see [`super::policy`]): the default list denies everything, then allows
//! `mknod` of any device (creating a node is harmless when it cannot be opened) and
//! read/write/mknod of the few devices every container expects.

use oci_spec::runtime::{LinuxDeviceCgroup, LinuxDeviceType};

use super::DevicesError;

/// Bits of an access set, with the values of the kernel's `BPF_DEVCG_ACC_*`.
pub const ACCESS_MKNOD: u8 = 1;
pub const ACCESS_READ: u8 = 2;
pub const ACCESS_WRITE: u8 = 4;
pub const ACCESS_ALL: u8 = ACCESS_MKNOD | ACCESS_READ | ACCESS_WRITE;

/// Which devices a rule is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    /// Every device (only as a whole: `a *:* rwm`).
    All,
    Char,
    Block,
}

/// One rule, checked and normalized: `None` for a major or minor is the wildcard `*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceRule {
    pub allow: bool,
    pub kind: DeviceKind,
    pub major: Option<u32>,
    pub minor: Option<u32>,
    /// `ACCESS_*` bits.
    pub access: u8,
}

/// The char devices every container may use: null, zero, full, random, urandom, tty,
/// ptmx, and every pseudo-terminal (136:*).
const DEFAULT_CHAR_DEVICES: [(i64, Option<i64>); 8] = [
    (1, Some(3)),
    (1, Some(5)),
    (1, Some(7)),
    (1, Some(8)),
    (1, Some(9)),
    (5, Some(0)),
    (5, Some(2)),
    (136, None),
];

fn cgroup_rule(
    allow: bool,
    typ: LinuxDeviceType,
    major: Option<i64>,
    minor: Option<i64>,
    access: &str,
) -> LinuxDeviceCgroup {
    // The setters, not the builder: nothing here can fail.
    let mut rule = LinuxDeviceCgroup::default();
    rule.set_allow(allow)
        .set_typ(Some(typ))
        .set_major(major)
        .set_minor(minor)
        .set_access(Some(access.to_string()));
    rule
}

/// The rules of every unprivileged container: deny all, then `m` on any char and block
/// device, then `rwm` on [`DEFAULT_CHAR_DEVICES`].
pub fn default_rules() -> Vec<LinuxDeviceCgroup> {
    let mut rules = vec![
        cgroup_rule(false, LinuxDeviceType::A, None, None, "rwm"),
        cgroup_rule(true, LinuxDeviceType::C, None, None, "m"),
        cgroup_rule(true, LinuxDeviceType::B, None, None, "m"),
    ];
    for (major, minor) in DEFAULT_CHAR_DEVICES {
        rules.push(cgroup_rule(
            true,
            LinuxDeviceType::C,
            Some(major),
            minor,
            "rwm",
        ));
    }
    rules
}

/// The rules of a privileged container: every device.
pub fn privileged_rules() -> Vec<LinuxDeviceCgroup> {
    vec![cgroup_rule(true, LinuxDeviceType::A, None, None, "rwm")]
}

fn bad(rule: &LinuxDeviceCgroup, reason: impl Into<String>) -> DevicesError {
    DevicesError::BadRule {
        rule: rule.to_string(),
        reason: reason.into(),
    }
}

fn number(rule: &LinuxDeviceCgroup, n: Option<i64>) -> Result<Option<u32>, DevicesError> {
    match n {
        // runc and the runtime spec's tools write -1 for "any".
        None | Some(-1) => Ok(None),
        Some(v) => u32::try_from(v)
            .map(Some)
            .map_err(|_| bad(rule, format!("{v} is not a device number"))),
    }
}

fn access_bits(rule: &LinuxDeviceCgroup) -> Result<u8, DevicesError> {
    let text = rule.access().as_deref().unwrap_or("");
    if text.is_empty() {
        // The runtime spec leaves the meaning open; runc reads it as everything.
        return Ok(ACCESS_ALL);
    }
    text.chars().try_fold(0u8, |bits, c| match c {
        'r' => Ok(bits | ACCESS_READ),
        'w' => Ok(bits | ACCESS_WRITE),
        'm' => Ok(bits | ACCESS_MKNOD),
        other => Err(bad(rule, format!("access {other:?} is not one of r, w, m"))),
    })
}

impl DeviceRule {
    /// Checks and normalizes one spec rule. FIFO rules (`p`) give `None`: the kernel
    /// never asks the device cgroup about FIFOs. `u` (unbuffered char) is a char device.
    pub fn from_spec(rule: &LinuxDeviceCgroup) -> Result<Option<Self>, DevicesError> {
        let kind = match rule.typ().unwrap_or(LinuxDeviceType::A) {
            LinuxDeviceType::A => DeviceKind::All,
            LinuxDeviceType::C | LinuxDeviceType::U => DeviceKind::Char,
            LinuxDeviceType::B => DeviceKind::Block,
            LinuxDeviceType::P => return Ok(None),
        };
        let parsed = Self {
            allow: rule.allow(),
            kind,
            major: number(rule, rule.major())?,
            minor: number(rule, rule.minor())?,
            access: access_bits(rule)?,
        };
        // The v1 kernel reads `a` as "every device, every access" whatever follows it;
        // a narrower `a` rule would mean something else on cgroup v2, so refuse it.
        if kind == DeviceKind::All
            && (parsed.major.is_some() || parsed.minor.is_some() || parsed.access != ACCESS_ALL)
        {
            return Err(bad(
                rule,
                "type a always means every device with rwm; use c or b for a narrower rule",
            ));
        }
        Ok(Some(parsed))
    }

    /// The rule as the v1 devices controller reads it: `c 1:3 rwm`, `b *:* m`, `a *:* rwm`.
    pub fn v1_line(&self) -> String {
        format!(
            "{} {} {}",
            kind_char(self.kind),
            majmin(self.major, self.minor),
            access_text(self.access)
        )
    }
}

/// Normalizes a whole rule list (FIFO rules dropped).
pub fn normalize(rules: &[LinuxDeviceCgroup]) -> Result<Vec<DeviceRule>, DevicesError> {
    let mut out = Vec::with_capacity(rules.len());
    for r in rules {
        if let Some(rule) = DeviceRule::from_spec(r)? {
            out.push(rule);
        }
    }
    Ok(out)
}

pub(crate) fn kind_char(kind: DeviceKind) -> char {
    match kind {
        DeviceKind::All => 'a',
        DeviceKind::Char => 'c',
        DeviceKind::Block => 'b',
    }
}

pub(crate) fn majmin(major: Option<u32>, minor: Option<u32>) -> String {
    let n = |v: Option<u32>| v.map_or_else(|| "*".to_string(), |v| v.to_string());
    format!("{}:{}", n(major), n(minor))
}

/// `rwm` order, as the kernel prints it.
pub(crate) fn access_text(bits: u8) -> String {
    let mut s = String::new();
    if bits & ACCESS_READ != 0 {
        s.push('r');
    }
    if bits & ACCESS_WRITE != 0 {
        s.push('w');
    }
    if bits & ACCESS_MKNOD != 0 {
        s.push('m');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(rules: &[LinuxDeviceCgroup]) -> Vec<String> {
        normalize(rules)
            .unwrap()
            .iter()
            .map(DeviceRule::v1_line)
            .collect()
    }

    #[test]
    fn default_rules_deny_all_first_then_allow_the_listed_devices() {
        assert_eq!(
            lines(&default_rules()),
            [
                "a *:* rwm",
                "c *:* m",
                "b *:* m",
                "c 1:3 rwm",
                "c 1:5 rwm",
                "c 1:7 rwm",
                "c 1:8 rwm",
                "c 1:9 rwm",
                "c 5:0 rwm",
                "c 5:2 rwm",
                "c 136:* rwm",
            ]
        );
        let rules = default_rules();
        assert!(!rules[0].allow(), "the first rule denies");
        assert!(rules[1..].iter().all(|r| r.allow()));
    }

    #[test]
    fn privileged_rules_allow_everything() {
        let rules = privileged_rules();
        assert_eq!(lines(&rules), ["a *:* rwm"]);
        assert!(rules[0].allow());
    }

    #[test]
    fn spec_rules_are_normalized() {
        let u = cgroup_rule(true, LinuxDeviceType::U, Some(4), Some(-1), "");
        let p = cgroup_rule(true, LinuxDeviceType::P, None, None, "rwm");
        let got = normalize(&[u, p]).unwrap();
        assert_eq!(
            got,
            [DeviceRule {
                allow: true,
                kind: DeviceKind::Char,
                major: Some(4),
                minor: None,
                access: ACCESS_ALL,
            }]
        );
    }

    #[test]
    fn malformed_rules_are_refused_with_the_rule_named() {
        for (rule, needle) in [
            (
                cgroup_rule(true, LinuxDeviceType::C, Some(1), Some(3), "rx"),
                "'x'",
            ),
            (
                cgroup_rule(true, LinuxDeviceType::C, Some(1 << 40), None, "r"),
                "not a device number",
            ),
            (
                cgroup_rule(true, LinuxDeviceType::A, Some(1), None, "rwm"),
                "type a",
            ),
            (
                cgroup_rule(false, LinuxDeviceType::A, None, None, "m"),
                "type a",
            ),
        ] {
            let err = DeviceRule::from_spec(&rule).unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
            assert!(err.contains(&rule.to_string()), "{err}");
        }
    }
}
