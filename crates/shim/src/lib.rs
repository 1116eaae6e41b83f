//! `podhost shim`: the per-container process.
//!
//! Exec'd by the daemon, single-threaded while it calls libcontainer. It leaves the
//! daemon's session, becomes the child subreaper, mounts the rootfs, creates and starts
//! the container, reports the start on stdout (one JSON line), copies the container's
//! stdout/stderr to the CRI log file, reaps the init process, writes `exit.json`
//! atomically, deletes the container and exits. The daemon's death never touches it.
//!
//! In the workspace (docs/architecture.md, "Crates"): uses model-core, disk, logs,
//! runtime. It may not: cluster, HTTP, TLS or registry code (see
//! `cargo tree -p podhost-shim`), or a thread while it calls libcontainer.

mod config_durable;
mod entry;
mod error;
mod kernel;
pub mod monitor;
mod monitor_log;
mod process;

pub use entry::shim_main;
pub use error::ShimError;
pub use process::{cleanup_after_monitor, run};
