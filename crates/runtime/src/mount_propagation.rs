//! Volume mounts' propagation (`mountPropagation`), applied by a createContainer hook.
//!
//! libcontainer 0.7 binds volumes with `open_tree` + `move_mount` and drops the
//! propagation flags of bind mounts, so every bind ends up with the root's propagation
//! (rslave by default, rshared when a Bidirectional volume makes the root shared). The
//! spec therefore carries a createContainer hook, `podhost mount-propagation`, which
//! runs in the container's mount namespace after its mounts and before pivot_root and
//! sets each volume's propagation, as containerd's runc does with the mount options:
//! None → rprivate, HostToContainer → rslave, Bidirectional → rshared.

use std::os::fd::{AsFd, AsRawFd};
use std::path::{Component, Path, PathBuf};

use nix::mount::{MsFlags, mount};
use pathrs::Root;

use super::spec::BindPropagation;

/// Why a propagation could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum PropagationError {
    /// An argument is not `DEST=private|slave|shared` with an absolute DEST.
    #[error("bad mount-propagation argument {0:?}: expected /DEST=private|slave|shared")]
    BadEntry(String),
    /// The destination cannot be resolved inside the rootfs.
    #[error("cannot resolve {dest} in {}: {source}", rootfs.display())]
    Resolve {
        dest: String,
        rootfs: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot make {dest} {mode}: {source}")]
    Mount {
        dest: String,
        mode: &'static str,
        #[source]
        source: nix::Error,
    },
}

impl BindPropagation {
    /// The hook argument's word.
    pub fn word(self) -> &'static str {
        match self {
            Self::Private => "private",
            Self::Slave => "slave",
            Self::Shared => "shared",
        }
    }

    fn from_word(word: &str) -> Option<Self> {
        match word {
            "private" => Some(Self::Private),
            "slave" => Some(Self::Slave),
            "shared" => Some(Self::Shared),
            _ => None,
        }
    }

    fn flag(self) -> MsFlags {
        match self {
            Self::Private => MsFlags::MS_PRIVATE,
            Self::Slave => MsFlags::MS_SLAVE,
            Self::Shared => MsFlags::MS_SHARED,
        }
    }
}

/// One hook argument: `DEST=private|slave|shared`.
pub fn entry(dest: &str, propagation: BindPropagation) -> String {
    format!("{dest}={}", propagation.word())
}

/// Parses the hook's arguments.
pub fn parse_entries(args: &[String]) -> Result<Vec<(String, BindPropagation)>, PropagationError> {
    args.iter()
        .map(|a| {
            let bad = || PropagationError::BadEntry(a.clone());
            let (dest, word) = a.rsplit_once('=').ok_or_else(bad)?;
            let mode = BindPropagation::from_word(word).ok_or_else(bad)?;
            let path = Path::new(dest);
            if !path.is_absolute() || path.components().any(|c| c == Component::ParentDir) {
                return Err(bad());
            }
            Ok((dest.to_string(), mode))
        })
        .collect()
}

/// Sets each destination's propagation (recursively) inside `rootfs`. A destination is
/// resolved within the rootfs (`RESOLVE_IN_ROOT`), so an image's symlink cannot send the
/// change to a host path.
pub fn apply(rootfs: &Path, entries: &[(String, BindPropagation)]) -> Result<(), PropagationError> {
    let root = Root::open(rootfs).map_err(|e| PropagationError::Resolve {
        dest: "/".into(),
        rootfs: rootfs.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    })?;
    for (dest, mode) in entries {
        let relative = dest.trim_start_matches('/');
        let handle = root
            .resolve(relative)
            .map_err(|e| PropagationError::Resolve {
                dest: dest.clone(),
                rootfs: rootfs.to_path_buf(),
                source: std::io::Error::other(e.to_string()),
            })?;
        let through = PathBuf::from(format!("/proc/self/fd/{}", handle.as_fd().as_raw_fd()));
        mount(
            None::<&str>,
            &through,
            None::<&str>,
            mode.flag() | MsFlags::MS_REC,
            None::<&str>,
        )
        .map_err(|source| PropagationError::Mount {
            dest: dest.clone(),
            mode: mode.word(),
            source,
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_bad_ones_are_refused() {
        let args = vec![
            entry("/data", BindPropagation::Private),
            entry("/a=b", BindPropagation::Shared),
        ];
        let parsed = parse_entries(&args).unwrap();
        assert_eq!(parsed[0], ("/data".to_string(), BindPropagation::Private));
        assert_eq!(parsed[1], ("/a=b".to_string(), BindPropagation::Shared));
        for bad in ["data=private", "/x=loose", "/x", "/../etc=shared"] {
            assert!(parse_entries(&[bad.to_string()]).is_err(), "{bad}");
        }
    }
}
