//! `podhost-shim`: the per-container shim in a binary of its own, a fraction of
//! podhost's size (see `podhost_runtime::helper_exe::SHIM_EXE`; it links
//! `podhost_shim` and what that uses, nothing of the daemon). Not meant to be
//! started by hand.

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    std::process::exit(podhost_shim::shim_main(&args));
}
