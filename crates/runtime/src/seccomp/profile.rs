//! podhost's own seccomp profile format (oci/seccomp/README.md) and its rendering into
//! the OCI `linux.seccomp` of one container, for one machine architecture and one
//! capability set.

use std::collections::{BTreeMap, HashSet};

use oci_spec::runtime::{
    Arch, Capability, LinuxSeccomp, LinuxSeccompAction, LinuxSeccompArg, LinuxSeccompArgBuilder,
    LinuxSeccompOperator, LinuxSyscall,
};
use serde::Deserialize;

use super::SeccompError;
use super::error::RuleError;

/// A whole profile: the action for every syscall no group names, the seccomp
/// architectures per machine, and the groups.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Profile {
    /// Free text for readers of the file.
    #[serde(default)]
    #[allow(dead_code)]
    pub about: String,
    pub default_action: Action,
    /// With `defaultAction: errno`: the errno name (`EPERM`).
    #[serde(default)]
    pub default_errno: Option<String>,
    /// Machine (Rust's `std::env::consts::ARCH`: `x86_64`, `aarch64`) → the seccomp
    /// architectures a process of that machine can call the kernel with.
    pub architectures: BTreeMap<String, Vec<Arch>>,
    pub groups: Vec<Group>,
}

/// What a group does with the calls it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Action {
    Allow,
    Errno,
}

/// Syscalls with one action, given under conditions.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Group {
    /// Why the group exists (for readers).
    #[serde(default)]
    pub why: String,
    pub syscalls: Vec<String>,
    #[serde(default = "allow")]
    pub action: Action,
    /// With `action: errno`: the errno name (`ENOSYS`).
    #[serde(default)]
    pub errno: Option<String>,
    /// The group applies only when the container has this capability.
    #[serde(default)]
    pub requires_cap: Option<Capability>,
    /// The group applies only when the container lacks this capability.
    #[serde(default)]
    pub unless_cap: Option<Capability>,
    /// The group applies only on these machines (empty: on all).
    #[serde(default)]
    pub arch: Vec<String>,
    /// Empty: the call is matched whatever its arguments. Otherwise it is matched when
    /// any one of these conditions holds.
    #[serde(default)]
    pub arg_any_of: Vec<ArgCondition>,
}

fn allow() -> Action {
    Action::Allow
}

/// One comparison of one syscall argument.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ArgCondition {
    pub arg: u32,
    pub op: ArgOp,
    /// The value compared with: a decimal or `0x` hex string.
    pub value: String,
    /// With `maskedEq`: the mask applied to the argument first.
    #[serde(default)]
    pub mask: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum ArgOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    MaskedEq,
}

impl Profile {
    /// Parses a profile in podhost's format.
    pub(crate) fn parse(json: &str, name: &str) -> Result<Self, SeccompError> {
        serde_json::from_str(json).map_err(|source| SeccompError::ProfileJson {
            name: name.to_string(),
            source,
        })
    }

    /// The OCI seccomp section for a container of machine `machine` whose capability
    /// set (bounding) is `caps`: the groups whose machine and capability conditions
    /// hold, each syscall group one OCI rule, each argument alternative its own rule.
    pub(crate) fn render(
        &self,
        name: &str,
        machine: &str,
        caps: &HashSet<Capability>,
    ) -> Result<LinuxSeccomp, SeccompError> {
        let bad = |place: String, source: RuleError| SeccompError::ProfileRule {
            name: name.to_string(),
            place,
            source,
        };
        let architectures = self
            .architectures
            .get(machine)
            .ok_or_else(|| SeccompError::UnsupportedMachine {
                name: name.to_string(),
                machine: machine.to_string(),
            })?
            .clone();
        let default_errno = errno_for(self.default_action, self.default_errno.as_deref())
            .map_err(|e| bad("defaultErrno".to_string(), e))?;
        let mut syscalls = Vec::new();
        for (i, group) in self.groups.iter().enumerate() {
            if !group.applies(machine, caps) {
                continue;
            }
            let at = |e: RuleError| bad(format!("group {i} ({})", group.why), e);
            if group.syscalls.is_empty() {
                return Err(at(RuleError::NoSyscalls));
            }
            let errno = errno_for(group.action, group.errno.as_deref()).map_err(at)?;
            let action = oci_action(group.action);
            let alternatives: Vec<Vec<LinuxSeccompArg>> = if group.arg_any_of.is_empty() {
                vec![Vec::new()]
            } else {
                group
                    .arg_any_of
                    .iter()
                    .map(|c| c.to_oci().map(|arg| vec![arg]))
                    .collect::<Result<_, _>>()
                    .map_err(at)?
            };
            for args in alternatives {
                let mut rule = LinuxSyscall::default();
                rule.set_names(group.syscalls.clone())
                    .set_action(action)
                    .set_errno_ret(errno)
                    .set_args((!args.is_empty()).then_some(args));
                syscalls.push(rule);
            }
        }
        let mut seccomp = LinuxSeccomp::default();
        seccomp
            .set_default_action(oci_action(self.default_action))
            .set_default_errno_ret(default_errno)
            .set_architectures(Some(architectures))
            .set_syscalls(Some(syscalls));
        Ok(seccomp)
    }
}

impl Group {
    /// Whether the group's machine and capability conditions hold.
    fn applies(&self, machine: &str, caps: &HashSet<Capability>) -> bool {
        (self.arch.is_empty() || self.arch.iter().any(|a| a == machine))
            && self.requires_cap.is_none_or(|c| caps.contains(&c))
            && self.unless_cap.is_none_or(|c| !caps.contains(&c))
    }
}

impl ArgCondition {
    fn to_oci(&self) -> Result<LinuxSeccompArg, RuleError> {
        let value = parse_number(&self.value)?;
        let arg = LinuxSeccompArgBuilder::default().index(self.arg as usize);
        let arg = match (self.op, &self.mask) {
            // OCI's SCMP_CMP_MASKED_EQ: `value` is the mask, `valueTwo` the expected value.
            (ArgOp::MaskedEq, Some(mask)) => arg
                .op(LinuxSeccompOperator::ScmpCmpMaskedEq)
                .value(parse_number(mask)?)
                .value_two(value),
            (ArgOp::MaskedEq, None) => return Err(RuleError::MaskedEqWithoutMask),
            (_, Some(_)) => return Err(RuleError::MaskWithoutMaskedEq),
            (op, None) => {
                let op = match op {
                    ArgOp::Eq => LinuxSeccompOperator::ScmpCmpEq,
                    ArgOp::Ne => LinuxSeccompOperator::ScmpCmpNe,
                    ArgOp::Lt => LinuxSeccompOperator::ScmpCmpLt,
                    ArgOp::Le => LinuxSeccompOperator::ScmpCmpLe,
                    ArgOp::Gt => LinuxSeccompOperator::ScmpCmpGt,
                    ArgOp::Ge => LinuxSeccompOperator::ScmpCmpGe,
                    ArgOp::MaskedEq => unreachable!("handled above"),
                };
                arg.op(op).value(value)
            }
        };
        arg.build().map_err(RuleError::Arg)
    }
}

fn oci_action(action: Action) -> LinuxSeccompAction {
    match action {
        Action::Allow => LinuxSeccompAction::ScmpActAllow,
        Action::Errno => LinuxSeccompAction::ScmpActErrno,
    }
}

/// The errno an action returns: required with `errno`, refused with `allow`.
fn errno_for(action: Action, errno: Option<&str>) -> Result<Option<u32>, RuleError> {
    match (action, errno) {
        (Action::Allow, None) => Ok(None),
        (Action::Allow, Some(e)) => Err(RuleError::AllowWithErrno {
            errno: e.to_string(),
        }),
        (Action::Errno, None) => Err(RuleError::ErrnoWithoutName),
        (Action::Errno, Some(name)) => {
            errno_number(name)
                .map(Some)
                .ok_or_else(|| RuleError::UnknownErrno {
                    name: name.to_string(),
                })
        }
    }
}

/// The errnos a profile may name (those the container runtimes' profiles use).
fn errno_number(name: &str) -> Option<u32> {
    let n = match name {
        "EPERM" => libc::EPERM,
        "ENOSYS" => libc::ENOSYS,
        "EACCES" => libc::EACCES,
        "EINVAL" => libc::EINVAL,
        "ENOTSUP" => libc::ENOTSUP,
        _ => return None,
    };
    u32::try_from(n).ok()
}

fn parse_number(s: &str) -> Result<u64, RuleError> {
    let parsed = match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse::<u64>(),
    };
    parsed.map_err(|source| RuleError::BadNumber {
        value: s.to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(groups: &str) -> Profile {
        Profile::parse(
            &format!(
                r#"{{"defaultAction":"errno","defaultErrno":"EPERM",
                    "architectures":{{"x86_64":["SCMP_ARCH_X86_64"]}},"groups":{groups}}}"#
            ),
            "test",
        )
        .unwrap()
    }

    #[test]
    fn masked_eq_puts_the_mask_in_value_and_the_expected_value_in_value_two() {
        let p = profile(
            r#"[{"syscalls":["clone"],"argAnyOf":[{"arg":0,"op":"maskedEq","mask":"0x7e020000","value":"0"}]}]"#,
        );
        let s = p.render("test", "x86_64", &HashSet::new()).unwrap();
        let arg = &s.syscalls().as_ref().unwrap()[0].args().as_ref().unwrap()[0];
        assert_eq!(arg.op(), LinuxSeccompOperator::ScmpCmpMaskedEq);
        assert_eq!(arg.value(), 0x7e02_0000);
        assert_eq!(arg.value_two(), Some(0));
    }

    #[test]
    fn each_argument_alternative_is_its_own_rule() {
        let p = profile(
            r#"[{"syscalls":["socket"],"argAnyOf":[{"arg":0,"op":"lt","value":"38"},{"arg":0,"op":"gt","value":"40"}]}]"#,
        );
        let s = p.render("test", "x86_64", &HashSet::new()).unwrap();
        let rules = s.syscalls().as_ref().unwrap();
        assert_eq!(rules.len(), 2);
        assert!(rules.iter().all(|r| r.args().as_ref().unwrap().len() == 1));
    }

    #[test]
    fn mistakes_in_a_group_are_named() {
        for (groups, needle) in [
            (
                r#"[{"syscalls":["x"],"action":"errno"}]"#,
                "without an errno",
            ),
            (r#"[{"syscalls":["x"],"errno":"EPERM"}]"#, "takes no errno"),
            (
                r#"[{"syscalls":["x"],"action":"errno","errno":"EWHAT"}]"#,
                "unknown errno",
            ),
            (
                r#"[{"syscalls":["x"],"argAnyOf":[{"arg":0,"op":"eq","value":"0xzz"}]}]"#,
                "not a decimal",
            ),
            (
                r#"[{"syscalls":["x"],"argAnyOf":[{"arg":0,"op":"maskedEq","value":"1"}]}]"#,
                "needs a mask",
            ),
            (r#"[{"syscalls":[]}]"#, "names no syscalls"),
        ] {
            let err = profile(groups)
                .render("test", "x86_64", &HashSet::new())
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{groups}: {err}");
        }
        let err = profile("[]")
            .render("test", "riscv64", &HashSet::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("riscv64"), "{err}");
        let err = Profile::parse(r#"{"defaultAction":"allow","typo":1}"#, "test")
            .unwrap_err()
            .to_string();
        assert!(err.contains("typo"), "{err}");
    }
}
