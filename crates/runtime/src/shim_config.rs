//! The daemon → shim handoff: the shim's config file and the lines it prints.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

use podhost_disk::records::{ExitRecord, StartedRecord};

/// What the daemon hands the shim: everything needed to create one container.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShimConfig {
    pub container_id: String,
    /// The OCI bundle (holds config.json); also where the shim writes its records.
    pub bundle: PathBuf,
    pub libcontainer_root: PathBuf,
    pub log_path: PathBuf,
    /// Overlay lower dirs, top-most first.
    pub lower_dirs: Vec<PathBuf>,
    pub rootfs: PathBuf,
    /// Written to the container's init before it starts (the spec's field would change
    /// the shim's own score, since libcontainer writes it to the caller).
    #[serde(default)]
    pub oom_score_adj: Option<i32>,
    /// The container's memory cgroup directory (cgroup v2, or the v1 memory hierarchy's),
    /// for its OOM kills, peak and limit around its life.
    #[serde(default)]
    pub cgroup_dir: Option<PathBuf>,
    /// The leaf cgroup the shim moves itself into (cgroup v2).
    #[serde(default)]
    pub shim_cgroup: Option<PathBuf>,
    /// hostUsers: false: the rootfs is made the pod's (idmapped or chowned snapshots).
    #[serde(default)]
    pub userns: Option<super::userns::rootfs::UsernsRootfs>,
    /// When the shim rotates the container's log (`--container-log-max-size/-files`).
    #[serde(default)]
    pub log_rotation: podhost_logs::RotationPolicy,
    /// The container's seccomp filter, compiled by the daemon, loaded by podhost's
    /// executor (config.json then has no `linux.seccomp`); also what `podhost exec`
    /// loads into a process exec'd into the container. Written with the config, but
    /// read back only through [`super::seccomp::read_precompiled`] (always None in a
    /// config read as a whole): the monitor, which reads this config for the
    /// container's whole life, never holds the program nor the code that parses it.
    #[serde(default, skip_deserializing)]
    pub seccomp: Option<super::seccomp::PrecompiledSeccomp>,
}

/// The byte the daemon writes on the shim's stdin once the shim config is durable: the
/// shim reads the config at once, but makes nothing (rootfs, container) before this
/// byte. End of file instead means the daemon could not make it durable, or died.
pub const CONFIG_DURABLE: u8 = b'd';

/// The lines a shim prints on its stdout for the daemon that spawned it: how the start
/// went, then the exit as soon as it is known, then `Recorded` once `exit.json` is
/// durable (both before its clean-up).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShimReady {
    Started(StartedRecord),
    Failed {
        message: String,
    },
    Exited(ExitRecord),
    /// `exit.json` holds the reported exit and is fsynced (file and directory).
    Recorded,
}
