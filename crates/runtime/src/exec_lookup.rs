//! Finding an exec'd process's program the way runc does (Go's `exec.LookPath`), so
//! that `podhost exec POD -- nosuchcmd` ends as a shell (and `kubectl exec`) does:
//! status 127 for a program that is not there, 126 for one that cannot be executed.
//!
//! libcontainer checks the program before it reports the process ready and turns a
//! miss into an error of the whole exec ("error in executing process"); podhost's
//! executor looks it up itself, in the container, after the process is started, and
//! exits with the status instead.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The status of a process whose program was not found (as sh and runc give it).
pub const EXIT_NOT_FOUND: i32 = 127;
/// The status of a process whose program exists but cannot be executed.
pub const EXIT_NOT_EXECUTABLE: i32 = 126;

/// Why the program cannot run.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LookupError {
    /// A bare name found in no directory of $PATH.
    #[error("exec: {0:?}: executable file not found in $PATH")]
    NotInPath(String),
    /// A path that does not exist.
    #[error("exec: {0:?}: no such file or directory")]
    NoSuchFile(String),
    /// A path that is a directory or has no execute bit.
    #[error("exec: {0:?}: permission denied")]
    NotExecutable(String),
}

impl LookupError {
    /// The process's exit status for this failure.
    pub fn exit_code(&self) -> i32 {
        match self {
            Self::NotInPath(_) | Self::NoSuchFile(_) => EXIT_NOT_FOUND,
            Self::NotExecutable(_) => EXIT_NOT_EXECUTABLE,
        }
    }
}

/// A regular file with an execute bit (Go's `findExecutable`; the kernel has the last
/// word at execve).
fn executable(path: &Path) -> Result<(), LookupError> {
    let shown = || path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => LookupError::NoSuchFile(shown()),
        _ => LookupError::NotExecutable(shown()),
    })?;
    if meta.is_dir() || meta.permissions().mode() & 0o111 == 0 {
        return Err(LookupError::NotExecutable(shown()));
    }
    Ok(())
}

/// The file `program` names: itself when it has a slash, else the first executable of
/// that name in `path_var`'s directories (an empty entry is the working directory).
pub fn look_up(program: &str, path_var: Option<&str>) -> Result<PathBuf, LookupError> {
    if program.contains('/') {
        executable(Path::new(program))?;
        return Ok(PathBuf::from(program));
    }
    for dir in path_var.unwrap_or_default().split(':') {
        let candidate = Path::new(if dir.is_empty() { "." } else { dir }).join(program);
        if executable(&candidate).is_ok() {
            return Ok(candidate);
        }
    }
    Err(LookupError::NotInPath(program.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(dir: &Path, name: &str, mode: u32) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, b"#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn a_name_is_searched_in_path_order_skipping_what_cannot_run() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        file(a.path(), "tool", 0o644);
        let runnable = file(b.path(), "tool", 0o755);
        let path = format!("{}:{}", a.path().display(), b.path().display());
        assert_eq!(look_up("tool", Some(&path)), Ok(runnable));
    }

    #[test]
    fn a_missing_name_is_127_and_a_path_that_cannot_run_is_126() {
        let a = tempfile::tempdir().unwrap();
        let path = a.path().display().to_string();
        let missing = look_up("nosuchcmd", Some(&path)).unwrap_err();
        assert_eq!(missing.exit_code(), 127);
        assert_eq!(
            missing.to_string(),
            "exec: \"nosuchcmd\": executable file not found in $PATH"
        );
        let plain = file(a.path(), "data", 0o644);
        let err = look_up(plain.to_str().unwrap(), Some(&path)).unwrap_err();
        assert_eq!(err.exit_code(), 126);
        let err = look_up(a.path().to_str().unwrap(), Some(&path)).unwrap_err();
        assert_eq!(err.exit_code(), 126, "a directory");
        let gone = a.path().join("gone");
        let err = look_up(gone.to_str().unwrap(), None).unwrap_err();
        assert_eq!(err.exit_code(), 127);
        assert_eq!(
            look_up("sh", None).unwrap_err().exit_code(),
            127,
            "no $PATH"
        );
    }
}
