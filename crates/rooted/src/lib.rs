//! The one way root touches a directory a container can write or replace (emptyDir,
//! the content volumes' payload dirs, subPath sources, the files podhost bind-mounts
//! into containers): everything below such a directory is opened relative to an
//! `O_PATH` handle of it and resolved with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`; modes and owners are set on opened
//! fds. A symlink a container plants anywhere on the way makes the call fail; it is
//! never followed onto the host.
//!
//! - [`RootedDir`]: the handle and its calls (open, create, mkdir, rename, unlink,
//!   readlink, list, read, atomic replace).
//! - [`set_group_tree`]: fsGroup's walk, on fds, skipping what vanishes under it.
//! - [`sys`]: the seam of fd-relative system calls, which the unit tests replace with an
//!   adversary that swaps a component for a symlink between any two calls.
//!
//! It uses nothing of the crate: every layer that works in container-reachable places
//! (volume, worker, runtime, shim) can use it.
//!
//! In the workspace (docs/architecture.md, "Crates"): uses no crate of the workspace. It
//! may not: follow a symlink, or take a path below a container-writable directory from
//! its caller as trusted.

mod dir;
pub mod sys;
mod walk;

// The symlink-swapping adversary other crates' tests race against this layer.
#[cfg(any(test, feature = "test-support"))]
pub mod adversary;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use nix::errno::Errno;

pub use dir::{EntryKind, RootedDir};
pub use walk::{GroupBits, WalkCount, join_rel, set_group_tree};

/// Why a rooted call failed; every message names the path as the handle saw it.
#[derive(Debug, thiserror::Error)]
pub enum RootedError {
    /// A symlink, `..` or mount crossing where the path must be plain: something below
    /// the handle was replaced (by a container, typically). Nothing outside was touched.
    #[error(
        "cannot {op} {}: a component is a symlink or leaves the directory (refused; nothing outside it was touched)",
        path.display()
    )]
    Escapes { op: &'static str, path: PathBuf },
    #[error("cannot {op} {}: {source}", path.display())]
    Sys {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: Errno,
    },
    #[error("cannot {op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not a regular file", path.display())]
    NotAFile { path: PathBuf },
    #[error("{}: entry {name:?} has a name that is not UTF-8", path.display())]
    BadName { path: PathBuf, name: String },
}

impl RootedError {
    pub(crate) fn at(op: &'static str, path: &Path, e: Errno) -> Self {
        match e {
            // openat2's answers to a symlink (ELOOP), an escape or a magic link (EXDEV).
            Errno::ELOOP | Errno::EXDEV => Self::Escapes {
                op,
                path: path.to_path_buf(),
            },
            source => Self::Sys {
                op,
                path: path.to_path_buf(),
                source,
            },
        }
    }

    pub fn io(op: &'static str, path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            op,
            path: path.to_path_buf(),
            source,
        }
    }

    /// Whether a component was a symlink or left the handle's tree.
    pub fn is_escape(&self) -> bool {
        matches!(self, Self::Escapes { .. })
    }

    /// The system call's error, if that is what failed.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            Self::Sys { source, .. } => Some(*source),
            Self::Io { source, .. } => source.raw_os_error().map(Errno::from_raw),
            _ => None,
        }
    }
}

impl From<RootedError> for std::io::Error {
    fn from(e: RootedError) -> Self {
        let kind = match &e {
            RootedError::Escapes { .. } => std::io::ErrorKind::PermissionDenied,
            RootedError::Sys { source, .. } => std::io::Error::from(*source).kind(),
            RootedError::Io { source, .. } => source.kind(),
            _ => std::io::ErrorKind::InvalidData,
        };
        std::io::Error::new(kind, e)
    }
}
