//! `podhost-shim`'s command line: the two shim commands of podhost, without podhost's
//! whole command parser (the binary is exec'd twice per container, see
//! `runtime::helper_exe::SHIM_EXE`).

use std::ffi::OsString;
use std::path::Path;

/// The usage line printed for anything else.
const USAGE: &str =
    "usage: podhost-shim shim CONFIG | podhost-shim shim-cleanup CONFIG (started by podhost only)";

/// Runs `shim CONFIG` or `shim-cleanup CONFIG` (argv without the program name);
/// returns the process exit code.
pub fn shim_main(args: &[OsString]) -> i32 {
    match args {
        [command, config] if command == "shim" => super::run(Path::new(config)),
        [command, config] if command == "shim-cleanup" => {
            super::cleanup_after_monitor(Path::new(config))
        }
        _ => {
            eprintln!("{USAGE}");
            2
        }
    }
}
