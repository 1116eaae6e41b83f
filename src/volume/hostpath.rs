//! hostPath `type` checks, with the kubelet's messages (its `checkTypeInternal`).

use std::fs::{DirBuilder, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, OpenOptionsExt};
use std::path::Path;

use super::VolumeError;
use super::plan::HostPathType;

/// Checks (and for the `…OrCreate` types, makes) what the hostPath volume `volume`
/// needs at `path`. Symlinks are followed, as the kubelet's stat does.
pub fn check_host_path(volume: &str, path: &Path, check: HostPathType) -> Result<(), VolumeError> {
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
            None => DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(path)
                .map_err(|e| VolumeError::io("create the hostPath directory", path, e)),
            Some(ft) if ft.is_dir() => Ok(()),
            Some(_) => Err(fail("a directory")),
        },
        HostPathType::Directory => match ft {
            Some(ft) if ft.is_dir() => Ok(()),
            _ => Err(fail("a directory")),
        },
        HostPathType::FileOrCreate => match ft {
            // The parent must exist, as with the kubelet (no mkdir -p here).
            None => OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o644)
                .open(path)
                .map(drop)
                .map_err(|e| VolumeError::io("create the hostPath file", path, e)),
            Some(ft) if ft.is_file() => Ok(()),
            Some(_) => Err(fail("a file")),
        },
        HostPathType::File => match ft {
            Some(ft) if ft.is_file() => Ok(()),
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
