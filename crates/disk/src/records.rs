//! The records a shim writes next to its container (one attempt dir each), read by the
//! daemon, GC and the API, also after a restart; and the names of every file in an
//! attempt dir.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Written by the shim once the container's process runs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StartedRecord {
    pub shim_pid: i32,
    pub init_pid: i32,
    pub started_at: DateTime<Utc>,
    /// The init's start in clock ticks after boot (`/proc/<init_pid>/stat` field 22;
    /// see [`super::proc_start`]), read by the shim while the init could not have been
    /// reaped yet. With the record boot-scoped, it tells the init from any later process
    /// given its pid. `None` in records of shims older than the field: only
    /// `started_at` then rules out later processes (a weaker check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_start_ticks: Option<u64>,
}

/// Written atomically by the shim when the container's init process has exited.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ExitRecord {
    /// The exit code as Kubernetes reports it: the status, or 128 + signal.
    pub exit_code: i32,
    /// The signal that killed the process, if one did.
    pub signal: Option<i32>,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    /// The kernel OOM-killed a process of the container (memory.events `oom_kill` grew
    /// during its life; the exit status alone cannot show a killed child).
    #[serde(default)]
    pub oom_killed: bool,
    /// memory.peak and memory.max of the container's cgroup at its end, in bytes.
    #[serde(default)]
    pub memory_peak: Option<u64>,
    #[serde(default)]
    pub memory_max: Option<u64>,
    /// Set when podhost wrote the record itself because the shim was gone without one
    /// (killed): the container's real end is unknown, what was left of it was killed.
    /// The status shows it as the kubelet shows a lost container
    /// (`ContainerStatusUnknown`, exit 137, this message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown: Option<String>,
}

pub const SHIM_CONFIG_FILE: &str = "shim-config.json";
pub const STARTED_FILE: &str = "started.json";
pub const EXIT_FILE: &str = "exit.json";
pub const SHIM_LOG_FILE: &str = "shim.log";
/// The shim's own pid, written before it forks anything: libcontainer's children carry
/// the same command line, so the command line alone cannot tell the shim.
pub const SHIM_PID_FILE: &str = "shim.pid";
/// The daemon's verdict on an attempt's end (its terminated state as shown: reason,
/// message), so that `lastState` survives a daemon restart.
pub const TERMINATED_FILE: &str = "terminated.json";
/// The file in an attempt dir that names the manifest digest of the container's image
/// (image GC keeps that image while the dir exists).
pub const IMAGE_REF_FILE: &str = "image-digest";
/// The file in an attempt dir that names the image as the container's spec wrote it
/// when the attempt was made: a restarted daemon tells a container whose image was
/// changed in the API server meanwhile (and restarts it, as the kubelet does by the
/// container's hash) from one that runs the spec's image.
pub const IMAGE_NAME_FILE: &str = "image";
