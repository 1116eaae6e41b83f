//! The built-in RuntimeDefault profile, rendered for real capability sets and checked
//! with a small evaluator of OCI seccomp rules (what libseccomp builds from them: the
//! first rule naming the call whose argument conditions all hold decides, otherwise the
//! default action). The kernel-side behaviour is checked end to end by
//! tests/seccomp.rs and the VM check 55-seccomp.

use std::collections::HashSet;

use oci_spec::runtime::{
    Arch, Capability, LinuxSeccomp, LinuxSeccompAction, LinuxSeccompArg, LinuxSeccompOperator,
};

use super::*;
use podhost_model_core::capabilities::DEFAULT_CAPABILITIES;

#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Allow,
    Errno(u32),
}

const EPERM: Verdict = Verdict::Errno(libc::EPERM as u32);
const ENOSYS: Verdict = Verdict::Errno(libc::ENOSYS as u32);

fn holds(arg: &LinuxSeccompArg, args: &[u64]) -> bool {
    let v = args.get(arg.index()).copied().unwrap_or(0);
    match arg.op() {
        LinuxSeccompOperator::ScmpCmpEq => v == arg.value(),
        LinuxSeccompOperator::ScmpCmpNe => v != arg.value(),
        LinuxSeccompOperator::ScmpCmpLt => v < arg.value(),
        LinuxSeccompOperator::ScmpCmpLe => v <= arg.value(),
        LinuxSeccompOperator::ScmpCmpGt => v > arg.value(),
        LinuxSeccompOperator::ScmpCmpGe => v >= arg.value(),
        LinuxSeccompOperator::ScmpCmpMaskedEq => v & arg.value() == arg.value_two().unwrap_or(0),
    }
}

fn verdict(s: &LinuxSeccomp, name: &str, args: &[u64]) -> Verdict {
    let to_verdict = |action, errno: Option<u32>| match action {
        LinuxSeccompAction::ScmpActAllow => Verdict::Allow,
        LinuxSeccompAction::ScmpActErrno => Verdict::Errno(errno.unwrap_or(libc::EPERM as u32)),
        other => panic!("unexpected action {other:?}"),
    };
    for rule in s.syscalls().iter().flatten() {
        if !rule.names().iter().any(|n| n == name) {
            continue;
        }
        if rule.args().iter().flatten().all(|a| holds(a, args)) {
            return to_verdict(rule.action(), rule.errno_ret());
        }
    }
    to_verdict(s.default_action(), s.default_errno_ret())
}

fn default_caps() -> HashSet<Capability> {
    let caps: HashSet<Capability> = super::default_capabilities().into_iter().collect();
    assert_eq!(
        caps.len(),
        DEFAULT_CAPABILITIES.len(),
        "every default capability parses"
    );
    caps
}

fn with(extra: Capability) -> HashSet<Capability> {
    let mut caps = default_caps();
    caps.insert(extra);
    caps
}

fn x86(caps: &HashSet<Capability>) -> LinuxSeccomp {
    runtime_default("x86_64", caps).unwrap()
}

const CLONE_NEWUSER: u64 = libc::CLONE_NEWUSER as u64;
const CLONE_NEWNS: u64 = libc::CLONE_NEWNS as u64;
const SIGCHLD: u64 = libc::SIGCHLD as u64;

#[test]
fn the_embedded_profile_renders_for_both_machines() {
    let s = x86(&default_caps());
    assert_eq!(s.default_action(), LinuxSeccompAction::ScmpActErrno);
    assert_eq!(s.default_errno_ret(), Some(libc::EPERM as u32));
    assert_eq!(
        s.architectures().as_deref(),
        Some(&[Arch::ScmpArchX86_64, Arch::ScmpArchX86, Arch::ScmpArchX32][..])
    );
    assert_eq!(verdict(&s, "arch_prctl", &[]), Verdict::Allow);
    assert_eq!(verdict(&s, "set_tls", &[]), EPERM);

    let arm = runtime_default("aarch64", &default_caps()).unwrap();
    assert_eq!(
        arm.architectures().as_deref(),
        Some(&[Arch::ScmpArchAarch64, Arch::ScmpArchArm][..])
    );
    assert_eq!(verdict(&arm, "set_tls", &[]), Verdict::Allow);
    assert_eq!(verdict(&arm, "arch_prctl", &[]), EPERM);

    let err = runtime_default("riscv64", &default_caps()).unwrap_err();
    assert!(
        matches!(err, SeccompError::UnsupportedMachine { .. }),
        "{err}"
    );
}

#[test]
fn linux_seccomp_maps_the_three_profiles() {
    let dir = Path::new("/nonexistent");
    let none = linux_seccomp(&SeccompProfile::Unconfined, &default_caps(), dir).unwrap();
    assert!(none.is_none());
    let rd = linux_seccomp(&SeccompProfile::RuntimeDefault, &default_caps(), dir).unwrap();
    assert_eq!(
        rd.unwrap().default_action(),
        LinuxSeccompAction::ScmpActErrno
    );
    let err = linux_seccomp(
        &SeccompProfile::Localhost("p.json".into()),
        &default_caps(),
        dir,
    )
    .unwrap_err();
    assert!(err.to_string().contains("/nonexistent"), "{err}");
}

#[test]
fn default_capabilities_allow_the_usual_calls() {
    let s = x86(&default_caps());
    for name in [
        "read",
        "write",
        "openat",
        "close",
        "mmap",
        "execve",
        "getpid",
        "futex",
        "epoll_wait",
        "rt_sigaction",
        "wait4",
        "setuid",
        "capset",
        "prctl",
        "statx",
        "io_setup",
        "socketpair",
        "ptrace",
        // CAP_SYS_CHROOT is a default capability.
        "chroot",
    ] {
        assert_eq!(verdict(&s, name, &[]), Verdict::Allow, "{name}");
    }
    // fork and threads: clone without namespace flags.
    assert_eq!(verdict(&s, "clone", &[SIGCHLD]), Verdict::Allow);
    let threads = (libc::CLONE_VM | libc::CLONE_THREAD | libc::CLONE_SIGHAND) as u64;
    assert_eq!(verdict(&s, "clone", &[threads]), Verdict::Allow);
    assert_eq!(
        verdict(&s, "socket", &[libc::AF_INET as u64]),
        Verdict::Allow
    );
    assert_eq!(
        verdict(&s, "socket", &[libc::AF_UNIX as u64]),
        Verdict::Allow
    );
}

#[test]
fn default_capabilities_refuse_the_sys_admin_group_and_more() {
    let s = x86(&default_caps());
    for name in [
        "mount",
        "umount2",
        "unshare",
        "setns",
        "bpf",
        "perf_event_open",
        "fsopen",
        "open_tree",
        "sethostname",
        "lsm_set_self_attr",
        "keyctl",
        "add_key",
        "request_key",
        "io_uring_setup",
        "userfaultfd",
        "reboot",
        "init_module",
        "kexec_load",
        "syslog",
        "settimeofday",
        "clock_settime",
        "kcmp",
        "pidfd_getfd",
        "iopl",
        "acct",
        "vhangup",
        "mbind",
        "open_by_handle_at",
        "swapon",
        "pivot_root",
    ] {
        assert_eq!(verdict(&s, name, &[]), EPERM, "{name}");
    }
}

#[test]
fn clone_with_namespace_flags_is_refused_unless_cap_sys_admin() {
    let plain = x86(&default_caps());
    for flags in [CLONE_NEWUSER, CLONE_NEWNS, libc::CLONE_NEWNET as u64] {
        assert_eq!(verdict(&plain, "clone", &[flags | SIGCHLD]), EPERM);
    }
    assert_eq!(verdict(&plain, "clone3", &[]), ENOSYS);

    let admin = x86(&with(Capability::SysAdmin));
    assert_eq!(
        verdict(&admin, "clone", &[CLONE_NEWUSER | CLONE_NEWNS | SIGCHLD]),
        Verdict::Allow
    );
    assert_eq!(verdict(&admin, "clone3", &[]), Verdict::Allow);
    for name in ["mount", "unshare", "setns", "bpf", "syslog", "fsopen"] {
        assert_eq!(verdict(&admin, name, &[]), Verdict::Allow, "{name}");
    }
    // No argument-filtered clone rule and no ENOSYS clone3 rule remain.
    let rules = admin.syscalls().as_ref().unwrap();
    assert!(
        !rules
            .iter()
            .any(|r| r.names().iter().any(|n| n == "clone" || n == "clone3")
                && (r.args().is_some() || r.action() != LinuxSeccompAction::ScmpActAllow)),
        "{rules:?}"
    );
}

#[test]
fn socket_and_personality_are_filtered_by_argument() {
    let s = x86(&default_caps());
    assert_eq!(verdict(&s, "socket", &[libc::AF_ALG as u64]), EPERM);
    assert_eq!(verdict(&s, "socket", &[libc::AF_VSOCK as u64]), EPERM);
    // The families around them (AF_NFC 39, AF_XDP 44, AF_NETLINK 16) stay open.
    for family in [39, 44, libc::AF_NETLINK as u64, libc::AF_INET6 as u64] {
        assert_eq!(verdict(&s, "socket", &[family]), Verdict::Allow, "{family}");
    }
    for persona in [0x0, 0x8, 0x20000, 0x20008, 0xffff_ffff] {
        assert_eq!(
            verdict(&s, "personality", &[persona]),
            Verdict::Allow,
            "{persona:#x}"
        );
    }
    // ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC, PER_BSD.
    for persona in [0x0040000, 0x0400000, 0x6] {
        assert_eq!(
            verdict(&s, "personality", &[persona]),
            EPERM,
            "{persona:#x}"
        );
    }
    // The rules carry the conditions (not only the evaluator's view of them).
    let socket_rules: Vec<_> = s
        .syscalls()
        .iter()
        .flatten()
        .filter(|r| r.names().iter().any(|n| n == "socket"))
        .collect();
    assert_eq!(socket_rules.len(), 3);
    assert!(socket_rules.iter().all(|r| r.args().is_some()));
}

#[test]
fn each_capability_opens_its_own_group_only() {
    let groups = [
        (Capability::SysBoot, &["reboot"][..]),
        (
            Capability::SysModule,
            &["init_module", "finit_module", "delete_module"][..],
        ),
        (Capability::SysPacct, &["acct"][..]),
        (
            Capability::SysPtrace,
            &["kcmp", "pidfd_getfd", "process_madvise"][..],
        ),
        (Capability::SysRawio, &["iopl", "ioperm"][..]),
        (
            Capability::SysTime,
            &["settimeofday", "stime", "clock_settime"][..],
        ),
        (Capability::SysTtyConfig, &["vhangup"][..]),
        (
            Capability::SysNice,
            &["mbind", "get_mempolicy", "set_mempolicy"][..],
        ),
        (Capability::Syslog, &["syslog"][..]),
        (Capability::Bpf, &["bpf"][..]),
        (Capability::Perfmon, &["perf_event_open"][..]),
        (Capability::DacReadSearch, &["open_by_handle_at"][..]),
    ];
    let plain = x86(&default_caps());
    for (cap, names) in groups {
        let s = x86(&with(cap));
        for name in names {
            assert_eq!(verdict(&plain, name, &[]), EPERM, "{name} without {cap:?}");
            assert_eq!(
                verdict(&s, name, &[]),
                Verdict::Allow,
                "{name} with {cap:?}"
            );
        }
        // The capability opens nothing of CAP_SYS_ADMIN's.
        assert_eq!(verdict(&s, "mount", &[]), EPERM, "{cap:?}");
        assert_eq!(verdict(&s, "clone3", &[]), ENOSYS, "{cap:?}");
    }
    // Without CAP_SYS_CHROOT (dropped from the defaults), chroot is refused.
    let mut no_chroot = default_caps();
    no_chroot.remove(&Capability::SysChroot);
    assert_eq!(verdict(&x86(&no_chroot), "chroot", &[]), EPERM);
}

#[test]
fn no_call_has_both_an_unconditional_rule_and_another_action() {
    for caps in [default_caps(), with(Capability::SysAdmin)] {
        let s = x86(&caps);
        let rules = s.syscalls().as_ref().unwrap();
        for rule in rules.iter().filter(|r| r.args().is_none()) {
            for name in rule.names() {
                let conflicting = rules
                    .iter()
                    .any(|other| other.action() != rule.action() && other.names().contains(name));
                assert!(!conflicting, "{name} has rules with different actions");
            }
        }
    }
}
