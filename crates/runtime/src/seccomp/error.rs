//! Errors of the seccomp module.

use std::path::PathBuf;

/// Why a container's seccomp filter could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    /// A profile in podhost's format is not valid JSON of that format (the built-in
    /// one: a podhost bug).
    #[error("seccomp profile {name}: {source}; fix the profile (format: oci/seccomp/README.md)")]
    ProfileJson {
        name: String,
        #[source]
        source: serde_json::Error,
    },
    /// A rule of a profile in podhost's format cannot be turned into OCI form.
    #[error(
        "seccomp profile {name}: {place}: {source}; fix the profile (format: oci/seccomp/README.md)"
    )]
    ProfileRule {
        name: String,
        /// Where in the profile: `defaultErrno`, or `group 3 (why the group exists)`.
        place: String,
        #[source]
        source: RuleError,
    },
    /// The profile lists no seccomp architectures for this machine.
    #[error(
        "seccomp profile {name} has no architectures for {machine}; run the pod Unconfined or give it a Localhost profile"
    )]
    UnsupportedMachine { name: String, machine: String },
    /// `localhostProfile` is not a relative path that stays inside the profile directory.
    #[error(
        "seccomp localhostProfile {path:?}: {reason}; give a path relative to {dir} without '..' (as the kubelet requires)"
    )]
    LocalhostPath {
        path: String,
        dir: PathBuf,
        reason: &'static str,
    },
    /// The profile file cannot be opened inside the profile directory.
    #[error(
        "seccomp profile {path:?} under {dir}: {source}; put the profile there (symlinks are resolved inside {dir}, never outside it)"
    )]
    LocalhostOpen {
        path: String,
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The profile is not a regular file.
    #[error("seccomp profile {file}: not a regular file; point localhostProfile at a JSON file")]
    LocalhostNotFile { file: PathBuf },
    /// The profile is larger than podhost reads.
    #[error(
        "seccomp profile {file}: larger than {max} bytes; a seccomp profile is a few KiB, check the file"
    )]
    LocalhostTooBig { file: PathBuf, max: u64 },
    /// Reading the profile failed.
    #[error("seccomp profile {file}: cannot read it: {source}")]
    LocalhostRead {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The profile is not an OCI `LinuxSeccomp` JSON document.
    #[error(
        "seccomp profile {file}: not an OCI linux.seccomp JSON document ({source}); write it in the runtime spec's LinuxSeccomp format"
    )]
    LocalhostJson {
        file: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// The profile uses SCMP_ACT_NOTIFY, which needs a seccomp agent podhost does not
    /// run (libcontainer would only refuse it when the container starts).
    #[error(
        "seccomp profile {file}: uses SCMP_ACT_NOTIFY, which needs a seccomp agent podhost does not run; use another action"
    )]
    LocalhostNotify { file: PathBuf },
}

/// Why one rule of a profile in podhost's format is wrong.
#[derive(Debug, thiserror::Error)]
pub enum RuleError {
    /// `allow` with an `errno`.
    #[error("allow takes no errno (got {errno})")]
    AllowWithErrno { errno: String },
    /// `errno` action without the errno to return.
    #[error("errno action without an errno name")]
    ErrnoWithoutName,
    /// An errno name podhost does not know.
    #[error("unknown errno name {name}")]
    UnknownErrno { name: String },
    /// A group with an empty `syscalls` list.
    #[error("names no syscalls")]
    NoSyscalls,
    /// An argument value or mask that is not a number.
    #[error("{value:?} is not a decimal or 0x-hex number: {source}")]
    BadNumber {
        value: String,
        #[source]
        source: std::num::ParseIntError,
    },
    /// `maskedEq` without `mask`.
    #[error("maskedEq needs a mask")]
    MaskedEqWithoutMask,
    /// A `mask` with an operator other than `maskedEq`.
    #[error("only maskedEq takes a mask")]
    MaskWithoutMaskedEq,
    /// oci-spec refused the argument condition.
    #[error("argument condition: {0}")]
    Arg(#[source] oci_spec::OciSpecError),
}

/// Why a filter could not be compiled to its program, kept, or loaded from it.
#[derive(Debug, thiserror::Error)]
pub enum ProgramError {
    /// SCMP_ACT_NOTIFY needs a listener descriptor handed to an agent: such a filter
    /// stays with libcontainer (podhost's profiles never use it).
    #[error("the filter uses SCMP_ACT_NOTIFY, which podhost does not precompile")]
    Notify,
    /// SCMP_ACT_TRACE's value does not fit the 16 bits the kernel passes on.
    #[error("SCMP_ACT_TRACE value {value} does not fit in 16 bits; fix the profile")]
    TraceValue { value: i32 },
    /// libseccomp refused a step of building the filter.
    #[error("libseccomp cannot {what}: {source}; check the profile against this host's libseccomp")]
    Libseccomp {
        what: &'static str,
        #[source]
        source: libseccomp::error::SeccompError,
    },
    /// The compiled program could not be read back from libseccomp.
    #[error("cannot export the compiled seccomp program: {0}")]
    Export(#[source] std::io::Error),
    /// The bytes are not whole BPF instructions.
    #[error("a seccomp program of {bytes} bytes is not a whole number of 8-byte BPF instructions")]
    Shape { bytes: usize },
    /// Longer than the kernel takes.
    #[error("a seccomp program of {instructions} instructions is longer than the kernel's 4096")]
    TooLong { instructions: usize },
    /// The program is not the one that was compiled.
    #[error(
        "the seccomp program's SHA-256 is {actual}, not the recorded {expected}: the record is corrupt; remove the container's bundle (or the cache file) so the daemon compiles the filter again"
    )]
    HashMismatch { expected: String, actual: String },
    /// The kernel refused the program.
    #[error("seccomp(SECCOMP_SET_MODE_FILTER) refused the program: {0}")]
    Load(#[source] std::io::Error),
    /// The container's capability sets could not be built (an oci-spec error).
    #[error("cannot build the container's capability sets: {0}")]
    Capabilities(String),
    /// A cache file could not be read (it is compiled again).
    #[error("seccomp program cache file {}: cannot read it: {source}", path.display())]
    CacheRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A cache file is not a valid, intact program (it is compiled again and replaced).
    #[error("seccomp program cache file {}: {reason}", path.display())]
    CacheCorrupt { path: PathBuf, reason: &'static str },
    /// A cache file could not be written.
    #[error("cannot keep the compiled seccomp program: {0}; check that the root dir is writable")]
    CacheWrite(#[source] podhost_disk::DiskError),
}
