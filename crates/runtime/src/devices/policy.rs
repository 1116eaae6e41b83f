//! What a rule list means: the cgroup v1 devices controller's model, computed here so
//! that cgroup v1 and the eBPF program of cgroup v2 enforce exactly the same thing.
//!
//! The kernel keeps a default (allow or deny) and a list of exceptions. Starting from
//! "deny, no exceptions" (podhost always resets the cgroup first), each rule in order:
//! - `a` (allow or deny) sets the default and empties the list;
//! - a rule that goes against the default adds an exception (an exception with the same
//!   type, major and minor gets the access bits added instead);
//! - a rule that agrees with the default removes those access bits from the exception
//!   with exactly the same type, major and minor (nothing else).
//!
//! Checking a request (type, major, minor, access): with default deny it is allowed when
//! one exception covers every requested access bit; with default allow it is denied when
//! one exception shares any requested access bit. A wildcard matches any number.

use super::rules::{DeviceKind, DeviceRule, access_text, kind_char, majmin};

/// One exception of the list (never of kind `All`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exception {
    pub kind: DeviceKind,
    pub major: Option<u32>,
    pub minor: Option<u32>,
    pub access: u8,
}

/// The effective state after a rule list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevicePolicy {
    pub default_allow: bool,
    /// In the order the kernel keeps them (first added first).
    pub exceptions: Vec<Exception>,
}

/// A device access the kernel asks about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceRequest {
    /// `Char` or `Block`.
    pub kind: DeviceKind,
    pub major: u32,
    pub minor: u32,
    pub access: u8,
}

impl Exception {
    fn same_device(&self, other: &Exception) -> bool {
        self.kind == other.kind && self.major == other.major && self.minor == other.minor
    }

    /// Whether this exception is about the requested device.
    pub fn covers_device(&self, req: &DeviceRequest) -> bool {
        self.kind == req.kind
            && self.major.is_none_or(|m| m == req.major)
            && self.minor.is_none_or(|m| m == req.minor)
    }
}

impl DevicePolicy {
    /// Applies `rules` in order to a cgroup reset to "deny, no exceptions".
    pub fn from_rules(rules: &[DeviceRule]) -> Self {
        let mut policy = Self {
            default_allow: false,
            exceptions: Vec::new(),
        };
        for rule in rules {
            policy.apply(rule);
        }
        policy
    }

    fn apply(&mut self, rule: &DeviceRule) {
        if rule.kind == DeviceKind::All {
            self.default_allow = rule.allow;
            self.exceptions.clear();
            return;
        }
        let ex = Exception {
            kind: rule.kind,
            major: rule.major,
            minor: rule.minor,
            access: rule.access,
        };
        if rule.allow != self.default_allow {
            match self.exceptions.iter_mut().find(|e| e.same_device(&ex)) {
                Some(e) => e.access |= ex.access,
                None => self.exceptions.push(ex),
            }
        } else {
            for e in self.exceptions.iter_mut().filter(|e| e.same_device(&ex)) {
                e.access &= !ex.access;
            }
            self.exceptions.retain(|e| e.access != 0);
        }
    }

    /// The reference decision (the eBPF program must agree with it).
    pub fn permits(&self, req: &DeviceRequest) -> bool {
        let relevant = self.exceptions.iter().filter(|e| e.covers_device(req));
        if self.default_allow {
            !relevant.into_iter().any(|e| e.access & req.access != 0)
        } else {
            relevant.into_iter().any(|e| req.access & !e.access == 0)
        }
    }

    /// What the v1 `devices.list` file shows for this state.
    pub fn v1_list(&self) -> Vec<String> {
        if self.default_allow {
            // The kernel prints only this line in allow mode, whatever the exceptions.
            return vec!["a *:* rwm".to_string()];
        }
        self.exceptions
            .iter()
            .map(|e| {
                format!(
                    "{} {} {}",
                    kind_char(e.kind),
                    majmin(e.major, e.minor),
                    access_text(e.access)
                )
            })
            .collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::devices::rules::{
        ACCESS_ALL, ACCESS_MKNOD, ACCESS_READ, ACCESS_WRITE, default_rules, normalize,
        privileged_rules,
    };

    pub(crate) fn req(kind: DeviceKind, major: u32, minor: u32, access: u8) -> DeviceRequest {
        DeviceRequest {
            kind,
            major,
            minor,
            access,
        }
    }

    fn rule(
        allow: bool,
        kind: DeviceKind,
        major: Option<u32>,
        minor: Option<u32>,
        access: u8,
    ) -> DeviceRule {
        DeviceRule {
            allow,
            kind,
            major,
            minor,
            access,
        }
    }

    use DeviceKind::{Block, Char};
    const RW: u8 = ACCESS_READ | ACCESS_WRITE;

    /// (request, allowed by the default rules)
    pub(crate) fn default_table() -> Vec<(DeviceRequest, bool)> {
        vec![
            (req(Char, 1, 3, RW), true),
            (req(Char, 1, 3, ACCESS_MKNOD), true),
            (req(Char, 1, 5, ACCESS_READ), true),
            (req(Char, 1, 7, ACCESS_WRITE), true),
            (req(Char, 1, 8, ACCESS_READ), true),
            (req(Char, 1, 9, RW), true),
            (req(Char, 5, 0, RW), true),
            (req(Char, 5, 2, RW), true),
            (req(Char, 136, 0, RW), true),
            (req(Char, 136, 77, ACCESS_WRITE), true),
            (req(Char, 5, 1, ACCESS_MKNOD), true),
            (req(Char, 5, 1, ACCESS_WRITE), false),
            (req(Char, 5, 1, ACCESS_READ), false),
            (req(Char, 1, 11, ACCESS_WRITE), false),
            (req(Char, 1, 1, ACCESS_READ), false),
            (req(Char, 1, 4, RW), false),
            (req(Char, 10, 200, RW), false),
            (req(Char, 4, 0, RW), false),
            (req(Char, 137, 0, RW), false),
            (req(Block, 7, 0, ACCESS_MKNOD), true),
            (req(Block, 7, 0, ACCESS_READ), false),
            (req(Block, 8, 0, RW), false),
            (req(Block, 1, 3, ACCESS_READ), false),
            (req(Block, 136, 0, ACCESS_READ), false),
            (req(Block, 253, 1, ACCESS_WRITE), false),
        ]
    }

    #[test]
    fn default_rules_allow_exactly_the_listed_devices() {
        let policy = DevicePolicy::from_rules(&normalize(&default_rules()).unwrap());
        assert!(!policy.default_allow);
        for (r, want) in default_table() {
            assert_eq!(policy.permits(&r), want, "{r:?}");
        }
        assert_eq!(
            policy.v1_list(),
            [
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
    }

    #[test]
    fn privileged_rules_allow_every_request() {
        let policy = DevicePolicy::from_rules(&normalize(&privileged_rules()).unwrap());
        for (r, _) in default_table() {
            assert!(policy.permits(&r), "{r:?}");
        }
        assert_eq!(policy.v1_list(), ["a *:* rwm"]);
    }

    #[test]
    fn kernel_list_semantics() {
        // Same device twice: access bits merge.
        let p = DevicePolicy::from_rules(&[
            rule(true, Char, Some(1), Some(3), ACCESS_READ),
            rule(true, Char, Some(1), Some(3), ACCESS_WRITE),
        ]);
        assert_eq!(p.v1_list(), ["c 1:3 rw"]);
        assert!(p.permits(&req(Char, 1, 3, RW)));
        // A deny removes bits only from the exactly matching exception.
        let p = DevicePolicy::from_rules(&[
            rule(true, Char, None, None, ACCESS_ALL),
            rule(true, Char, Some(1), Some(3), ACCESS_ALL),
            rule(false, Char, Some(1), Some(3), ACCESS_WRITE),
        ]);
        assert_eq!(p.v1_list(), ["c *:* rwm", "c 1:3 rm"]);
        assert!(
            p.permits(&req(Char, 1, 3, ACCESS_WRITE)),
            "c *:* still allows it"
        );
        // A rule of the default's kind with nothing to remove changes nothing.
        let p = DevicePolicy::from_rules(&[rule(false, Block, Some(8), None, ACCESS_READ)]);
        assert_eq!(p, DevicePolicy::from_rules(&[]));
        assert!(!p.permits(&req(Block, 8, 0, ACCESS_MKNOD)));
        // Default allow: exceptions deny on any shared bit; the list shows only `a`.
        let p = DevicePolicy::from_rules(&[
            rule(false, Char, Some(1), Some(3), ACCESS_ALL),
            rule(true, DeviceKind::All, None, None, ACCESS_ALL),
            rule(false, Block, None, None, ACCESS_WRITE),
        ]);
        assert!(p.default_allow);
        assert_eq!(p.exceptions.len(), 1, "the `a` rule emptied the list");
        assert!(p.permits(&req(Char, 1, 3, ACCESS_WRITE)));
        assert!(!p.permits(&req(Block, 8, 0, RW)));
        assert!(p.permits(&req(Block, 8, 0, ACCESS_READ)));
        assert_eq!(p.v1_list(), ["a *:* rwm"]);
    }
}
