//! Pulls images from a registry into an image store, without the daemon; used by
//! scripts/bench-pull.sh.
//!
//! usage: cargo run --release --example pull -- [--insecure HOST:PORT]... [--creds FILE]
//!        [--quiet] ROOT_DIR REFERENCE...
//!
//! Prints the progress line on stderr (unless --quiet) and each normalized
//! reference with its manifest digest on stdout. `RUST_LOG=info` shows the
//! store's and puller's logs.

// Bench/tool code: a failed unwrap/expect is the run failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use podhost::image::ImageStore;
use podhost::image::pull::{ProgressState, PullOptions, Puller};

struct Args {
    opts: PullOptions,
    quiet: bool,
    root: PathBuf,
    references: Vec<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut opts = PullOptions::default();
    let mut quiet = false;
    let mut positional = Vec::new();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--insecure" => opts
                .insecure_registries
                .push(it.next().ok_or("--insecure needs HOST:PORT")?),
            "--creds" => {
                opts.credentials_file = Some(it.next().ok_or("--creds needs a FILE")?.into())
            }
            "--quiet" | "-q" => quiet = true,
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            _ => positional.push(arg),
        }
    }
    if positional.len() < 2 {
        return Err(
            "usage: pull [--insecure HOST:PORT]... [--creds FILE] [--quiet] \
                    ROOT_DIR REFERENCE..."
                .to_string(),
        );
    }
    let root = PathBuf::from(positional.remove(0));
    Ok(Args {
        opts,
        quiet,
        root,
        references: positional,
    })
}

async fn run(args: Args) -> Result<(), String> {
    let store = ImageStore::open(&args.root).map_err(|e| e.to_string())?;
    let store = Arc::new(store);
    let puller = Puller::new(store.clone(), args.opts);
    for reference in &args.references {
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let quiet = args.quiet;
        let printer = tokio::spawn(async move {
            let mut state = ProgressState::default();
            let mut shown = false;
            while let Some(event) = rx.recv().await {
                state.apply(&event);
                if !quiet {
                    eprint!("\r{}\x1b[K", state.line());
                    shown = true;
                }
            }
            if shown {
                eprintln!();
            }
        });
        let pulled = puller.pull(reference, Some(tx)).await;
        let _ = printer.await;
        let name = pulled.map_err(|e| e.to_string())?;
        let digest = store
            .resolve(&name)
            .map_err(|e| e.to_string())?
            .manifest_digest;
        println!("{name} {digest}");
    }
    Ok(())
}

fn main() -> ExitCode {
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
