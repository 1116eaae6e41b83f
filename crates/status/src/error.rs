//! [`StatusError`]: a pod's status record that could not be read or written. Neither
//! stops the daemon: an unreadable record is skipped (the pod is re-synced from its
//! manifest), a failed write is logged and retried with the pod's next change.

use std::path::PathBuf;

use podhost_disk::DiskError;

/// Why a pod's `status.json` could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// A record left by a previous daemon cannot be read or is not valid JSON.
    #[error(
        "pod status record {}: {source}; it is skipped (remove it if the pod is gone)",
        path.display()
    )]
    Unreadable {
        path: PathBuf,
        #[source]
        source: DiskError,
    },
    /// The pod's record could not be written (disk full, directory removed).
    #[error(
        "pod {pod}: cannot persist its status to {}: {source}; the API still serves it, the write is retried with the pod's next change",
        path.display()
    )]
    Persist {
        pod: String,
        path: PathBuf,
        #[source]
        source: DiskError,
    },
}
