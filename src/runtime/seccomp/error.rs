//! Errors of the seccomp module.

use std::path::PathBuf;

/// Why a container's seccomp filter could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    /// A profile in podhost's format is malformed (the built-in one: a podhost bug).
    #[error("seccomp profile {name}: {message}; fix the profile (format: oci/seccomp/README.md)")]
    Profile { name: String, message: String },
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
    /// The profile parses but cannot be applied by podhost's runtime.
    #[error("seccomp profile {file}: {reason}")]
    LocalhostUnusable { file: PathBuf, reason: String },
}
