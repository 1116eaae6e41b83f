//! `podhost-monitor`: the small per-container monitor the shim execs once its container
//! runs (see `podhost_shim::monitor`). Not meant to be started by hand.

fn main() {
    let args: Vec<String> = std::env::args().collect();
    std::process::exit(podhost_shim::monitor::monitor_main(&args));
}
