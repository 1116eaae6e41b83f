//! `podhost get pods --watch`: the daemon's watch of its pods (`GET /pods?watch=true`),
//! as kubectl's `get -w` shows it: the table's header once, then a row per change;
//! with `-o json` the watch events themselves, one JSON line each. Names, `-l` and the
//! namespace filter the pods as they do the list.

use std::io::Write;

use anyhow::{Result, bail};
use k8s_openapi::api::core::v1::Pod;

use super::get::PodsAsked;
use crate::api::client::Client;
use crate::cli::pod_output::OutputFormat;
use crate::cli::pod_ref::{PodRef, pods_path};
use crate::cli::table::{pod_header, pod_row};

pub(super) fn watch_pods(client: &Client, asked: &PodsAsked) -> Result<i32> {
    let PodsAsked {
        args,
        names,
        selector,
        format,
        print,
    } = asked;
    let refs = names
        .iter()
        .map(|n| PodRef::parse(n, &args.namespace))
        .collect::<Result<Vec<_>, _>>()?;
    // Named pods without -n may be in any namespace.
    let all = args.all_namespaces || (!refs.is_empty() && args.namespace.namespace.is_none());
    let path = format!("{}?watch=true", pods_path(&args.namespace, all));
    let wanted = |pod: &Pod| {
        let this = PodRef::of(pod);
        let named = refs.is_empty()
            || refs.iter().any(|r| {
                r.name == this.name
                    && r.namespace
                        .as_ref()
                        .is_none_or(|ns| Some(ns) == this.namespace.as_ref())
            });
        named && selector.matches(pod.metadata.labels.as_ref())
    };
    let columns = match format {
        OutputFormat::Table { wide } => crate::cli::table::PodColumns {
            wide: *wide,
            ..print.columns
        },
        OutputFormat::Json => {
            return follow(client, &path, &mut |lines| {
                for line in lines {
                    let event: serde_json::Value = serde_json::from_slice(line)?;
                    let pod: Pod = serde_json::from_value(event["object"].clone())?;
                    if wanted(&pod) {
                        print_line(line)?;
                    }
                }
                Ok(())
            });
        }
        _ => bail!("with --watch, -o may be wide or json"),
    };
    let mut header_shown = columns.no_headers;
    // The lines that arrive together (the pods at the start, or changes of one moment)
    // are aligned together, as kubectl's tabwriter aligns what it flushes at once.
    follow(client, &path, &mut |lines| {
        let mut rows = Vec::new();
        for line in lines {
            let event: serde_json::Value = serde_json::from_slice(line)?;
            let pod: Pod = serde_json::from_value(event["object"].clone())?;
            if wanted(&pod) {
                rows.push(pod_row(&pod, columns, chrono::Utc::now()));
            }
        }
        if rows.is_empty() {
            return Ok(());
        }
        if !header_shown {
            rows.insert(0, pod_header(columns));
            header_shown = true;
        }
        let mut out = std::io::stdout().lock();
        out.write_all(
            crate::cli::table::align_min(&rows, crate::cli::table::KUBECTL_MIN_WIDTH).as_bytes(),
        )?;
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

/// Calls `each` with the complete lines of each piece of the watch that arrives, until
/// the daemon ends it.
fn follow(
    client: &Client,
    path: &str,
    each: &mut dyn FnMut(&[&[u8]]) -> Result<()>,
) -> Result<i32> {
    let mut pending: Vec<u8> = Vec::new();
    let mut failed: Option<anyhow::Error> = None;
    let streamed = client.request_streaming("GET", path, None, &mut |chunk| {
        pending.extend_from_slice(chunk);
        let Some(last) = pending.iter().rposition(|b| *b == b'\n') else {
            return Ok(());
        };
        let complete: Vec<u8> = pending.drain(..=last).collect();
        let lines: Vec<&[u8]> = complete[..complete.len() - 1]
            .split(|b| *b == b'\n')
            .collect();
        if let Err(e) = each(&lines) {
            failed = Some(e);
            return Err(std::io::Error::other("stopped"));
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
