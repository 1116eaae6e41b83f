//! Compiles a [`DevicePolicy`] into a `BPF_PROG_TYPE_CGROUP_DEVICE` program.
//!
//! The kernel calls the program with `struct bpf_cgroup_dev_ctx { u32 access_type;
//! u32 major; u32 minor; }` (`access_type` = access bits << 16 | device type) and allows
//! the access when it returns 1. The program checks the exceptions one after the other
//! and returns the policy's answer for the first one that decides; if none does, the
//! default:
//! - default deny: an exception allows when it is about the device and holds every
//!   requested access bit;
//! - default allow: an exception denies when it is about the device and shares any
//!   requested access bit.

use super::DevicesError;
use super::insn::{Insn, R0, R1, R2, R3, R4, R5, R6};
use super::policy::{DevicePolicy, Exception};
use super::rules::{ACCESS_ALL, DeviceKind};

/// `BPF_DEVCG_DEV_BLOCK` and `BPF_DEVCG_DEV_CHAR`.
const DEV_BLOCK: i32 = 1;
const DEV_CHAR: i32 = 2;

// Where the registers hold the request while the exceptions are checked.
const TYPE: u8 = R2;
const ACCESS: u8 = R3;
const MAJOR: u8 = R4;
const MINOR: u8 = R5;
const SCRATCH: u8 = R6;

fn imm(n: u32) -> Result<i32, DevicesError> {
    // The kernel compares the 64-bit register with the sign-extended immediate: numbers
    // at or above 2^31 would never match. Device majors/minors are below 2^20.
    i32::try_from(n).map_err(|_| DevicesError::BadRule {
        rule: n.to_string(),
        reason: "device numbers must be below 2^31".into(),
    })
}

/// The instructions of one exception: jumps to the end of the block when it does not
/// decide, else sets R0 and exits.
fn exception_block(ex: &Exception, default_allow: bool) -> Result<Vec<Insn>, DevicesError> {
    // (instruction, whether it is a "not this one: skip the block" jump)
    let mut block: Vec<(Insn, bool)> = Vec::new();
    let kind = match ex.kind {
        DeviceKind::Char => DEV_CHAR,
        DeviceKind::Block => DEV_BLOCK,
        // The policy never keeps `a` as an exception.
        DeviceKind::All => unreachable!("`a` is a default, not an exception"),
    };
    block.push((Insn::jne_imm(TYPE, kind, 0), true));
    if let Some(m) = ex.major {
        block.push((Insn::jne_imm(MAJOR, imm(m)?, 0), true));
    }
    if let Some(m) = ex.minor {
        block.push((Insn::jne_imm(MINOR, imm(m)?, 0), true));
    }
    let access = i32::from(ex.access);
    if default_allow {
        // Denies when a requested bit is in the exception (every request has one).
        if ex.access != ACCESS_ALL {
            block.push((Insn::mov_reg(SCRATCH, ACCESS), false));
            block.push((Insn::and_imm(SCRATCH, access), false));
            block.push((Insn::jeq_imm(SCRATCH, 0, 0), true));
        }
        block.push((Insn::mov_imm(R0, 0), false));
    } else {
        // Allows when no requested bit is outside the exception.
        if ex.access != ACCESS_ALL {
            block.push((Insn::mov_reg(SCRATCH, ACCESS), false));
            block.push((
                Insn::and_imm(SCRATCH, i32::from(!ex.access & ACCESS_ALL)),
                false,
            ));
            block.push((Insn::jne_imm(SCRATCH, 0, 0), true));
        }
        block.push((Insn::mov_imm(R0, 1), false));
    }
    block.push((Insn::exit(), false));
    let len = block.len();
    block
        .into_iter()
        .enumerate()
        .map(|(i, (mut insn, skip))| {
            if skip {
                // Relative to the next instruction; a block is at most 9 long, so this
                // never fails.
                insn.off = i16::try_from(len - i - 1).map_err(|_| DevicesError::BadRule {
                    rule: format!("{ex:?}"),
                    reason: format!("a block of {len} instructions is too long to jump over"),
                })?;
            }
            Ok(insn)
        })
        .collect()
}

/// The whole program for `policy`.
pub fn compile(policy: &DevicePolicy) -> Result<Vec<Insn>, DevicesError> {
    let mut prog = vec![
        Insn::load_u32(TYPE, R1, 0),
        Insn::and_imm(TYPE, 0xffff),
        Insn::load_u32(ACCESS, R1, 0),
        Insn::rsh_imm(ACCESS, 16),
        Insn::load_u32(MAJOR, R1, 4),
        Insn::load_u32(MINOR, R1, 8),
    ];
    for ex in &policy.exceptions {
        prog.extend(exception_block(ex, policy.default_allow)?);
    }
    prog.push(Insn::mov_imm(R0, i32::from(policy.default_allow)));
    prog.push(Insn::exit());
    Ok(prog)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::insn::interp::run;
    use crate::devices::policy::DeviceRequest;
    use crate::devices::policy::tests::default_table;
    use crate::devices::rules::{
        ACCESS_MKNOD, ACCESS_READ, ACCESS_WRITE, DeviceRule, default_rules, normalize,
        privileged_rules,
    };

    fn ctx(r: &DeviceRequest) -> [u32; 3] {
        let kind = u32::try_from(match r.kind {
            DeviceKind::Char => DEV_CHAR,
            DeviceKind::Block => DEV_BLOCK,
            DeviceKind::All => unreachable!(),
        })
        .unwrap();
        [(u32::from(r.access) << 16) | kind, r.major, r.minor]
    }

    fn verdict(prog: &[Insn], r: &DeviceRequest) -> bool {
        match run(prog, ctx(r)) {
            0 => false,
            1 => true,
            other => panic!("the program returned {other}"),
        }
    }

    #[test]
    fn default_program_decides_the_table() {
        let policy = DevicePolicy::from_rules(&normalize(&default_rules()).unwrap());
        let prog = compile(&policy).unwrap();
        for (r, want) in default_table() {
            assert_eq!(verdict(&prog, &r), want, "{r:?}");
        }
    }

    #[test]
    fn privileged_program_allows_everything() {
        let policy = DevicePolicy::from_rules(&normalize(&privileged_rules()).unwrap());
        let prog = compile(&policy).unwrap();
        assert_eq!(prog.len(), 8, "no exceptions to check");
        for (r, _) in default_table() {
            assert!(verdict(&prog, &r), "{r:?}");
        }
    }

    /// Every request over a small device space against the reference decision, for rule
    /// lists that exercise both defaults, wildcards and partial access.
    #[test]
    fn program_agrees_with_the_policy_everywhere() {
        use DeviceKind::{All, Block, Char};
        let r = |allow, kind, major, minor, access| DeviceRule {
            allow,
            kind,
            major,
            minor,
            access,
        };
        let lists = vec![
            vec![],
            vec![r(true, All, None, None, ACCESS_ALL)],
            vec![
                r(true, Char, Some(1), None, ACCESS_READ),
                r(true, Char, Some(1), Some(2), ACCESS_WRITE),
                r(true, Block, None, Some(0), ACCESS_MKNOD | ACCESS_WRITE),
            ],
            vec![
                r(true, All, None, None, ACCESS_ALL),
                r(false, Char, Some(2), None, ACCESS_WRITE),
                r(false, Block, None, None, ACCESS_ALL),
                r(false, Char, Some(1), Some(1), ACCESS_READ | ACCESS_MKNOD),
            ],
            vec![
                r(true, Char, None, None, ACCESS_ALL),
                r(false, Char, None, None, ACCESS_READ),
            ],
        ];
        for rules in lists {
            let policy = DevicePolicy::from_rules(&rules);
            let prog = compile(&policy).unwrap();
            for kind in [Char, Block] {
                for major in 0..4 {
                    for minor in 0..4 {
                        for access in 1..=ACCESS_ALL {
                            let req = DeviceRequest {
                                kind,
                                major,
                                minor,
                                access,
                            };
                            assert_eq!(
                                verdict(&prog, &req),
                                policy.permits(&req),
                                "{rules:?} {req:?}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn huge_device_numbers_are_refused() {
        let policy = DevicePolicy::from_rules(&[DeviceRule {
            allow: true,
            kind: DeviceKind::Char,
            major: Some(u32::MAX),
            minor: None,
            access: ACCESS_ALL,
        }]);
        assert!(compile(&policy).is_err());
    }
}
