//! The files of configMap, secret, downwardAPI and projected volumes, and writing them
//! into a volume directory atomically (the kubelet's AtomicWriter), so that a reader in
//! a container sees either the old or the new payload, never a mix or a gap.

mod atomic;
mod files;
mod refresh;

pub use atomic::write_atomically;
pub use files::{is_content_volume, volume_files};
pub use refresh::{ContentVolume, keep_fresh, refresh_volume};

use std::collections::BTreeMap;
use std::path::PathBuf;

use podhost_model::downward::DownwardError;

/// The kubelet's default mode of configMap, secret, downwardAPI and projected files
/// (API defaulting gives secrets 0644 too).
pub const DEFAULT_MODE: u32 = 0o644;

/// One file of a content volume.
#[derive(Clone, PartialEq, Eq)]
pub struct ProjectedFile {
    pub data: Vec<u8>,
    /// Permission bits (0..=0o777).
    pub mode: u32,
}

impl std::fmt::Debug for ProjectedFile {
    /// Never prints the bytes: they may be a secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ProjectedFile({} bytes, {:o})",
            self.data.len(),
            self.mode
        )
    }
}

/// A volume's files by relative path (`key`, `dir/key`).
pub type FileSet = BTreeMap<String, ProjectedFile>;

/// Why a content volume cannot be filled or written. The message names the volume and
/// the object and key; the worker shows it as the pod's FailedMount.
#[derive(Debug, thiserror::Error)]
pub enum ContentError {
    #[error("volume {volume:?} is not a configMap, secret, downwardAPI or projected volume")]
    NotContent { volume: String },
    /// `hint`: where the object is looked up (the config dir's, or none for the API's).
    #[error("volume {volume:?}: configmap \"{name}\" not found{hint}")]
    ConfigMapNotFound {
        volume: String,
        name: String,
        hint: &'static str,
    },
    #[error("volume {volume:?}: secret \"{name}\" not found{hint}")]
    SecretNotFound {
        volume: String,
        name: String,
        hint: &'static str,
    },
    #[error(
        "volume {volume:?}: {kind} {namespace}/{name} has no key {key:?} (add the key, or set optional: true)"
    )]
    MissingKey {
        volume: String,
        kind: &'static str,
        namespace: String,
        name: String,
        key: String,
    },
    #[error("volume {volume:?}, file {path:?}: {source}")]
    Downward {
        volume: String,
        path: String,
        #[source]
        source: DownwardError,
    },
    #[error(
        "volume {volume:?}: a {source_kind} projection is not available without a cluster (podhost has no API server to issue it); remove it from the volume"
    )]
    Unavailable {
        volume: String,
        source_kind: &'static str,
    },
    /// The kubelet's words: the TokenRequest has not answered or was refused.
    #[error("volume {volume:?}: failed to fetch token: the {token} is not issued (yet)")]
    TokenNotIssued { volume: String, token: String },
    #[error("volume {volume:?}: invalid path {path:?}: {reason}")]
    BadPath {
        volume: String,
        path: String,
        reason: String,
    },
    #[error("volume {volume:?}: mode {mode:#o} of {path:?} is not a permission mode (0 to 0777)")]
    BadMode {
        volume: String,
        path: String,
        mode: i32,
    },
    #[error("volume dir {dir}: invalid path {path:?}: {reason}")]
    UnsafePath {
        dir: PathBuf,
        path: String,
        reason: String,
    },
    #[error("volume dir {dir}: {entry} is not podhost's ({what}); remove it")]
    Foreign {
        dir: PathBuf,
        entry: String,
        what: &'static str,
    },
    /// A call into the volume dir refused or failed (a symlink planted there, mostly).
    #[error(transparent)]
    Rooted(#[from] podhost_rooted::RootedError),
    #[error("cannot {op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
