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

fn sys_bpf<T>(cmd: libc::c_int, attr: &mut T) -> std::io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, initialized #[repr(C)] prefix of `union bpf_attr` whose
    // size we pass; every pointer inside it points to memory that outlives the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T as *mut libc::c_void,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if ret < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn load_attr(bytes: &[u8], insn_count: usize) -> ProgLoadAttr {
    let mut name = [0u8; 16];
    name[..PROG_NAME.len()].copy_from_slice(PROG_NAME);
    ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_CGROUP_DEVICE,
        insn_cnt: insn_count as u32,
        insns: bytes.as_ptr() as u64,
        license: LICENSE.as_ptr() as u64,
        prog_name: name,
        expected_attach_type: BPF_CGROUP_DEVICE,
        ..ProgLoadAttr::default()
    }
}

fn owned(fd: libc::c_long) -> OwnedFd {
    // SAFETY: bpf(BPF_PROG_LOAD) returned a new file descriptor that nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) }
}

/// Loads the program. The fast path asks for no log; when the kernel refuses the
/// program, it is loaded again with the verifier's log, which goes into the error.
pub fn load_device_program(insns: &[Insn]) -> Result<OwnedFd, DevicesError> {
    let bytes = encode_program(insns);
    let mut attr = load_attr(&bytes, insns.len());
    let first = match sys_bpf(BPF_PROG_LOAD, &mut attr) {
        Ok(fd) => return Ok(owned(fd)),
        Err(e) => e,
    };
    let mut log = vec![0u8; LOG_SIZE];
    let mut attr = load_attr(&bytes, insns.len());
    attr.log_level = LOG_LEVEL_VERIFIER;
    attr.log_size = LOG_SIZE as u32;
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
    let mut attr = ProgAttachAttr {
        target_fd: dir.as_raw_fd() as u32,
        attach_bpf_fd: prog.as_raw_fd() as u32,
        attach_type: BPF_CGROUP_DEVICE,
        attach_flags: BPF_F_ALLOW_MULTI,
        ..ProgAttachAttr::default()
    };
    sys_bpf(BPF_PROG_ATTACH, &mut attr)
        .map(|_| ())
        .map_err(|source| DevicesError::ProgramAttach {
            cgroup: cgroup.to_path_buf(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::devices::insn::{R0, R1};

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
