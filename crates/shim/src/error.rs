//! [`ShimError`]: why a shim could not start its container. The message is what the
//! daemon shows as the container's start failure, so it names the step that failed.

use std::path::PathBuf;

use libcontainer::error::LibcontainerError;

use podhost_runtime::RuntimeError;
use podhost_runtime::devices::DevicesError;
use podhost_runtime::userns::UsernsError;

/// Why the shim could not create and start its container.
#[derive(Debug, thiserror::Error)]
pub enum ShimError {
    /// The shim config the daemon wrote is not there (the attempt dir was removed
    /// between the daemon's write and the shim's start).
    #[error("{} does not exist", path.display())]
    ConfigMissing { path: PathBuf },
    /// The daemon did not say that the shim config is durable (it closed the shim's
    /// stdin without the byte: its fsync failed, or it died).
    #[error("the daemon did not confirm the shim config durable: {0}")]
    ConfigNotDurable(String),
    /// The shim config cannot be read or parsed.
    #[error("{0}")]
    ConfigRead(#[source] podhost_disk::DiskError),
    /// The overlay root filesystem could not be mounted.
    #[error("{0}")]
    Rootfs(#[source] RuntimeError),
    /// The root filesystem for a pod with its own user namespace (idmapped or
    /// chowned snapshots) could not be made.
    #[error("rootfs for the pod's user namespace: {0}")]
    UsernsRootfs(#[source] UsernsError),
    /// A pipe for the container's stdout or stderr could not be made.
    #[error("pipe: {0}")]
    Pipe(#[source] nix::Error),
    /// /dev/null, the container's stdin, cannot be opened.
    #[error("/dev/null: {0}")]
    DevNull(#[source] std::io::Error),
    /// libcontainer refused or failed to create the container.
    #[error("create container: {0}")]
    Create(#[source] LibcontainerError),
    /// libcontainer created the container but did not say which process is its init.
    #[error("libcontainer reported no init pid")]
    NoInitPid,
    /// The container's device rules could not be applied; it must not run without them.
    #[error("confine devices: {0}")]
    Devices(#[source] DevicesError),
    /// The precompiled seccomp program in the shim config is not intact.
    #[error("seccomp program in the shim config: {0}")]
    Seccomp(#[source] podhost_runtime::seccomp::ProgramError),
    /// libcontainer failed to start the created container.
    #[error("start container: {0}")]
    Start(#[source] LibcontainerError),
}
