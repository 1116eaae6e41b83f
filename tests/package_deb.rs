//! The Debian package installs, runs its example pod, removes and purges cleanly on a
//! fresh Debian 12 root: tests/package/package-test.sh does the work (it needs dpkg,
//! lintian and mmdebstrap, which scripts/install-deps.sh --test installs, and the Debian mirror
//! once, to build the cached root). The package holds this build's podhost binary, so
//! `cargo test` needs no release build.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

#[test]
fn the_deb_installs_runs_a_pod_and_purges_without_leftovers() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("bash")
        .arg(repo.join("tests/package/package-test.sh"))
        .env("PODHOST_BIN", env!("CARGO_BIN_EXE_podhost"))
        .output()
        .expect("run bash tests/package/package-test.sh");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "package-test.sh failed ({}):\n{stderr}",
        out.status
    );
    assert!(
        stderr.trim_end().ends_with("package-test: ok"),
        "package-test.sh did not finish:\n{stderr}"
    );
}
