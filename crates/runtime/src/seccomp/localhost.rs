//! Localhost profiles: OCI `LinuxSeccomp` JSON files that the node's admin puts in
//! `<root-dir>/seccomp/`, named by a pod's `localhostProfile` relative to that directory
//! (the kubelet's layout).
//!
//! The name is resolved by the kernel with openat2 `RESOLVE_IN_ROOT` through [`pathrs`]:
//! symlinks (absolute or climbing) resolve as if the directory were `/`, so nothing
//! outside it is ever read. Absolute names and `..` components are refused up front, as
//! the Kubernetes API validation refuses them, to give a clear error instead.

use std::io::Read;
use std::os::fd::AsFd;
use std::path::{Component, Path};

use nix::sys::stat::{SFlag, fstat};
use oci_spec::runtime::{LinuxSeccomp, LinuxSeccompAction};
use pathrs::Root;
use pathrs::flags::OpenFlags;

use super::SeccompError;

/// The largest profile read. moby's default profile is about 20 KiB; a profile that
/// lists every syscall of every architecture with argument rules stays far below this.
pub const MAX_PROFILE_BYTES: u64 = 1024 * 1024;

/// Reads and parses the profile `rel` under `dir`.
pub(crate) fn load(dir: &Path, rel: &str) -> Result<LinuxSeccomp, SeccompError> {
    let path_err = |reason| SeccompError::LocalhostPath {
        path: rel.to_string(),
        dir: dir.to_path_buf(),
        reason,
    };
    if rel.is_empty() {
        return Err(path_err("empty"));
    }
    let rel_path = Path::new(rel);
    if rel_path.is_absolute() {
        return Err(path_err("absolute"));
    }
    if rel_path.components().any(|c| c == Component::ParentDir) {
        return Err(path_err("contains '..'"));
    }
    let open_err = |source| SeccompError::LocalhostOpen {
        path: rel.to_string(),
        dir: dir.to_path_buf(),
        source,
    };
    let root = Root::open(dir).map_err(|e| open_err(to_io(e)))?;
    // An O_PATH handle first: a FIFO or device is refused before it is opened (opening
    // a FIFO for reading would block the caller).
    let handle = root.resolve(rel_path).map_err(|e| open_err(to_io(e)))?;
    let file = dir.join(rel_path);
    let st = fstat(handle.as_fd()).map_err(|e| open_err(e.into()))?;
    if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
        return Err(SeccompError::LocalhostNotFile { file });
    }
    if podhost_model_core::convert::non_negative_u64(st.st_size) > MAX_PROFILE_BYTES {
        return Err(SeccompError::LocalhostTooBig {
            file,
            max: MAX_PROFILE_BYTES,
        });
    }
    let read_err = |source| SeccompError::LocalhostRead {
        file: file.clone(),
        source,
    };
    let reader = handle
        .reopen(OpenFlags::O_RDONLY)
        .map_err(|e| read_err(to_io(e)))?;
    // Bounded again while reading: the file may grow after the fstat.
    let mut bytes = Vec::new();
    reader
        .take(MAX_PROFILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > MAX_PROFILE_BYTES {
        return Err(SeccompError::LocalhostTooBig {
            file,
            max: MAX_PROFILE_BYTES,
        });
    }
    let seccomp: LinuxSeccomp =
        serde_json::from_slice(&bytes).map_err(|source| SeccompError::LocalhostJson {
            file: file.clone(),
            source,
        })?;
    if uses_notify(&seccomp) {
        return Err(SeccompError::LocalhostNotify { file });
    }
    Ok(seccomp)
}

/// What libcontainer would only refuse when the container starts, refused here with
/// the file's name: podhost runs no seccomp agent, so SCMP_ACT_NOTIFY cannot work.
fn uses_notify(seccomp: &LinuxSeccomp) -> bool {
    seccomp.default_action() == LinuxSeccompAction::ScmpActNotify
        || seccomp
            .syscalls()
            .iter()
            .flatten()
            .any(|s| s.action() == LinuxSeccompAction::ScmpActNotify)
}

/// A libpathrs error as an `io::Error`, keeping the errno when there is one.
fn to_io(e: pathrs::error::Error) -> std::io::Error {
    match e.kind() {
        pathrs::error::ErrorKind::OsError(Some(errno)) => std::io::Error::from_raw_os_error(errno),
        _ => std::io::Error::other(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    const PROFILE: &str = r#"{"defaultAction":"SCMP_ACT_ERRNO","architectures":["SCMP_ARCH_X86_64"],
        "syscalls":[{"names":["read","write"],"action":"SCMP_ACT_ALLOW"}]}"#;

    /// A profile directory `seccomp/` inside a temp dir, and a valid profile outside it.
    fn setup() -> (tempfile::TempDir, std::path::PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("seccomp");
        std::fs::create_dir_all(dir.join("profiles")).unwrap();
        std::fs::write(dir.join("profiles/audit.json"), PROFILE).unwrap();
        std::fs::write(tmp.path().join("outside.json"), PROFILE).unwrap();
        (tmp, dir)
    }

    fn err(dir: &Path, rel: &str) -> String {
        load(dir, rel).unwrap_err().to_string()
    }

    #[test]
    fn reads_a_profile_by_its_relative_path_and_through_inner_symlinks() {
        let (_tmp, dir) = setup();
        let s = load(&dir, "profiles/audit.json").unwrap();
        assert_eq!(s.default_action(), LinuxSeccompAction::ScmpActErrno);
        assert_eq!(
            s.syscalls().as_ref().unwrap()[0].names(),
            &["read", "write"]
        );
        symlink("profiles/audit.json", dir.join("current.json")).unwrap();
        assert!(load(&dir, "current.json").is_ok());
        // An absolute symlink resolves inside the directory, as if it were `/`.
        symlink("/profiles/audit.json", dir.join("abs.json")).unwrap();
        assert!(load(&dir, "abs.json").is_ok());
    }

    #[test]
    fn a_missing_file_is_named_with_its_directory() {
        let (_tmp, dir) = setup();
        let e = err(&dir, "profiles/nope.json");
        assert!(e.contains("profiles/nope.json"), "{e}");
        assert!(e.contains(dir.to_str().unwrap()), "{e}");
        assert!(e.contains("No such file"), "{e}");
        let e = err(&dir.join("absent-dir"), "x.json");
        assert!(e.contains("absent-dir"), "{e}");
    }

    #[test]
    fn absolute_paths_and_dot_dot_are_refused() {
        let (tmp, dir) = setup();
        let outside = tmp.path().join("outside.json");
        let e = err(&dir, outside.to_str().unwrap());
        assert!(e.contains("absolute"), "{e}");
        let e = err(&dir, "../outside.json");
        assert!(e.contains("'..'"), "{e}");
        let e = err(&dir, "profiles/../../outside.json");
        assert!(e.contains("'..'"), "{e}");
        let e = err(&dir, "");
        assert!(e.contains("empty"), "{e}");
    }

    #[test]
    fn symlinks_never_lead_out_of_the_directory() {
        let (tmp, dir) = setup();
        let outside = tmp.path().join("outside.json");
        // The target exists and is a valid profile, but only outside the directory.
        symlink(&outside, dir.join("abs-out.json")).unwrap();
        symlink("../outside.json", dir.join("rel-out.json")).unwrap();
        symlink(tmp.path(), dir.join("up")).unwrap();
        for rel in ["abs-out.json", "rel-out.json", "up/outside.json"] {
            let e = err(&dir, rel);
            assert!(e.contains("No such file"), "{rel}: {e}");
        }
    }

    #[test]
    fn too_big_not_a_file_bad_json_and_notify_are_refused() {
        let (_tmp, dir) = setup();
        let big = std::fs::File::create(dir.join("big.json")).unwrap();
        big.set_len(MAX_PROFILE_BYTES + 1).unwrap();
        let e = err(&dir, "big.json");
        assert!(e.contains("larger than"), "{e}");

        let e = err(&dir, "profiles");
        assert!(e.contains("not a regular file"), "{e}");
        nix::unistd::mkfifo(&dir.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let e = err(&dir, "fifo");
        assert!(e.contains("not a regular file"), "{e}");

        std::fs::write(dir.join("bad.json"), "{\"defaultAction\": ").unwrap();
        let e = err(&dir, "bad.json");
        assert!(e.contains("bad.json") && e.contains("LinuxSeccomp"), "{e}");
        std::fs::write(
            dir.join("wrong.json"),
            r#"{"defaultAction":"SCMP_ACT_MAYBE"}"#,
        )
        .unwrap();
        let e = err(&dir, "wrong.json");
        assert!(e.contains("wrong.json"), "{e}");

        std::fs::write(
            dir.join("notify.json"),
            r#"{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir"],"action":"SCMP_ACT_NOTIFY"}]}"#,
        )
        .unwrap();
        let e = err(&dir, "notify.json");
        assert!(e.contains("SCMP_ACT_NOTIFY"), "{e}");
    }
}
