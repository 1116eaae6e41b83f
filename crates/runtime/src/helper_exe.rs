//! Where podhost's helper binaries are: beside the podhost binary (a build tree,
//! /usr/local/bin), or in `../lib/podhost/` (a package: a helper is not a command of
//! /usr/bin).

use std::path::{Path, PathBuf};

/// The per-container shim's own binary (`src/shim_main.rs`): it links only what the
/// shim runs (libcontainer, the overlay, the device rules, the log writer): 12 MB
/// instead of podhost's 52, and no command-line parser, so each container's start and
/// clean-up (two execs) fault in half the pages (241 instead of 457 for an exec that
/// only exits). It answers `shim CONFIG` and `shim-cleanup CONFIG` as podhost does.
pub const SHIM_EXE: &str = "podhost-shim";

/// `name` beside `podhost_exe`, else in `../lib/podhost/` of its prefix.
pub fn find(podhost_exe: &Path, name: &str) -> Option<PathBuf> {
    let beside = podhost_exe.with_file_name(name);
    if beside.is_file() {
        return Some(beside);
    }
    let packaged = podhost_exe
        .parent()
        .and_then(Path::parent)
        .map(|prefix| prefix.join("lib/podhost").join(name))?;
    packaged.is_file().then_some(packaged)
}

/// The binary to exec as `BINARY shim CONFIG`: the small shim binary when it is
/// installed, else podhost itself (which has the same `shim` command).
pub fn shim_binary(podhost_exe: &Path) -> PathBuf {
    find(podhost_exe, SHIM_EXE).unwrap_or_else(|| podhost_exe.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shim_binary_is_found_beside_then_in_the_package_dir_else_podhost() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        let lib = dir.path().join("lib/podhost");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&lib).unwrap();
        let podhost = bin.join("podhost");
        assert_eq!(shim_binary(&podhost), podhost);
        std::fs::write(lib.join(SHIM_EXE), b"").unwrap();
        assert_eq!(shim_binary(&podhost), lib.join(SHIM_EXE));
        std::fs::write(bin.join(SHIM_EXE), b"").unwrap();
        assert_eq!(shim_binary(&podhost), bin.join(SHIM_EXE));
    }

    #[test]
    fn a_directory_of_that_name_is_not_the_binary() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("bin").join(SHIM_EXE)).unwrap();
        let podhost = dir.path().join("bin/podhost");
        assert_eq!(shim_binary(&podhost), podhost);
    }
}
