//! Errors of the runtime module.

use std::path::PathBuf;

/// Everything that can go wrong while building or driving a container.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// A file or directory podhost needs could not be read or written.
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A system call failed.
    #[error("{what}: {source}")]
    Sys {
        what: String,
        #[source]
        source: nix::Error,
    },
    /// A JSON record on disk is not what podhost wrote.
    #[error("{path}: invalid JSON ({source}); remove the file if it is stale")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// The OCI runtime spec could not be built.
    #[error("container {container}: cannot build the OCI spec: {message}")]
    Spec { container: String, message: String },
    /// The container's settings cannot be applied (its user, securityContext,
    /// profiles): the message as the kubelet words it, shown as the container's
    /// `CreateContainerConfigError`.
    #[error("{0}")]
    ContainerConfig(String),
    /// libcontainer failed to create, start, exec into or delete a container.
    #[error("{0}")]
    Libcontainer(String),
    /// The shim process failed before the container started.
    #[error("container {container}: {message}")]
    ShimFailed { container: String, message: String },
    /// A pod's user namespace (its ID block, its rootfs) could not be set up.
    #[error("user namespace: {0}")]
    Userns(String),
    /// A state file (config.json, a record, a pid file) could not be read or written.
    #[error(transparent)]
    Disk(#[from] podhost_disk::DiskError),
    /// A cgroup v1 host lacks a hierarchy that container limits need.
    #[error(
        "cgroup v1 host without the {controllers} controller(s) mounted at /sys/fs/cgroup/<controller>"
    )]
    V1ControllersMissing { controllers: String },
    /// A resize would set a memory limit below what the cgroup uses now (the kernel
    /// would have to reclaim or OOM-kill): refused, as the kubelet refuses it.
    #[error("attempting to set {what} memory limit ({limit}) below current usage ({usage})")]
    MemoryBelowUsage {
        what: &'static str,
        limit: i64,
        usage: u64,
    },
    /// A helper process (sandbox or exec) failed.
    #[error("{helper} failed: {message}")]
    Helper {
        helper: &'static str,
        message: String,
    },
}

impl RuntimeError {
    pub fn io(what: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            what,
            path: path.into(),
            source,
        }
    }

    pub(crate) fn sys(what: impl Into<String>, source: nix::Error) -> Self {
        Self::Sys {
            what: what.into(),
            source,
        }
    }
}
