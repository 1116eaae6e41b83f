//! A seccomp filter compiled once to its BPF program, and loaded from that program.
//!
//! libcontainer 0.7 builds a libseccomp context from `linux.seccomp` and compiles it
//! inside every container's init (~9 ms of CPU for RuntimeDefault). The program only
//! depends on the filter, the libseccomp version and the machine, so podhost compiles
//! it once ([`compile`], with exactly the context libcontainer builds: same default
//! action, architectures, flags, rules, and no_new_privs left to the runtime), keeps it
//! ([`super::cache`]), and the container's process loads the finished program with
//! seccomp(2) ([`CompiledFilter::load`]) with the flags libseccomp would pass.

use std::collections::HashSet;
use std::io::{Read, Seek};

use libseccomp::{ScmpAction, ScmpArch, ScmpArgCompare, ScmpCompareOp};
use libseccomp::{ScmpFilterContext, ScmpSyscall};
use oci_spec::runtime::{
    Arch, LinuxSeccomp, LinuxSeccompAction, LinuxSeccompFilterFlag, LinuxSeccompOperator,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::error::ProgramError;

/// Bytes of one BPF instruction (`struct sock_filter`).
const INSTRUCTION_BYTES: usize = 8;
/// The kernel's limit on a filter's instructions (BPF_MAXINSNS).
const MAX_INSTRUCTIONS: usize = 4096;
/// `PTRACE_SECCOMP_GET_FILTER` (linux/ptrace.h; not in the libc crate).
const PTRACE_SECCOMP_GET_FILTER: libc::c_uint = 0x420c;

/// A filter's BPF program and the seccomp(2) flags it is loaded with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompiledFilter {
    /// The `struct sock_filter` array in this machine's byte order, hex-encoded.
    #[serde(with = "hex_bytes")]
    pub program: Vec<u8>,
    /// `SECCOMP_FILTER_FLAG_*` bits, as libseccomp's `seccomp_load` passes them.
    pub flags: u32,
    /// SHA-256 of `program`, hex: checked before the program is loaded.
    pub sha256: String,
}

mod hex_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&hex::encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        hex::decode(text).map_err(serde::de::Error::custom)
    }
}

/// The hex SHA-256 of a program.
fn program_sha256(program: &[u8]) -> String {
    hex::encode(Sha256::digest(program))
}

impl CompiledFilter {
    /// A program checked for shape (whole instructions, within the kernel's limit).
    pub(crate) fn new(program: Vec<u8>, flags: u32) -> Result<Self, ProgramError> {
        check_shape(&program)?;
        let sha256 = program_sha256(&program);
        Ok(Self {
            program,
            flags,
            sha256,
        })
    }

    /// Number of BPF instructions.
    pub fn instructions(&self) -> usize {
        self.program.len() / INSTRUCTION_BYTES
    }

    /// Fails unless the program has a valid shape and matches its recorded hash.
    pub fn verify(&self) -> Result<(), ProgramError> {
        check_shape(&self.program)?;
        let actual = program_sha256(&self.program);
        if actual != self.sha256 {
            return Err(ProgramError::HashMismatch {
                expected: self.sha256.clone(),
                actual,
            });
        }
        Ok(())
    }

    /// Loads the program into this thread with seccomp(2) `SECCOMP_SET_MODE_FILTER`.
    /// Without no_new_privs the caller needs CAP_SYS_ADMIN, as with libseccomp.
    pub fn load(&self) -> Result<(), ProgramError> {
        self.verify()?;
        let mut instructions: Vec<libc::sock_filter> = self
            .program
            .chunks_exact(INSTRUCTION_BYTES)
            .map(|i| libc::sock_filter {
                code: u16::from_ne_bytes([i[0], i[1]]),
                jt: i[2],
                jf: i[3],
                k: u32::from_ne_bytes([i[4], i[5], i[6], i[7]]),
            })
            .collect();
        let prog = libc::sock_fprog {
            // check_shape bounds the count to MAX_INSTRUCTIONS, which fits.
            len: u16::try_from(instructions.len()).map_err(|_| ProgramError::TooLong {
                instructions: instructions.len(),
            })?,
            filter: instructions.as_mut_ptr(),
        };
        // SAFETY: `prog` points at `instructions`, a live, initialised array of `len`
        // sock_filter entries that outlives the call; the kernel copies the program.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                libc::c_ulong::from(self.flags),
                &prog as *const libc::sock_fprog,
            )
        };
        if rc < 0 {
            return Err(ProgramError::Load(std::io::Error::last_os_error()));
        }
        Ok(())
    }
}

fn check_shape(program: &[u8]) -> Result<(), ProgramError> {
    if program.is_empty() || !program.len().is_multiple_of(INSTRUCTION_BYTES) {
        return Err(ProgramError::Shape {
            bytes: program.len(),
        });
    }
    let instructions = program.len() / INSTRUCTION_BYTES;
    if instructions > MAX_INSTRUCTIONS {
        return Err(ProgramError::TooLong { instructions });
    }
    Ok(())
}

/// Compiles `seccomp` (OCI meaning: a masked comparison's `value` is the mask) with
/// libseccomp, into the program libcontainer 0.7's `initialize_seccomp` would load for
/// the same filter (given to it with masked comparisons in its order, see
/// [`super::for_libcontainer`]).
pub fn compile(seccomp: &LinuxSeccomp) -> Result<CompiledFilter, ProgramError> {
    if seccomp.default_action() == LinuxSeccompAction::ScmpActNotify
        || seccomp
            .syscalls()
            .iter()
            .flatten()
            .any(|s| s.action() == LinuxSeccompAction::ScmpActNotify)
    {
        return Err(ProgramError::Notify);
    }
    let lib = |what: &'static str| move |source| ProgramError::Libseccomp { what, source };
    let default_action = action(seccomp.default_action(), seccomp.default_errno_ret())?;
    let mut ctx = ScmpFilterContext::new(default_action).map_err(lib("create the context"))?;
    let mut flags = 0u32;
    for flag in seccomp.flags().iter().flatten() {
        // The context attribute as libcontainer sets it, and the load flag libseccomp
        // derives from that attribute.
        let (set, bit) = match flag {
            LinuxSeccompFilterFlag::SeccompFilterFlagLog => {
                (ctx.set_ctl_log(true), libc::SECCOMP_FILTER_FLAG_LOG)
            }
            LinuxSeccompFilterFlag::SeccompFilterFlagTsync => {
                (ctx.set_ctl_tsync(true), libc::SECCOMP_FILTER_FLAG_TSYNC)
            }
            LinuxSeccompFilterFlag::SeccompFilterFlagSpecAllow => {
                (ctx.set_ctl_ssb(true), libc::SECCOMP_FILTER_FLAG_SPEC_ALLOW)
            }
            LinuxSeccompFilterFlag::SeccompFilterFlagWaitKillableRecv => (
                ctx.set_ctl_waitkill(true),
                libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV,
            ),
        };
        set.map_err(lib("set a filter flag"))?;
        flags |= u32::try_from(bit).unwrap_or(0);
    }
    for arch in seccomp.architectures().iter().flatten() {
        ctx.add_arch(scmp_arch(*arch))
            .map_err(lib("add an architecture"))?;
    }
    // no_new_privs is the runtime's business (process.noNewPrivileges), never the
    // loader's; the exported program does not depend on it.
    ctx.set_ctl_nnp(false).map_err(lib("clear CTL_NNP"))?;
    let mut unknown = Vec::new();
    for rule in seccomp.syscalls().iter().flatten() {
        let rule_action = action(rule.action(), rule.errno_ret())?;
        if rule_action == default_action {
            // Redundant, and libseccomp refuses it.
            continue;
        }
        for name in rule.names() {
            let Ok(syscall) = ScmpSyscall::from_name(name) else {
                // A syscall this libseccomp does not know (newer than it): skipped,
                // as libcontainer and runc skip it.
                unknown.push(name.as_str());
                continue;
            };
            let comparisons: Vec<ScmpArgCompare> =
                rule.args().iter().flatten().map(comparison).collect();
            let indexes: HashSet<u64> = rule
                .args()
                .iter()
                .flatten()
                .map(|a| a.index() as u64)
                .collect();
            if comparisons.is_empty() {
                ctx.add_rule(rule_action, syscall)
                    .map_err(lib("add a rule"))?;
            } else if indexes.len() == comparisons.len() {
                ctx.add_rule_conditional(rule_action, syscall, &comparisons)
                    .map_err(lib("add a conditional rule"))?;
            } else {
                // One argument compared twice: one rule per comparison (runc's and
                // libcontainer's way; libseccomp allows one comparison per argument).
                for c in &comparisons {
                    ctx.add_rule_conditional(rule_action, syscall, std::slice::from_ref(c))
                        .map_err(lib("add a conditional rule"))?;
                }
            }
        }
    }
    if !unknown.is_empty() {
        tracing::debug!(syscalls = ?unknown, "seccomp rules for syscalls libseccomp does not know were skipped");
    }
    CompiledFilter::new(export(&ctx)?, flags)
}

/// The context's program, through a memfd (libseccomp 2.5 exports to a descriptor only).
fn export(ctx: &ScmpFilterContext) -> Result<Vec<u8>, ProgramError> {
    let fd =
        nix::sys::memfd::memfd_create("podhost-seccomp", nix::sys::memfd::MFdFlags::MFD_CLOEXEC)
            .map_err(|e| ProgramError::Export(std::io::Error::from(e)))?;
    let mut file = std::fs::File::from(fd);
    ctx.export_bpf(&file)
        .map_err(|source| ProgramError::Libseccomp {
            what: "export the program",
            source,
        })?;
    let mut program = Vec::new();
    file.rewind()
        .and_then(|_| file.read_to_end(&mut program))
        .map_err(ProgramError::Export)?;
    Ok(program)
}

fn comparison(arg: &oci_spec::runtime::LinuxSeccompArg) -> ScmpArgCompare {
    let index = u32::try_from(arg.index()).unwrap_or(u32::MAX);
    let (op, datum) = match arg.op() {
        LinuxSeccompOperator::ScmpCmpNe => (ScmpCompareOp::NotEqual, arg.value()),
        LinuxSeccompOperator::ScmpCmpLt => (ScmpCompareOp::Less, arg.value()),
        LinuxSeccompOperator::ScmpCmpLe => (ScmpCompareOp::LessOrEqual, arg.value()),
        LinuxSeccompOperator::ScmpCmpEq => (ScmpCompareOp::Equal, arg.value()),
        LinuxSeccompOperator::ScmpCmpGe => (ScmpCompareOp::GreaterEqual, arg.value()),
        LinuxSeccompOperator::ScmpCmpGt => (ScmpCompareOp::Greater, arg.value()),
        // OCI: `value` is the mask, `valueTwo` what the masked argument must equal.
        LinuxSeccompOperator::ScmpCmpMaskedEq => (
            ScmpCompareOp::MaskedEqual(arg.value()),
            arg.value_two().unwrap_or(0),
        ),
    };
    ScmpArgCompare::new(index, op, datum)
}

/// libseccomp's action for an OCI one (errno defaults to EPERM, as in libcontainer).
fn action(action: LinuxSeccompAction, errno: Option<u32>) -> Result<ScmpAction, ProgramError> {
    let errno = errno
        .and_then(|e| i32::try_from(e).ok())
        .unwrap_or(libc::EPERM);
    Ok(match action {
        LinuxSeccompAction::ScmpActKill | LinuxSeccompAction::ScmpActKillThread => {
            ScmpAction::KillThread
        }
        LinuxSeccompAction::ScmpActKillProcess => ScmpAction::KillProcess,
        LinuxSeccompAction::ScmpActTrap => ScmpAction::Trap,
        LinuxSeccompAction::ScmpActErrno => ScmpAction::Errno(errno),
        LinuxSeccompAction::ScmpActTrace => ScmpAction::Trace(
            u16::try_from(errno).map_err(|_| ProgramError::TraceValue { value: errno })?,
        ),
        LinuxSeccompAction::ScmpActAllow => ScmpAction::Allow,
        LinuxSeccompAction::ScmpActLog => ScmpAction::Log,
        LinuxSeccompAction::ScmpActNotify => return Err(ProgramError::Notify),
    })
}

fn scmp_arch(arch: Arch) -> ScmpArch {
    match arch {
        Arch::ScmpArchNative => ScmpArch::Native,
        Arch::ScmpArchX86 => ScmpArch::X86,
        Arch::ScmpArchX86_64 => ScmpArch::X8664,
        Arch::ScmpArchX32 => ScmpArch::X32,
        Arch::ScmpArchArm => ScmpArch::Arm,
        Arch::ScmpArchAarch64 => ScmpArch::Aarch64,
        Arch::ScmpArchMips => ScmpArch::Mips,
        Arch::ScmpArchMips64 => ScmpArch::Mips64,
        Arch::ScmpArchMips64n32 => ScmpArch::Mips64N32,
        Arch::ScmpArchMipsel => ScmpArch::Mipsel,
        Arch::ScmpArchMipsel64 => ScmpArch::Mipsel64,
        Arch::ScmpArchMipsel64n32 => ScmpArch::Mipsel64N32,
        Arch::ScmpArchPpc => ScmpArch::Ppc,
        Arch::ScmpArchPpc64 => ScmpArch::Ppc64,
        Arch::ScmpArchPpc64le => ScmpArch::Ppc64Le,
        Arch::ScmpArchS390 => ScmpArch::S390,
        Arch::ScmpArchS390x => ScmpArch::S390X,
        Arch::ScmpArchRiscv64 => ScmpArch::Riscv64,
        Arch::ScmpArchParisc => ScmpArch::Parisc,
        Arch::ScmpArchParisc64 => ScmpArch::Parisc64,
        Arch::ScmpArchLoongarch64 => ScmpArch::Loongarch64,
        Arch::ScmpArchM68k => ScmpArch::M68k,
        Arch::ScmpArchSh => ScmpArch::Sh,
        Arch::ScmpArchSheb => ScmpArch::Sheb,
    }
}

/// What makes two compiles of the same filter the same program: the libseccomp
/// version, the kernel's seccomp API level as libseccomp sees it, and the machine.
pub fn compiler_identity() -> String {
    let version = libseccomp::ScmpVersion::current()
        .map(|v| format!("{}.{}.{}", v.major, v.minor, v.micro))
        .unwrap_or_else(|_| "unknown".into());
    format!(
        "libseccomp {version} api {} {}",
        libseccomp::get_api(),
        std::env::consts::ARCH
    )
}

/// The `index`th filter (0: the most recent) of process `pid`, read back with
/// `PTRACE_SECCOMP_GET_FILTER` (needs CAP_SYS_ADMIN, and `pid` must be a
/// ptrace-stopped tracee of the caller).
pub fn loaded_program(pid: i32, index: u64) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; MAX_INSTRUCTIONS * INSTRUCTION_BYTES];
    // SAFETY: ptrace(PTRACE_SECCOMP_GET_FILTER) writes at most BPF_MAXINSNS
    // instructions into `buf`, which has room for exactly that many.
    let count = unsafe {
        libc::ptrace(
            PTRACE_SECCOMP_GET_FILTER,
            pid,
            index as *mut libc::c_void,
            buf.as_mut_ptr().cast::<libc::c_void>(),
        )
    };
    let count = usize::try_from(count).map_err(|_| std::io::Error::last_os_error())?;
    buf.truncate(count * INSTRUCTION_BYTES);
    Ok(buf)
}

/// The `index`th filter of any process `pid` (root): seizes it, stops it for the
/// moment of the read, and lets it go on. How the tests prove which program a
/// container's process runs under.
pub fn read_loaded_filter(pid: i32, index: u64) -> std::io::Result<Vec<u8>> {
    let last = std::io::Error::last_os_error;
    // SAFETY: PTRACE_SEIZE takes no pointers; it attaches to `pid` without stopping it.
    if unsafe { libc::ptrace(libc::PTRACE_SEIZE, pid, 0usize, 0usize) } < 0 {
        return Err(last());
    }
    let result = (|| {
        // SAFETY: PTRACE_INTERRUPT takes no pointers; it stops the seized tracee.
        if unsafe { libc::ptrace(libc::PTRACE_INTERRUPT, pid, 0usize, 0usize) } < 0 {
            return Err(last());
        }
        let mut status = 0;
        // SAFETY: waitpid writes the status into a live local.
        if unsafe { libc::waitpid(pid, &mut status, libc::__WALL) } < 0 {
            return Err(last());
        }
        loaded_program(pid, index)
    })();
    // SAFETY: PTRACE_DETACH with signal 0 takes no pointers; the tracee resumes.
    unsafe { libc::ptrace(libc::PTRACE_DETACH, pid, 0usize, 0usize) };
    result
}
