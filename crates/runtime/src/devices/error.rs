//! Errors of device confinement. Every one of them fails the container's start: a
//! container never runs without its device rules.

use std::path::PathBuf;

/// Why a container's device rules could not be built or applied.
#[derive(Debug, thiserror::Error)]
pub enum DevicesError {
    /// The bundle's config.json could not be read or parsed.
    #[error("{path}: cannot read the container's device rules: {message}")]
    Config { path: PathBuf, message: String },
    /// A rule in the spec cannot be expressed for the kernel.
    #[error("device rule {rule:?} in linux.resources.devices: {reason}; fix the rule")]
    BadRule { rule: String, reason: String },
    /// Neither cgroup v2 at /sys/fs/cgroup nor a cgroup v1 devices controller.
    #[error(
        "no way to confine devices on this host: /sys/fs/cgroup is not cgroup2 and no cgroup v1 \
         devices controller is mounted ({detail}); mount the devices controller or boot with \
         cgroup v2"
    )]
    NoDevicesCgroup { detail: String },
    /// A cgroup file or directory could not be opened, read or written.
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The v1 devices cgroup does not list what was written to it.
    #[error(
        "{path}: the kernel's device list is not the one podhost wrote (expected {expected:?}, \
         found {actual:?}); is another agent managing this cgroup?"
    )]
    V1Mismatch {
        path: PathBuf,
        expected: Vec<String>,
        actual: Vec<String>,
    },
    /// The kernel refused the eBPF device program; `log` is the verifier's output.
    #[error(
        "the kernel refused the eBPF device program ({source}); the kernel needs \
         CONFIG_CGROUP_BPF; verifier log: {log}"
    )]
    ProgramLoad {
        #[source]
        source: std::io::Error,
        log: String,
    },
    /// The device program could not be attached to the container's cgroup.
    #[error("cannot attach the eBPF device program to cgroup {cgroup}: {source}")]
    ProgramAttach {
        cgroup: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl DevicesError {
    pub(crate) fn io(what: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            what,
            path: path.into(),
            source,
        }
    }
}
