//! User namespaces for `hostUsers: false` pods: the host ID range they are carved
//! from ([`range`]), the persisted per-pod blocks ([`allocator`]), and a rootfs that
//! the pod's mapped root owns ([`idmap`] mounts where the kernel has them, else a
//! chowned copy of each snapshot, [`chown_copy`]).

pub mod allocator;
pub mod chown_copy;
pub mod idmap;
pub mod pod_ns;
pub mod range;
pub mod rootfs;

use std::path::PathBuf;

pub use allocator::UsernsAllocator;
pub use range::{BLOCK_SIZE, IdRange};

/// One pod's mapping: container IDs 0..[`BLOCK_SIZE`] are host IDs base..base+BLOCK_SIZE
/// (the same for users and groups, as the kubelet maps them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IdMap {
    pub base: u32,
}

impl IdMap {
    /// The host ID of container ID `id` (which must be below [`BLOCK_SIZE`]).
    pub fn host_id(&self, id: u32) -> u32 {
        self.base + id
    }

    /// The line written to uid_map and gid_map.
    pub fn map_line(&self) -> String {
        format!("0 {} {}\n", self.base, BLOCK_SIZE)
    }
}

/// What can go wrong with user namespaces.
#[derive(Debug, thiserror::Error)]
pub enum UsernsError {
    #[error(
        "--userns-range {value:?}: {reason} (expected START:LENGTH, both multiples of 65536, e.g. 65536:4294836224)"
    )]
    BadRange { value: String, reason: String },
    #[error(
        "no free block of 65536 IDs left in --userns-range {range} for pod {pod} ({used} pods hold one); widen the range or remove hostUsers: false pods"
    )]
    Exhausted {
        pod: String,
        range: String,
        used: usize,
    },
    #[error("{path}: {message}; fix or remove the file (podhost then forgets every pod's block)")]
    Corrupt { path: PathBuf, message: String },
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{what}: {source}")]
    Sys {
        what: String,
        #[source]
        source: nix::Error,
    },
}

impl UsernsError {
    pub(crate) fn io(what: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
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

impl From<UsernsError> for super::RuntimeError {
    fn from(e: UsernsError) -> Self {
        super::RuntimeError::Userns(e.to_string())
    }
}
