//! What device confinement adds to a container's start on cgroup v2: generating the
//! program, loading it (bpf BPF_PROG_LOAD, the verifier included) and attaching it to a
//! fresh cgroup. Each round uses its own cgroup, removed right after.
//!
//! usage: devices_bench [CGROUP2_DIR] [ROUNDS]   (as root; default: the host's cgroup2
//! mount, /sys/fs/cgroup/unified on a hybrid host, and 200 rounds)

// Bench/tool code: a failed unwrap/expect is the run failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use podhost::runtime::devices::{confine_v2_dir, default_rules};

fn cgroup2_root() -> PathBuf {
    ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| {
            nix::sys::statfs::statfs(p)
                .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::CGROUP2_SUPER_MAGIC)
        })
        .expect("no cgroup2 hierarchy mounted")
}

fn summary(name: &str, mut times: Vec<Duration>) {
    times.sort();
    // Quantiles in per mille, so the index is integer arithmetic.
    let pick = |per_mille: usize| times[(times.len() - 1) * per_mille / 1000];
    println!(
        "{name}: n={} min={:?} median={:?} p90={:?} max={:?}",
        times.len(),
        times[0],
        pick(500),
        pick(900),
        times[times.len() - 1]
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let root = args.next().map(PathBuf::from).unwrap_or_else(cgroup2_root);
    let rounds: usize = args.next().map_or(200, |n| n.parse().expect("ROUNDS"));
    let rules = default_rules();
    let mut confine = Vec::with_capacity(rounds);
    let mut mkdir = Vec::with_capacity(rounds);
    for i in 0..rounds {
        let dir = root.join(format!("podhost-devbench-{}-{i}", std::process::id()));
        let t = Instant::now();
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        mkdir.push(t.elapsed());
        let t = Instant::now();
        let result = confine_v2_dir(&dir, &rules);
        confine.push(t.elapsed());
        remove(&dir);
        if let Err(e) = result {
            panic!("{e}");
        }
    }
    summary("mkdir of a cgroup (for scale)", mkdir);
    summary("generate + load + attach the device program", confine);
}

fn remove(dir: &Path) {
    if let Err(e) = std::fs::remove_dir(dir) {
        eprintln!("cannot remove {}: {e}", dir.display());
    }
}
