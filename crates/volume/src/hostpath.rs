//! hostPath `type` checks, with the kubelet's messages (its `checkTypeInternal`).
//!
//! The path is the administrator's (a host path in the pod spec), so the check follows
//! symlinks that exist, as the kubelet's stat does. What `…OrCreate` makes is made
//! through the rooted layer from the deepest directory that exists: a component that
//! appears as a symlink meanwhile (another pod's hostPath volume may expose the parent
//! to a container) is refused, never followed.

use std::fs::FileType;
use std::os::unix::fs::FileTypeExt;
use std::path::{Component, Path, PathBuf};

use super::VolumeError;
use super::plan::HostPathType;
use podhost_rooted::{EntryKind, RootedDir};

/// The deepest existing directory of `path` and the missing components below it.
fn existing_base(path: &Path) -> (PathBuf, Vec<String>) {
    let mut base = path.to_path_buf();
    let mut missing = Vec::new();
    // not a container's path: the administrator's, followed as the kubelet's
    // stat follows it; only what is missing is made, through handles.
    while !base.is_dir() {
        match (base.file_name(), base.parent()) {
            (Some(name), Some(parent)) => {
                missing.push(name.to_string_lossy().into_owned());
                base = parent.to_path_buf();
            }
            _ => break,
        }
    }
    missing.reverse();
    (base, missing)
}

/// `mkdir -p` of `path` (0755), the missing part through the rooted layer.
fn create_dir_all(path: &Path) -> Result<(), VolumeError> {
    if path.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(VolumeError::io(
            "create the hostPath directory",
            path,
            std::io::Error::from(std::io::ErrorKind::InvalidInput),
        ));
    }
    let (base, missing) = existing_base(path);
    RootedDir::open(&base)?.make_dir_all(&missing.join("/"), 0o755)?;
    Ok(())
}

/// Creates the empty file `path` (0644) in its existing parent, never through a link.
fn create_file(path: &Path) -> Result<(), VolumeError> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str()))
    else {
        return Err(VolumeError::io(
            "create the hostPath file",
            path,
            std::io::Error::from(std::io::ErrorKind::InvalidInput),
        ));
    };
    let dir = RootedDir::open(parent)
        .map_err(|e| VolumeError::io("create the hostPath file", path, e.into()))?;
    match dir.create_file(name, b"", 0o644, None) {
        Ok(_) => Ok(()),
        // Made by someone else meanwhile: a file is what was asked for.
        Err(e)
            if e.errno() == Some(nix::errno::Errno::EEXIST)
                && dir.kind(name)? == Some(EntryKind::File) =>
        {
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// Checks (and for the `…OrCreate` types, makes) what the hostPath volume `volume`
/// needs at `path`. Symlinks are followed, as the kubelet's stat does.
pub fn check_host_path(volume: &str, path: &Path, check: HostPathType) -> Result<(), VolumeError> {
    // not a container's path: the administrator's, checked as the kubelet's stat checks it
    let meta = std::fs::metadata(path).ok();
    let ft = meta.as_ref().map(|m| m.file_type());
    let fail = |what: &'static str| VolumeError::HostPathType {
        volume: volume.to_string(),
        path: path.to_path_buf(),
        what,
    };
    match check {
        HostPathType::Unchecked => Ok(()),
        HostPathType::DirectoryOrCreate => match ft {
            None => create_dir_all(path),
            Some(ft) if FileType::is_dir(&ft) => Ok(()),
            Some(_) => Err(fail("a directory")),
        },
        HostPathType::Directory => match ft {
            Some(ft) if FileType::is_dir(&ft) => Ok(()),
            _ => Err(fail("a directory")),
        },
        HostPathType::FileOrCreate => match ft {
            // The parent must exist, as with the kubelet (no mkdir -p here).
            None => create_file(path),
            Some(ft) if FileType::is_file(&ft) => Ok(()),
            Some(_) => Err(fail("a file")),
        },
        HostPathType::File => match ft {
            Some(ft) if FileType::is_file(&ft) => Ok(()),
            _ => Err(fail("a file")),
        },
        HostPathType::Socket => match ft {
            Some(ft) if ft.is_socket() => Ok(()),
            _ => Err(fail("a socket file")),
        },
        HostPathType::CharDevice => match ft {
            Some(ft) if ft.is_char_device() => Ok(()),
            _ => Err(fail("a character device")),
        },
        HostPathType::BlockDevice => match ft {
            Some(ft) if ft.is_block_device() => Ok(()),
            _ => Err(fail("a block device")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_type_against_what_is_there() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let missing = dir.path().join("missing");
        let ok = |p: &Path, t| check_host_path("v", p, t).is_ok();
        let msg = |p: &Path, t| check_host_path("v", p, t).unwrap_err().to_string();
        assert!(ok(dir.path(), HostPathType::Directory));
        assert!(ok(&file, HostPathType::File));
        assert!(ok(&missing, HostPathType::Unchecked));
        assert!(ok(Path::new("/dev/null"), HostPathType::CharDevice));
        assert_eq!(
            msg(&file, HostPathType::Directory),
            format!(
                "hostPath type check failed: {} is not a directory (volume \"v\")",
                file.display()
            )
        );
        assert!(msg(&missing, HostPathType::File).contains("is not a file"));
        assert!(msg(&file, HostPathType::Socket).contains("is not a socket file"));
        assert!(msg(&file, HostPathType::CharDevice).contains("is not a character device"));
        assert!(
            msg(Path::new("/dev/null"), HostPathType::BlockDevice)
                .contains("is not a block device")
        );
        assert!(msg(&file, HostPathType::DirectoryOrCreate).contains("is not a directory"));
        assert!(msg(dir.path(), HostPathType::FileOrCreate).contains("is not a file"));

        let made = dir.path().join("a/b");
        assert!(ok(&made, HostPathType::DirectoryOrCreate));
        assert!(made.is_dir());
        let new_file = dir.path().join("new");
        assert!(ok(&new_file, HostPathType::FileOrCreate));
        assert!(new_file.is_file());
        assert!(!ok(
            &dir.path().join("no/parent"),
            HostPathType::FileOrCreate
        ));
    }
}
