//! A container runs under podhost's RuntimeDefault seccomp filter: a static probe
//! (tests/vm/seccomp-probe.c) in a pod tries calls the filter decides and reports what
//! the kernel answered.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

const PROBE_IMAGE: &str = "localhost/seccomp-probe:latest";

/// Compiles the probe statically and builds an image with it, in a dir of this test's.
fn probe_layout(work: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vm/seccomp-probe.c");
    let bin = work.join("seccomp-probe");
    let out = Command::new("gcc")
        .args(["-static", "-O2", "-Wall", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .expect("run gcc (apt-get install gcc libc6-dev)");
    assert!(
        out.status.success(),
        "gcc -static failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let layout = work.join("layout");
    build_busybox_layout(
        &layout,
        &[
            "--ref".as_ref(),
            PROBE_IMAGE.as_ref(),
            "--add".as_ref(),
            bin.as_os_str(),
        ],
    );
    layout
}

#[test]
fn a_pod_runs_under_the_runtime_default_filter() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root (namespaces, mounts, cgroups)"
    );
    let work = tempfile::Builder::new()
        .prefix("podhost-seccomp-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let layout = probe_layout(work.path());
    let d = TestDaemon::start();
    d.load(&layout);
    d.write_manifest(
        "probe.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: probe\nspec:\n  restartPolicy: Never\n  containers:\n  - name: main\n    image: {PROBE_IMAGE}\n    imagePullPolicy: Never\n    command: [\"seccomp-probe\"]\n"
        ),
    );
    let pod = d.wait_pod("probe", "probe Succeeded", 30, |p| {
        (phase(p) == "Succeeded").then(|| p.clone())
    });
    let terminated = &container_status(&pod, "main").unwrap()["state"]["terminated"];
    assert_eq!(terminated["exitCode"], 0, "{terminated}");

    // The whole log is the probe's output: nothing libcontainer logs in the container's
    // init before the exec (e.g. syscalls libseccomp does not know) may land in it.
    let log = d.logs_of("probe", "main");
    let got: Vec<String> = log
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    let expected = [
        // Allowed by the filter.
        "getpid ok",
        "socket_inet ok",
        "socket_unix ok",
        // Refused by it (each succeeds for root in a container without the filter).
        "socket_vsock EPERM",
        "socket_alg EPERM",
        "clone_fork ok",
        "clone_newuser EPERM",
        // ENOSYS, so that libcs fall back to clone(2).
        "clone3 ENOSYS",
        "unshare_newuser EPERM",
        "personality_linux ok",
        "personality_no_randomize EPERM",
        "add_key EPERM",
        "keyctl EPERM",
        "mount EPERM",
        // Mode 2: filter; one filter, podhost's.
        "Seccomp: 2",
        "Seccomp_filters: 1",
    ];
    assert_eq!(got, expected, "probe output:\n{log}");
    // The filter is in the bundle's spec, as the OCI runtime spec has it.
    let uid = pod["metadata"]["uid"].as_str().unwrap();
    let config: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            d.root
                .join(format!("pods/{uid}/containers/main/0/config.json")),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        config["linux"]["seccomp"]["defaultAction"],
        "SCMP_ACT_ERRNO"
    );
    d.remove_manifest("probe.yaml");
    d.wait_gone("probe", 30);
}
