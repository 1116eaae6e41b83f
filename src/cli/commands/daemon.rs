//! `podhost daemon`: logging, the flags' mapping (`daemon::flags`), the tokio runtime.

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::daemon::flags::DaemonFlags;

/// Runs the daemon until it fails (it does not return otherwise).
pub fn run(flags: DaemonFlags, socket: PathBuf) -> Result<i32> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cfg = flags.into_config(socket)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    match rt.block_on(crate::daemon::run(cfg)) {
        Ok(()) => Ok(0),
        Err(e) => {
            // A dead task may have left blocking work behind: it must not hold the exit.
            rt.shutdown_timeout(std::time::Duration::from_secs(5));
            eprintln!("error: {e}");
            Ok(e.exit_code())
        }
    }
}
