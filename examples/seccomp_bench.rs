//! What the seccomp filter costs a container's start: libcontainer 0.7 compiling the
//! RuntimeDefault filter with libseccomp and loading it (before), against loading the
//! program the daemon compiled once (now), and the daemon's one compile.
//!
//! Each load runs in a fresh child process (a filter stays for a process's life), which
//! sets no_new_privs, loads, and exits; the CPU of the children (getrusage) minus that of
//! children that only start and exit is the cost of the load.
//!
//! usage: seccomp_bench [ROUNDS]   (default 100)

// Bench/tool code: a failed unwrap/expect is the run failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use nix::sys::resource::{UsageWho, getrusage};
use oci_spec::runtime::{Capability, LinuxSeccomp};
use podhost::runtime::seccomp::{
    CompiledFilter, SeccompProfile, compile, default_capabilities, for_libcontainer, linux_seccomp,
};

fn child(mode: &str, file: &Path) {
    let bytes = std::fs::read(file).unwrap();
    nix::sys::prctl::set_no_new_privs().unwrap();
    match mode {
        "libcontainer" => {
            let seccomp: LinuxSeccomp = serde_json::from_slice(&bytes).unwrap();
            libcontainer::seccomp::initialize_seccomp(&seccomp).unwrap();
        }
        "precompiled" => {
            let program: CompiledFilter = serde_json::from_slice(&bytes).unwrap();
            program.load().unwrap();
        }
        _ => {}
    }
}

fn children_cpu() -> Duration {
    let r = getrusage(UsageWho::RUSAGE_CHILDREN).unwrap();
    let us = |t: nix::sys::time::TimeVal| {
        // getrusage's times are never negative.
        Duration::from_secs(u64::try_from(t.tv_sec()).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec()).unwrap_or(0))
    };
    us(r.user_time()) + us(r.system_time())
}

/// CPU per child of `rounds` children in `mode`.
fn run(mode: &str, file: &Path, rounds: u32) -> Duration {
    let me = std::env::current_exe().unwrap();
    let before = children_cpu();
    for _ in 0..rounds {
        let status = Command::new(&me)
            .args(["child", mode])
            .arg(file)
            .status()
            .unwrap();
        assert!(status.success(), "{mode} child failed: {status}");
    }
    (children_cpu() - before) / rounds
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("child") {
        child(&args[2], Path::new(&args[3]));
        return;
    }
    let rounds: u32 = args.get(1).map(|r| r.parse().unwrap()).unwrap_or(100);
    let caps: HashSet<Capability> = default_capabilities().into_iter().collect();
    let oci = linux_seccomp(&SeccompProfile::RuntimeDefault, &caps, Path::new("/"))
        .unwrap()
        .unwrap();

    let started = Instant::now();
    let mut program = None;
    for _ in 0..rounds {
        program = Some(compile(&oci).unwrap());
    }
    let program = program.unwrap();
    println!(
        "daemon compile (once per distinct filter): {:.2} ms wall per compile, {} instructions",
        started.elapsed().as_secs_f64() * 1e3 / f64::from(rounds),
        program.instructions()
    );

    let dir = tempfile::tempdir().unwrap();
    let lc_file = dir.path().join("libcontainer.json");
    let program_file = dir.path().join("program.json");
    std::fs::write(
        &lc_file,
        serde_json::to_vec(&for_libcontainer(&oci).unwrap()).unwrap(),
    )
    .unwrap();
    std::fs::write(&program_file, serde_json::to_vec(&program).unwrap()).unwrap();

    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let base = run("none", &program_file, rounds);
    let lc = run("libcontainer", &lc_file, rounds);
    let pre = run("precompiled", &program_file, rounds);
    println!(
        "per container, CPU beyond a child that only starts: libcontainer compile+load {:.2} ms, precompiled load {:.2} ms (baseline child {:.2} ms, {rounds} rounds)",
        ms(lc.saturating_sub(base)),
        ms(pre.saturating_sub(base)),
        ms(base)
    );
}
