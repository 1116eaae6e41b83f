//! `podhost-shim`, the shim's own binary (the daemon execs it per container, see
//! runtime/helper_exe.rs): it answers podhost's two shim commands, refuses anything
//! else, and reports a start failure to the daemon as podhost's shim does. (Its size is
//! measured by the benchmarks, not here: a debug build's sizes say nothing.)

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

const SHIM: &str = env!("CARGO_BIN_EXE_podhost-shim");

#[test]
fn the_shim_binary_refuses_a_bad_command_line() {
    for args in [
        &[][..],
        &["daemon"][..],
        &["shim"][..],
        &["shim", "a", "b"][..],
    ] {
        let out = std::process::Command::new(SHIM)
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("usage: podhost-shim shim CONFIG"),
            "{stderr}"
        );
    }
}

#[test]
fn the_shim_binary_reports_a_missing_config_as_a_start_failure() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("shim-config.json");
    let out = std::process::Command::new(SHIM)
        .arg("shim")
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    // One JSON line on stdout, the daemon's report pipe, naming the missing file.
    let stdout = String::from_utf8(out.stdout).unwrap();
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let text = report.to_string();
    assert!(
        text.contains(&config.display().to_string()),
        "the failure names the config: {text}"
    );
    // shim-cleanup without a config does nothing and says so by its code.
    let out = std::process::Command::new(SHIM)
        .arg("shim-cleanup")
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}
