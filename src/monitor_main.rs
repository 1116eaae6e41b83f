//! `podhost-monitor`: the small per-container monitor the shim execs once its container
//! runs (see `podhost::shim::monitor`). Not meant to be started by hand.

fn main() {
    let args: Vec<String> = std::env::args().collect();
    std::process::exit(podhost::shim::monitor::monitor_main(&args));
}
