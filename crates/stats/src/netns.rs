//! A pod's interface counters, read inside its network namespace. setns(2) changes the
//! calling thread, so this runs on a thread of its own that exists only for it (never a
//! tokio worker or a pooled blocking thread, which would stay in the pod's namespace).

use std::collections::HashMap;
use std::path::PathBuf;

use podhost_model::stats::parse::net_dev;
use podhost_model::stats::summary::InterfaceStats;

/// Each pod's (by key) interfaces, from `/proc/thread-self/net/dev` after entering the
/// namespace that `paths` names (a bind-mounted nsfs file). A pod whose namespace
/// cannot be entered is left out (and logged).
pub fn read_pods(paths: Vec<(String, PathBuf)>) -> HashMap<String, Vec<InterfaceStats>> {
    if paths.is_empty() {
        return HashMap::new();
    }
    let worker = std::thread::Builder::new()
        .name("stats-netns".into())
        .spawn(move || {
            let mut out = HashMap::new();
            for (key, path) in paths {
                match read_one(&path) {
                    Ok(interfaces) => {
                        out.insert(key, interfaces);
                    }
                    Err(e) => tracing::debug!(
                        netns = %path.display(),
                        error = %e,
                        "cannot read the pod's network counters"
                    ),
                }
            }
            out
        });
    match worker.map(|w| w.join()) {
        Ok(Ok(out)) => out,
        Ok(Err(_)) | Err(_) => {
            tracing::warn!("the network statistics thread failed");
            HashMap::new()
        }
    }
}

fn read_one(netns: &std::path::Path) -> std::io::Result<Vec<InterfaceStats>> {
    let file = std::fs::File::open(netns)?;
    nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).map_err(std::io::Error::from)?;
    // /proc/net is the process's (its main thread's) namespace; thread-self is ours.
    let text = std::fs::read_to_string("/proc/thread-self/net/dev")?;
    Ok(net_dev(&text))
}
