//! `podhost load PATH [--name REF] [--root-dir DIR]`.

use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::api::client::{Client, ClientError};
use crate::api::types::{LoadRequest, LoadResponse};
use crate::disk::DEFAULT_ROOT_DIR;

/// Loads through the daemon. Only with an explicit `--root-dir` does a missing daemon
/// (no socket, or nobody listening) mean "load straight into that store"; otherwise
/// it is an error naming the socket, so that an image never lands silently in a store
/// no daemon reads.
pub fn run(
    client: &Client,
    path: &Path,
    name: Option<String>,
    root_dir: Option<&Path>,
) -> Result<i32> {
    let abs = std::fs::canonicalize(path)
        .with_context(|| format!("{}: no such file or directory", path.display()))?;
    let body = serde_json::to_vec(&LoadRequest {
        path: abs.display().to_string(),
        name: name.clone(),
    })?;
    let refs = match client.request("POST", "/images/load", Some(&body)) {
        Ok(answer) => serde_json::from_slice::<LoadResponse>(&answer.body)?.references,
        Err(ClientError::Connect { socket, source }) if no_daemon(&source) => {
            let Some(root_dir) = root_dir else {
                bail!(
                    "no podhost daemon is running at {} ({source}); start it (or give its \
                     --socket), or load without a daemon straight into its store with \
                     --root-dir DIR (the daemon's --root-dir, default {DEFAULT_ROOT_DIR})",
                    socket.display()
                );
            };
            eprintln!(
                "no daemon is running at {}; loading straight into {}",
                socket.display(),
                root_dir.display()
            );
            crate::image::ImageStore::open(root_dir)?.load_named(&abs, name.as_deref())?
        }
        Err(e) => return Err(e.into()),
    };
    for r in refs {
        println!("Loaded image: {r}");
    }
    Ok(0)
}

/// True when connecting failed because no daemon listens (no socket file, or a
/// stale one), not because one refused us (permissions).
fn no_daemon(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
    )
}
