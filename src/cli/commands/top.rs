//! `podhost top pods|node`: the daemon's Summary (`GET /stats/summary`) as kubectl
//! top's tables.

use anyhow::{Result, bail};

use crate::api::client::Client;
use crate::cli::pod_ref::{DEFAULT_NAMESPACE, NamespaceFlag};
use crate::cli::top::{TopOptions, render_node, render_pods};
use crate::model::stats::summary::Summary;

/// `top pods` shows the namespace of `namespace` (`default` without -n) unless
/// `opts.namespace_column` (-A) asks for every one.
pub fn run(
    client: &Client,
    resource: &str,
    namespace: &NamespaceFlag,
    opts: &TopOptions,
) -> Result<i32> {
    let mut summary: Summary = client.get_json("/stats/summary")?;
    let text = match resource {
        "pods" | "pod" | "po" => {
            let wanted = namespace.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE);
            if !opts.namespace_column {
                summary.pods.retain(|p| p.pod_ref.namespace == wanted);
            }
            if summary.pods.is_empty() && opts.namespace_column {
                eprintln!("No resources found");
                return Ok(0);
            }
            if summary.pods.is_empty() {
                eprintln!("No resources found in {wanted} namespace.");
                return Ok(0);
            }
            render_pods(&summary, opts)?
        }
        // The CPUs this host has: the CLI runs where the daemon does (its unix socket).
        "node" | "nodes" | "no" => render_node(&summary, host_cpus(), opts.psi)?,
        other => bail!("podhost top shows pods or node, not \"{other}\""),
    };
    print!("{text}");
    Ok(0)
}

/// `-o json|prometheus`: the daemon's statistics as it serves them.
pub fn raw(client: &Client, format: &str) -> Result<i32> {
    let path = match format {
        "json" => "/stats/summary",
        "prometheus" => "/metrics/cadvisor",
        other => bail!("-o must be json or prometheus, not \"{other}\""),
    };
    let answer = client.request("GET", path, None)?;
    std::io::Write::write_all(&mut std::io::stdout(), &answer.body)?;
    Ok(0)
}

fn host_cpus() -> u64 {
    std::thread::available_parallelism()
        .map(|n| n.get() as u64)
        .unwrap_or(1)
}
