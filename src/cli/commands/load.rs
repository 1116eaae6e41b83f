//! `podhost load PATH [--name REF] [--root-dir DIR]`.

use std::path::Path;

use anyhow::{Context, Result};

use super::store_target::{self, ImageStoreTarget};
use crate::api::client::Client;
use crate::api::types::{LoadRequest, LoadResponse};

/// Loads through the daemon answering on the socket, refused when `--root-dir` is not
/// its root. Only with an explicit `--root-dir` does a missing daemon (no socket, or
/// nobody listening) mean "load straight into that store"; otherwise it is an error
/// naming the socket, so that an image never lands silently in a store no daemon
/// reads. `Loaded image: REF` lines on stdout, the store loaded into on stderr.
pub fn run(
    client: &Client,
    path: &Path,
    name: Option<String>,
    root_dir: Option<&Path>,
) -> Result<i32> {
    let abs = std::fs::canonicalize(path)
        .with_context(|| format!("{}: no such file or directory", path.display()))?;
    let target = store_target::for_load(client, root_dir)?;
    let refs = match &target {
        ImageStoreTarget::Direct { root_dir } => {
            eprintln!(
                "no daemon is running at {}; loading straight into {}",
                client.socket().display(),
                root_dir.display()
            );
            crate::image::ImageStore::open(root_dir)?.load_named(&abs, name.as_deref())?
        }
        ImageStoreTarget::Daemon { .. } | ImageStoreTarget::UnreportedRoot { .. } => {
            let body = serde_json::to_vec(&LoadRequest {
                path: abs.display().to_string(),
                name,
            })?;
            let answer = client.request("POST", "/images/load", Some(&body))?;
            serde_json::from_slice::<LoadResponse>(&answer.body)?.references
        }
    };
    for r in refs {
        println!("Loaded image: {r}");
    }
    eprintln!("loaded into {target}");
    Ok(0)
}
