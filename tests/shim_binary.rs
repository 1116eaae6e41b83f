//! `podhost-shim`, the shim's own binary (the daemon execs it per container, see
//! runtime/helper_exe.rs): it answers podhost's two shim commands, refuses anything
//! else, and reports a start failure to the daemon as podhost's shim does. (Its size is
//! measured by the benchmarks, not here: a debug build's sizes say nothing.) It links
//! only the shim's crates: no cluster, HTTP, TLS or registry code.

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

/// The daemon fsyncs the shim config while the shim starts, and the shim makes nothing
/// (rootfs, container state) before the daemon's byte on its stdin says the config is
/// durable; a closed stdin without it is a start failure that leaves nothing behind.
#[test]
fn the_shim_makes_nothing_before_the_daemon_says_its_config_is_durable() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    std::fs::create_dir_all(&bundle).unwrap();
    let config = bundle.join("shim-config.json");
    let rootfs = bundle.join("rootfs");
    let libcontainer_root = dir.path().join("libcontainer");
    std::fs::write(
        &config,
        serde_json::json!({
            "container_id": "durable-wait-test",
            "bundle": bundle,
            "libcontainer_root": libcontainer_root,
            "log_path": dir.path().join("main.log"),
            "lower_dirs": [dir.path().join("no-such-layer")],
            "rootfs": rootfs,
        })
        .to_string(),
    )
    .unwrap();
    let mut shim = std::process::Command::new(SHIM)
        .arg("shim")
        .arg(&config)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdin = shim.stdin.take().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let waiting = shim.try_wait().unwrap().is_none();
    let made_rootfs = rootfs.exists() || bundle.join("upper").exists();
    let made_state = libcontainer_root.exists();
    drop(stdin);
    let status = shim.wait().unwrap();
    let mut stdout = String::new();
    shim.stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    assert!(
        waiting,
        "the shim waits for the byte; it ended with {status:?}: {stdout}"
    );
    assert!(!made_rootfs, "no rootfs before the byte");
    assert!(!made_state, "no libcontainer state before the byte");
    assert_eq!(status.code(), Some(1), "{stdout}");
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert!(
        report
            .to_string()
            .contains("did not confirm the shim config durable"),
        "{report}"
    );
    assert!(!rootfs.exists() && !libcontainer_root.exists());
}

/// Crates of the cluster client, HTTP, TLS and the registry client: none is the shim's.
const NOT_THE_SHIMS: [&str; 10] = [
    "kube",
    "kube-client",
    "kube-core",
    "k8s-openapi",
    "hyper",
    "h2",
    "rustls",
    "tokio-rustls",
    "reqwest",
    "oci-client",
];

#[test]
fn the_shim_crate_depends_on_no_cluster_http_tls_or_registry_crate() {
    // Cargo's own view of the crate graph: the dependencies of podhost-shim (the crate
    // the shim and monitor binaries call), normal edges only.
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "tree",
            "-p",
            "podhost-shim",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--offline",
            "--locked",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "cargo tree: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let crates: std::collections::BTreeSet<&str> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(
        crates.contains("podhost-runtime") && crates.contains("libcontainer"),
        "not the shim's tree: {crates:?}"
    );
    let found: Vec<&str> = NOT_THE_SHIMS
        .into_iter()
        .filter(|c| crates.contains(c))
        .collect();
    assert!(found.is_empty(), "podhost-shim depends on {found:?}");
}

#[test]
fn the_shim_and_monitor_binaries_link_no_cluster_http_tls_or_registry_code() {
    for binary in [SHIM, env!("CARGO_BIN_EXE_podhost-monitor")] {
        // The symbols the linker kept (it drops what the entry points never reach).
        let out = std::process::Command::new("nm")
            .args(["--demangle", "--defined-only", binary])
            .output()
            .unwrap();
        assert!(out.status.success(), "nm {binary}");
        let symbols = String::from_utf8_lossy(&out.stdout);
        assert!(
            symbols.lines().any(|l| l.contains("podhost_shim::")),
            "{binary}: no podhost_shim symbol; is it stripped?"
        );
        let found: Vec<&str> = symbols
            .lines()
            .filter(|l| {
                NOT_THE_SHIMS
                    .iter()
                    .any(|c| l.contains(&format!("{}::", c.replace('-', "_"))))
            })
            .take(5)
            .collect();
        assert!(found.is_empty(), "{binary} links {found:?}");
    }
}
