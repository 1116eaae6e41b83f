//! `podhost daemon`: the config file (`--config`), logging (`--log-format`), the flags'
//! mapping (`daemon::flags`), the tokio runtime.

use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};

use crate::daemon::flags::DaemonFlags;
use crate::daemon::kubelet_config::{ConfigFile, apply};
use crate::daemon::reload::{ReloadSource, resolve};

/// The clap ids of `podhost daemon`'s flags given on the command line (they override
/// `--config`'s fields); `matches` are the whole command line's.
pub fn flags_given(matches: &clap::ArgMatches) -> BTreeSet<String> {
    let Some(daemon) = matches.subcommand_matches("daemon") else {
        return BTreeSet::new();
    };
    daemon
        .ids()
        .filter(|id| {
            daemon.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine)
        })
        .map(|id| id.as_str().to_string())
        .collect()
}

/// Log lines on stderr: `text` (no colours unless stderr is a terminal, so journald
/// gets plain lines) or `json` (one object per line, the event's fields at top level).
fn init_logging(format: &str) -> Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        "text" => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        "json" => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .init(),
        other => bail!("--log-format {other:?}: use text or json"),
    }
    Ok(())
}

/// Runs the daemon until it fails (it does not return otherwise). `given`: the flags
/// given on the command line ([`flags_given`]).
pub fn run(flags: DaemonFlags, socket: PathBuf, given: BTreeSet<String>) -> Result<i32> {
    let file = flags.config.as_deref().map(ConfigFile::load).transpose()?;
    let mut effective = flags.clone();
    if let Some(file) = &file {
        apply(file, &mut effective, &given)?;
    }
    init_logging(&effective.log_format)?;
    let cfg = match file {
        Some(file) => {
            let (_, mut cfg) = resolve(&flags, &given, socket.clone(), &file)?;
            cfg.config_file = Some(ReloadSource {
                cli_flags: flags,
                given,
                socket,
                file,
            });
            cfg
        }
        None => flags.into_config(socket)?,
    };
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
