//! The podhost binary allocates with jemalloc, configured as `.cargo/config.toml` says
//! (one arena, freed pages handed back within a second, no thread caches: see src/main.rs). A
//! build that lost the options (a cargo run outside the repository, which does not read
//! its config, or a changed build variable) still works but keeps several MiB more of
//! the daemon's heap resident; this catches it. jemalloc prints its settings at exit
//! when asked to by its (prefixed) environment variable.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

/// jemalloc's statistics, printed at the exit of a `podhost --version`.
fn jemalloc_stats_of(binary: &str) -> (bool, String) {
    let out = Command::new(binary)
        .arg("--version")
        .env("_RJEM_MALLOC_CONF", "stats_print:true")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn podhost_runs_on_jemalloc_with_one_arena_a_one_second_purge_and_no_thread_caches() {
    let (ok, stats) = jemalloc_stats_of(env!("CARGO_BIN_EXE_podhost"));
    assert!(ok, "podhost --version failed: {stats}");
    for setting in [
        "opt.narenas: 1\n",
        "opt.dirty_decay_ms: 1000 ",
        "opt.muzzy_decay_ms: 0 ",
        "opt.tcache: false\n",
    ] {
        assert!(
            stats.contains(setting),
            "jemalloc's statistics lack {setting:?}: {stats}"
        );
    }
}

#[test]
fn the_shim_keeps_the_c_librarys_allocator() {
    // The shim forks libcontainer's processes and is one per container: it gains
    // nothing from jemalloc's slabs and would pay its start-up. Its stderr stays empty
    // of jemalloc's statistics.
    let out = Command::new(env!("CARGO_BIN_EXE_podhost-shim"))
        .env("_RJEM_MALLOC_CONF", "stats_print:true")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("jemalloc statistics"),
        "podhost-shim printed jemalloc's statistics: {stderr}"
    );
}
