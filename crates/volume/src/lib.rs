//! Pod volumes: emptyDir (disk or tmpfs), hostPath, and the tmpfs of content volumes
//! (configMap, secret, downwardAPI, projected; filled by `content`), made under
//! `pods/<uid>/volumes/<kind>/<name>` and bind-mounted into containers.
//!
//! - `plan` (pure): the spec → volumes and each container's mounts, with the API
//!   server's checks.
//! - [`setup_pod_volumes`]: once per pod before its first container, idempotent (a
//!   restarted daemon calls it again).
//! - [`container_mounts`]: per container start: hostPath type checks, safe subPath
//!   binds, the mounts for the OCI spec.
//! - [`teardown_pod_volumes`] when the pod is done, [`sweep_orphan_volumes`] at daemon
//!   start; [`empty_dir_usage_exceeded`] for sizeLimit evictions.
//!
//! In the workspace (docs/architecture.md, "Crates"): uses rooted, model, disk, runtime.
//! It may not: reach below a container-writable directory except through
//! `podhost_rooted`.

pub mod content;
mod expand;
mod hostpath;
mod mountinfo;
mod mounts;
mod ownership;
pub mod plan;
mod setup;
mod subpath;
mod teardown;
mod usage;

use std::path::{Path, PathBuf};

pub use mounts::container_mounts;
pub use setup::{PodVolumesState, setup_pod_volumes};
pub use teardown::{sweep_orphan_volumes, teardown_pod_volumes};
pub use usage::{TreeUsage, empty_dir_usage_exceeded, tree_usage, usage_exceeded_message};

/// Why a pod's volumes cannot be made, used or released.
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    /// The spec's volumes break an API-server rule.
    #[error(transparent)]
    Plan(#[from] plan::PlanError),
    /// The kubelet's words; the volume named so the manifest can be fixed.
    #[error("hostPath type check failed: {} is not {what} (volume \"{volume}\")", path.display())]
    HostPathType {
        volume: String,
        path: PathBuf,
        what: &'static str,
    },
    /// A volume type podhost does not make.
    #[error(
        "volume \"{volume}\": {kind} volumes are not supported by podhost; use emptyDir, hostPath, configMap, secret, downwardAPI or projected"
    )]
    Unsupported { volume: String, kind: String },
    /// A subPath that leaves its volume (a symlink to `/etc`, say): refused, as the
    /// kubelet refuses it since CVE-2017-1002101.
    #[error("subPath \"{sub_path}\" of volume \"{volume}\" (container {container}) resolves outside the volume; it may not contain symlinks that leave {}", volume_path.display())]
    SubPathEscapes {
        volume: String,
        container: String,
        sub_path: String,
        volume_path: PathBuf,
    },
    /// Bidirectional / HostToContainer need a shared (or slave) source mount.
    #[error("volume \"{volume}\" (container {container}): mountPropagation {propagation} needs {} on a {need} mount; make it so (mount --make-rshared) or drop mountPropagation", path.display())]
    PropagationSource {
        volume: String,
        container: String,
        propagation: &'static str,
        path: PathBuf,
        need: &'static str,
    },
    /// A mount stayed busy through every retry: its directory is left in place.
    #[error("{} is still mounted (busy) after {tries} unmount attempts; the pod's volumes dir is kept: find what holds it (fuser -m) and run the daemon again", path.display())]
    StillMounted { path: PathBuf, tries: u32 },
    /// A call into a volume dir refused or failed (a symlink planted there, mostly).
    #[error(transparent)]
    Rooted(#[from] podhost_rooted::RootedError),
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl VolumeError {
    pub(crate) fn io(action: &'static str, path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    }

    pub(crate) fn errno(action: &'static str, path: &Path, e: nix::errno::Errno) -> Self {
        Self::io(action, path, std::io::Error::from(e))
    }
}
