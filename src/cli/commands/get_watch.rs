//! `podhost get pods --watch`: the daemon's watch of its pods (`GET /pods?watch=true`),
//! as kubectl's `get -w` shows it: the table's header once, then a row per change;
//! with `-o json` the watch events themselves, one JSON line each.

use std::io::Write;

use anyhow::{Result, bail};
use k8s_openapi::api::core::v1::Pod;

use crate::api::client::Client;
use crate::cli::table::render_pods;

pub fn watch_pods(client: &Client, output: Option<&str>) -> Result<i32> {
    let wide = match output {
        None => false,
        Some("wide") => true,
        Some("json") => return follow(client, &mut |line| print_line(line)),
        Some(other) => bail!("unknown output format {other:?} with --watch: use wide or json"),
    };
    let mut header_shown = false;
    follow(client, &mut |line| {
        let event: serde_json::Value = serde_json::from_slice(line)?;
        let pod: Pod = serde_json::from_value(event["object"].clone())?;
        let table = render_pods(&[pod], wide, chrono::Utc::now());
        let mut lines = table.lines();
        let header = lines.next().unwrap_or_default();
        let mut out = std::io::stdout().lock();
        if !header_shown {
            writeln!(out, "{header}")?;
            header_shown = true;
        }
        for row in lines {
            writeln!(out, "{row}")?;
        }
        out.flush()?;
        Ok(())
    })
}

fn print_line(line: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(line)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(())
}

/// Calls `each` with every complete line of the watch, until the daemon ends it.
fn follow(client: &Client, each: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<i32> {
    let mut pending: Vec<u8> = Vec::new();
    let mut failed: Option<anyhow::Error> = None;
    let streamed = client.request_streaming("GET", "/pods?watch=true", None, &mut |chunk| {
        pending.extend_from_slice(chunk);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            if let Err(e) = each(&line[..line.len() - 1]) {
                failed = Some(e);
                return Err(std::io::Error::other("stopped"));
            }
        }
        Ok(())
    });
    match failed {
        // The reader went (`| head`): the watch ends quietly, as kubectl's.
        Some(e) if is_broken_pipe(&e) => Ok(0),
        Some(e) => Err(e),
        None => streamed.map(|_| 0).map_err(Into::into),
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.downcast_ref::<std::io::Error>()
        .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}
