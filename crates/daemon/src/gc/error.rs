//! [`GcError`]: why a garbage-collection step failed, naming the directory or mount.

use std::path::PathBuf;

/// Why a dead container, a pod's leftovers or images could not be collected.
/// Container GC logs these and retries on its next pass; image GC reports them.
#[derive(Debug, thiserror::Error)]
pub enum GcError {
    /// A file or directory could not be read, renamed or deleted.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done ("remove log files of", "rename", "delete").
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A mount under a directory being removed could not be detached.
    #[error("cannot unmount {}: {source}; something outside podhost may hold it", mount.display())]
    Unmount {
        mount: PathBuf,
        #[source]
        source: nix::Error,
    },
    /// Mounts are still there after detaching them again and again (something keeps
    /// mounting); the directory is kept rather than deleted through a mount.
    #[error("{} still has mounts under it: {left:?}; find what mounts there", dir.display())]
    StillMounted { dir: PathBuf, left: Vec<PathBuf> },
    /// The image GC task panicked or was cancelled.
    #[error("image GC task ended abnormally: {0}")]
    ImageTask(#[source] tokio::task::JoinError),
    /// Image GC failed in the image store.
    #[error("{0}")]
    Image(#[source] podhost_image::ImageError),
}

impl GcError {
    pub(crate) fn io(what: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            what,
            path: path.into(),
            source,
        }
    }
}
