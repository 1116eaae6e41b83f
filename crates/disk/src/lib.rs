//! The on-disk layout and the crash-safe files every module shares.
//!
//! The bottom of the crate beside `model`: the daemon, the shim, GC, status and the API
//! all read and write the same directories and records, so their names, shapes and the
//! one atomic-write helper live here instead of in any one of those modules. Nothing
//! here touches the kernel beyond plain file I/O.
//!
//! In the workspace (docs/architecture.md, "Crates"): uses no crate of the workspace. It
//! may not: the kernel beyond plain file I/O; Kubernetes types.

pub mod atomic;
pub mod daemon_lock;
pub mod dir_watch;
pub mod layout;
pub mod proc_start;
pub mod records;

use std::path::PathBuf;

pub use atomic::{
    PendingDurability, read_json, write_atomic, write_atomic_via, write_boot_scoped,
    write_durable_later, write_json_atomic, write_json_boot_scoped, write_json_durable_later,
};
pub use layout::{DEFAULT_ROOT_DIR, Layout, attempts, container_id};

/// A state file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    /// The file or its directory could not be created, written, renamed or read.
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A JSON record is not what podhost wrote (or could not be serialized).
    #[error("{path}: invalid JSON ({source}); remove the file if it is stale")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

impl DiskError {
    fn io(what: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            what,
            path: path.into(),
            source,
        }
    }
}
