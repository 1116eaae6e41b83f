//! `podhost pull REF [--root-dir DIR]`: the daemon pulls; progress and the store pulled
//! into on stderr, `REF@DIGEST` on stdout.

use std::path::Path;

use anyhow::{Result, bail};

use crate::api::client::Client;

/// Refuses local-only references (never pulled) before asking the daemon, and a
/// `--root-dir` that is not the daemon's.
pub fn run(client: &Client, reference: &str, root_dir: Option<&Path>) -> Result<i32> {
    if crate::image::is_local_only(reference) {
        let load = format!("podhost load --socket {}", client.socket().display());
        bail!(
            "not pulling {}",
            crate::image::local_only_hint(reference, &load)
        );
    }
    let target = super::store_target::through_daemon(client, root_dir)?;
    pull(client, reference)?;
    eprintln!("pulled into {target}");
    Ok(0)
}

/// Streams the daemon's pull progress as one status line on stderr.
fn pull(client: &Client, reference: &str) -> Result<()> {
    use crate::image::pull::{ProgressState, PullProgress};
    let body = serde_json::to_vec(&crate::api::types::PullRequest {
        reference: reference.to_string(),
    })?;
    let mut state = ProgressState::default();
    let mut pending = Vec::new();
    let mut failure: Option<String> = None;
    let mut done: Option<(String, String)> = None;
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    client.request_streaming("POST", "/images/pull", Some(&body), &mut |chunk| {
        pending.extend_from_slice(chunk);
        while let Some(nl) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=nl).collect();
            if let Ok(p) = serde_json::from_slice::<PullProgress>(&line) {
                state.apply(&p);
                if let PullProgress::Done { reference, digest } = &p {
                    done = Some((reference.clone(), digest.clone()));
                }
                if tty {
                    eprint!("\r\x1b[K{}", state.line());
                }
            } else if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&line) {
                failure = v.get("error").and_then(|e| e.as_str()).map(String::from);
            }
        }
        Ok(())
    })?;
    if tty {
        eprintln!();
    }
    if let Some(e) = failure {
        bail!("{e}");
    }
    match done {
        Some((reference, digest)) => {
            eprintln!("{}", state.line());
            println!("{reference}@{digest}");
            Ok(())
        }
        None => bail!("the daemon ended the pull without a result"),
    }
}
