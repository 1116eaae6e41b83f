//! The bpf(2) calls: load a device program (with the verifier's log when the kernel
//! refuses it) and attach it to a cgroup v2 directory.

use std::ffi::CStr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use super::DevicesError;
use super::insn::{Insn, encode_program};

// From linux/bpf.h.
const BPF_PROG_LOAD: libc::c_int = 5;
const BPF_PROG_ATTACH: libc::c_int = 8;
const BPF_PROG_TYPE_CGROUP_DEVICE: u32 = 15;
const BPF_CGROUP_DEVICE: u32 = 6;
const BPF_F_ALLOW_MULTI: u32 = 2;
const LOG_LEVEL_VERIFIER: u32 = 1;
const LOG_SIZE: usize = 64 * 1024;

/// The leading fields of `union bpf_attr` for `BPF_PROG_LOAD` (the kernel accepts a
/// shorter attr than its own and zero-fills the rest).
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// The fields of `union bpf_attr` for `BPF_PROG_ATTACH`.
#[repr(C)]
#[derive(Default)]
struct ProgAttachAttr {
    target_fd: u32,
    attach_bpf_fd: u32,
    attach_type: u32,
    attach_flags: u32,
    replace_bpf_fd: u32,
}

const LICENSE: &CStr = c"Apache-2.0";
const PROG_NAME: &[u8] = b"podhost_devices";

/// bpf(2) with `attr`; its non-negative result (a new fd, or 0) as a `c_int`.
fn sys_bpf<T>(cmd: libc::c_int, attr: &mut T) -> std::io::Result<libc::c_int> {
    let size = libc::c_uint::try_from(std::mem::size_of::<T>())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::E2BIG))?;
    // SAFETY: `attr` is a live, initialized #[repr(C)] prefix of `union bpf_attr` whose
    // size we pass; every pointer inside it points to memory that outlives the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T as *mut libc::c_void,
            size,
        )
    };
    if ret < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // bpf(2) returns an int; a wider value would be a kernel bug.
    libc::c_int::try_from(ret).map_err(|_| std::io::Error::from_raw_os_error(libc::ERANGE))
}

/// An fd as bpf_attr's u32 field; the fd of an open file is never negative.
fn attr_fd(fd: &impl AsRawFd) -> std::io::Result<u32> {
    u32::try_from(fd.as_raw_fd()).map_err(|_| std::io::Error::from_raw_os_error(libc::EBADF))
}

fn load_attr(bytes: &[u8], insn_count: u32) -> ProgLoadAttr {
    let mut name = [0u8; 16];
    name[..PROG_NAME.len()].copy_from_slice(PROG_NAME);
    ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_CGROUP_DEVICE,
        insn_cnt: insn_count,
        insns: bytes.as_ptr() as u64,
        license: LICENSE.as_ptr() as u64,
        prog_name: name,
        expected_attach_type: BPF_CGROUP_DEVICE,
        ..ProgLoadAttr::default()
    }
}

fn owned(fd: libc::c_int) -> OwnedFd {
    // SAFETY: bpf(BPF_PROG_LOAD) returned a new file descriptor that nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// Loads the program. The fast path asks for no log; when the kernel refuses the
/// program, it is loaded again with the verifier's log, which goes into the error.
pub fn load_device_program(insns: &[Insn]) -> Result<OwnedFd, DevicesError> {
    let bytes = encode_program(insns);
    let count = u32::try_from(insns.len()).map_err(|_| DevicesError::ProgramLoad {
        source: std::io::Error::from_raw_os_error(libc::E2BIG),
        log: format!("{} instructions: more than bpf(2) can count", insns.len()),
    })?;
    let mut attr = load_attr(&bytes, count);
    let first = match sys_bpf(BPF_PROG_LOAD, &mut attr) {
        Ok(fd) => return Ok(owned(fd)),
        Err(e) => e,
    };
    let mut log = vec![0u8; LOG_SIZE];
    let mut attr = load_attr(&bytes, count);
    attr.log_level = LOG_LEVEL_VERIFIER;
    // Never more than the buffer holds (a constant far below u32::MAX).
    attr.log_size = u32::try_from(log.len()).unwrap_or(u32::MAX);
    attr.log_buf = log.as_mut_ptr() as u64;
    match sys_bpf(BPF_PROG_LOAD, &mut attr) {
        Ok(fd) => {
            // Refused once, accepted with a log (e.g. a transient ENOMEM): use it.
            tracing::warn!(error = %first, "the device program loaded on the second try");
            Ok(owned(fd))
        }
        Err(source) => {
            let end = log.iter().position(|b| *b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]).trim().to_string();
            Err(DevicesError::ProgramLoad {
                source,
                log: if text.is_empty() {
                    "(empty)".into()
                } else {
                    text
                },
            })
        }
    }
}

/// Attaches a loaded device program to the cgroup v2 directory `cgroup` with
/// `BPF_F_ALLOW_MULTI` (programs of parent cgroups keep applying too). The cgroup holds
/// its own reference: the program stays attached after `prog` is closed, until the
/// cgroup is removed.
pub fn attach_device_program(prog: &OwnedFd, cgroup: &Path) -> Result<(), DevicesError> {
    let dir = std::fs::File::open(cgroup).map_err(|source| DevicesError::ProgramAttach {
        cgroup: cgroup.to_path_buf(),
        source,
    })?;
    let attach_error = |source| DevicesError::ProgramAttach {
        cgroup: cgroup.to_path_buf(),
        source,
    };
    let mut attr = ProgAttachAttr {
        target_fd: attr_fd(&dir).map_err(attach_error)?,
        attach_bpf_fd: attr_fd(prog).map_err(attach_error)?,
        attach_type: BPF_CGROUP_DEVICE,
        attach_flags: BPF_F_ALLOW_MULTI,
        ..ProgAttachAttr::default()
    };
    sys_bpf(BPF_PROG_ATTACH, &mut attr)
        .map(|_| ())
        .map_err(attach_error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::insn::{R0, R1};

    /// A program that reads past the context must come back with the verifier's words.
    #[test]
    fn a_refused_program_carries_the_verifier_log() {
        let bad = [
            Insn::load_u32(R0, R1, 64),
            Insn::mov_imm(R0, 1),
            Insn::exit(),
        ];
        let err = load_device_program(&bad).unwrap_err();
        let DevicesError::ProgramLoad { log, .. } = &err else {
            panic!("unexpected error {err}");
        };
        assert!(log.contains("invalid bpf_context access"), "{log}");
    }
}
