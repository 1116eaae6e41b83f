//! Times `--tail 5` on one CRI log file: the old way (read the whole file forwards,
//! keeping the last lines: `read_messages`) against the new one (read backwards from
//! the end: `read_log`). Used by scripts/bench-logs.sh.
//!
//! usage: log_tail_bench LOGFILE [RUNS]

// Bench/tool code: a failed unwrap/expect is the run failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Instant;

use podhost::logs::{ReadOptions, read_log, read_messages};

fn main() {
    let mut args = std::env::args().skip(1);
    let path = PathBuf::from(args.next().expect("usage: log_tail_bench LOGFILE [RUNS]"));
    let runs: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(3);
    let opts = ReadOptions {
        tail: Some(5),
        ..Default::default()
    };
    let size = std::fs::metadata(&path).expect("log file").len();
    let mut forward = Vec::new();
    let mut backward = Vec::new();
    let (mut out_f, mut out_b) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        out_f.clear();
        let t = Instant::now();
        read_messages(&path, &opts, &mut out_f).expect("forward read");
        forward.push(t.elapsed().as_secs_f64());
        out_b.clear();
        let t = Instant::now();
        read_log(&path, &opts, &mut out_b).expect("backward read");
        backward.push(t.elapsed().as_secs_f64());
    }
    assert_eq!(out_f, out_b, "both ways print the same lines");
    forward.sort_by(f64::total_cmp);
    backward.sort_by(f64::total_cmp);
    println!(
        "tail 5 of {:.2} GB: whole-file forward read (before) {:.3} s, backward read (after) {:.6} s (medians of {runs})",
        size as f64 / 1e9,
        forward[runs / 2],
        backward[runs / 2],
    );
}
