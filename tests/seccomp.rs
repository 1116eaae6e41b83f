//! A container runs under podhost's RuntimeDefault seccomp filter: a static probe
//! (tests/vm/seccomp-probe.c) in a pod tries calls the filter decides and reports what
//! the kernel answered.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;

const PROBE_IMAGE: &str = "localhost/seccomp-probe:latest";

/// What the probe reports under RuntimeDefault, for root with the default capabilities.
const PROBE_EXPECTED: [&str; 16] = [
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

/// Compiles the probe statically and builds an image with it, in a dir of this test's.
fn probe_layout(work: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vm/seccomp-probe.c");
    static_program_layout(&src, work, PROBE_IMAGE)
}

/// A daemon with the probe image loaded; the work dir must outlive it.
fn daemon_with_probe(prefix: &str) -> (tempfile::TempDir, TestDaemon) {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root (namespaces, mounts, cgroups)"
    );
    let work = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let layout = probe_layout(work.path());
    let d = TestDaemon::start();
    d.load(&layout);
    (work, d)
}

/// One container of the probe image that sleeps, with this securityContext.
fn sleeping_probe(name: &str, security: &str) -> String {
    format!(
        "  - name: {name}\n    image: {PROBE_IMAGE}\n    imagePullPolicy: Never\n    command: [\"sleep\", \"3600\"]\n    securityContext: {security}\n"
    )
}

/// The lines of a /proc/PID/status that start with one of `prefixes` (but not `SigQ`,
/// the queue count), tabs squeezed.
fn status_lines(status: &str, prefixes: &[&str]) -> Vec<String> {
    status
        .lines()
        .filter(|l| prefixes.iter().any(|p| l.starts_with(p)) && !l.starts_with("SigQ"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

#[test]
fn a_pod_runs_under_the_runtime_default_filter() {
    let (_work, d) = daemon_with_probe("podhost-seccomp-");
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
    let expected = PROBE_EXPECTED;
    assert_eq!(got, expected, "probe output:\n{log}");
    // The filter is not in the bundle's spec (libcontainer would compile it in the
    // container): the shim config carries the program the daemon compiled.
    let uid = pod["metadata"]["uid"].as_str().unwrap();
    let bundle = d.root.join(format!("pods/{uid}/containers/main/0"));
    let read = |f: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(bundle.join(f)).unwrap()).unwrap()
    };
    assert!(read("config.json")["linux"]["seccomp"].is_null());
    let program = read("shim-config.json")["seccomp"]["filter"]["program"].clone();
    assert!(
        program.as_str().is_some_and(|p| p.len() > 100),
        "no precompiled program in the shim config: {program}"
    );
    d.remove_manifest("probe.yaml");
    d.wait_gone("probe", 30);
}

#[test]
fn exec_gets_the_containers_filter_capabilities_and_default_signals() {
    let (_work, d) = daemon_with_probe("podhost-seccomp-exec-");
    // Root with the default capabilities (the filter loads with CAP_SYS_ADMIN added for
    // the moment), no_new_privs (it loads unprivileged) and a non-root user.
    d.write_manifest(
        "exec.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: exec\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n{}{}{}",
            sleeping_probe("root", "{}"),
            sleeping_probe("nnp", "{allowPrivilegeEscalation: false}"),
            sleeping_probe("user", "{runAsUser: 1000, runAsGroup: 1000}"),
        ),
    );
    d.wait_pod("exec", "exec Running", 30, |p| {
        (phase(p) == "Running").then_some(())
    });
    let pod_name = d.full_name("exec");
    let exec = |c: &str, args: &[&str]| {
        let mut all = vec!["exec", pod_name.as_str(), "-c", c, "--"];
        all.extend_from_slice(args);
        let out = d.cli(&all);
        assert!(
            out.status.success(),
            "exec {args:?} in {c}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    for c in ["root", "nnp", "user"] {
        // The filter of the container, in the exec'd process too.
        let probe: Vec<String> = exec(c, &["seccomp-probe"])
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        assert_eq!(probe, PROBE_EXPECTED, "seccomp-probe exec'd into {c}");

        // Exactly the container's capabilities and no_new_privs (nothing of what the
        // exec'd process held while loading the filter), and default signal handling.
        let own = status_lines(
            &exec(c, &["cat", "/proc/self/status"]),
            &["Cap", "Sig", "NoNewPrivs"],
        );
        let init = status_lines(
            &exec(c, &["cat", "/proc/1/status"]),
            &["Cap", "Sig", "NoNewPrivs"],
        );
        assert_eq!(own, init, "exec'd process vs the container's in {c}");
        for line in &init {
            if line.starts_with("SigIgn") || line.starts_with("SigBlk") {
                assert!(line.ends_with(" 0000000000000000"), "{c}: {line}");
            }
        }
        let cap_sys_admin = 1u64 << 21;
        let bounding = init.iter().find(|l| l.starts_with("CapBnd")).unwrap();
        let bounding = u64::from_str_radix(bounding.rsplit(' ').next().unwrap(), 16).unwrap();
        assert_eq!(
            bounding & cap_sys_admin,
            0,
            "{c} has CAP_SYS_ADMIN in its bounding set"
        );

        // SIGPIPE at its default: the writer of a closed pipe dies, the pipe ends.
        assert_eq!(
            exec(
                c,
                &[
                    "sh",
                    "-c",
                    "timeout 20 sh -c 'yes | head -c 100000 | wc -c'"
                ]
            )
            .trim(),
            "100000",
            "{c}"
        );
    }
    d.remove_manifest("exec.yaml");
    d.wait_gone("exec", 30);
}

#[test]
fn a_containers_process_runs_the_precompiled_program_with_its_exact_capabilities() {
    let (_work, d) = daemon_with_probe("podhost-seccomp-caps-");
    d.write_manifest(
        "caps.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: caps\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n{}{}{}{}",
            sleeping_probe("root", "{}"),
            sleeping_probe("nnp", "{allowPrivilegeEscalation: false}"),
            sleeping_probe("user", "{runAsUser: 1000, runAsGroup: 1000}"),
            sleeping_probe("admin", "{capabilities: {add: [SYS_ADMIN]}}"),
        ),
    );
    let pod = d.wait_pod("caps", "caps Running", 30, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    let uid = pod["metadata"]["uid"].as_str().unwrap();
    // containerd's default capabilities, and with CAP_SYS_ADMIN (bit 21) added.
    const DEFAULT: &str = "00000000a80425fb";
    const ADMIN: &str = "00000000a82425fb";
    let expected = |bnd: &str, eff: &str, nnp: u8| {
        vec![
            "CapInh: 0000000000000000".to_string(),
            format!("CapPrm: {eff}"),
            format!("CapEff: {eff}"),
            format!("CapBnd: {bnd}"),
            "CapAmb: 0000000000000000".to_string(),
            format!("NoNewPrivs: {nnp}"),
            "Seccomp: 2".to_string(),
            "Seccomp_filters: 1".to_string(),
        ]
    };
    let cases = [
        ("root", expected(DEFAULT, DEFAULT, 0)),
        ("nnp", expected(DEFAULT, DEFAULT, 1)),
        ("user", expected(DEFAULT, "0000000000000000", 0)),
        ("admin", expected(ADMIN, ADMIN, 0)),
    ];
    for (c, want) in cases {
        let bundle = d.root.join(format!("pods/{uid}/containers/{c}/0"));
        let read = |f: &str| -> serde_json::Value {
            serde_json::from_slice(&std::fs::read(bundle.join(f)).unwrap()).unwrap()
        };
        let pid = i32::try_from(read("started.json")["init_pid"].as_i64().unwrap()).unwrap();
        // Running is reported once libcontainer's start returns; the init may still be
        // between loading its filter and dropping the capabilities it loaded it with.
        // Its sets are final once it runs the container's program.
        wait_until(Duration::from_secs(20), "the container's sleep", || {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            (cmdline == b"sleep\x003600\x00").then_some(())
        })
        .unwrap_or_else(|| panic!("{c}: pid {pid} never ran `sleep 3600`"));
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        assert_eq!(
            status_lines(&status, &["Cap", "NoNewPrivs", "Seccomp"]),
            want,
            "{c}: /proc/{pid}/status"
        );

        // The kernel holds the daemon's program, which is a fresh compile of the
        // container's RuntimeDefault filter (the same program libcontainer loads: the
        // library's unit tests compare the two).
        let loaded = podhost::runtime::seccomp::read_loaded_filter(pid, 0).unwrap();
        let handed = read("shim-config.json")["seccomp"]["filter"]["program"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(
            hex::encode(&loaded),
            handed,
            "{c}: loaded vs the shim config's"
        );
        let bits = u64::from_str_radix(want[3].rsplit(' ').next().unwrap(), 16).unwrap();
        let caps: std::collections::HashSet<_> = all_capabilities()
            .into_iter()
            .filter(|(bit, _)| bits & (1 << bit) != 0)
            .map(|(_, cap)| cap)
            .collect();
        let fresh = podhost::runtime::seccomp::compile(
            &podhost::runtime::seccomp::linux_seccomp(
                &podhost::runtime::seccomp::SeccompProfile::RuntimeDefault,
                &caps,
                Path::new("/nonexistent"),
            )
            .unwrap()
            .unwrap(),
        )
        .unwrap();
        assert_eq!(loaded, fresh.program, "{c}: loaded vs a fresh compile");
    }
    d.remove_manifest("caps.yaml");
    d.wait_gone("caps", 30);
}

/// The capabilities of the default and admin sets, by bit number.
fn all_capabilities() -> Vec<(u32, oci_spec::runtime::Capability)> {
    use oci_spec::runtime::Capability as C;
    vec![
        (0, C::Chown),
        (1, C::DacOverride),
        (3, C::Fowner),
        (4, C::Fsetid),
        (5, C::Kill),
        (6, C::Setgid),
        (7, C::Setuid),
        (8, C::Setpcap),
        (10, C::NetBindService),
        (13, C::NetRaw),
        (18, C::SysChroot),
        (21, C::SysAdmin),
        (27, C::Mknod),
        (29, C::AuditWrite),
        (31, C::Setfcap),
    ]
}
