//! securityContext honoured with the kubelet's semantics, seen from inside real
//! containers on this host: user and groups, capabilities, no_new_privs, read-only
//! root, masked /proc, privileged, hostPID/hostIPC, /dev/shm per pod, sysctls,
//! runAsNonRoot refusals and the pod rejections (SysctlForbidden, AppArmor). The same
//! checks on a real cgroup v2 kernel are in tests/vm/checks/60-security-context.sh.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use serde_json::Value;
use std::time::Duration;

/// containerd's default capability set: CHOWN DAC_OVERRIDE FOWNER FSETID KILL SETGID
/// SETUID SETPCAP NET_BIND_SERVICE NET_RAW SYS_CHROOT MKNOD AUDIT_WRITE SETFCAP.
const DEFAULT_CAPS: u64 = 0xa80425fb;

fn own_status(field: &str) -> String {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix(&format!("{field}:"))
                .map(|v| v.trim().to_string())
        })
        .unwrap()
}

/// Waits until container `c` of `pod` has printed its `done` line.
fn logs_when_done(d: &TestDaemon, pod: &str, c: &str) -> String {
    wait_until(Duration::from_secs(30), "the probe printed done", || {
        let l = d.logs_of(pod, c);
        l.lines().any(|x| x == "done").then_some(l)
    })
    .unwrap_or_else(|| {
        panic!(
            "{c} never printed done; logs:\n{}\ndaemon log:\n{}",
            d.logs_of(pod, c),
            d.daemon_log()
        )
    })
}

const PROBE: &str = r#"s() { grep "^$1:" /proc/self/status | sed "s/^$1:[[:space:]]*/$1=/"; }
echo "id=$(id)"; s CapEff; s CapPrm; s CapInh; s CapAmb; s NoNewPrivs
if touch /probe-root 2>/dev/null; then echo root=rw; else echo root=ro; fi
if mktemp /dev/shm/probe.XXXXXX >/dev/null 2>&1; then echo shm=rw; else echo shm=ro; fi
echo "shmsize=$(df -k /dev/shm | awk 'NR==2 {print $2}')"
echo "interrupts=$(head -c 64 /proc/interrupts 2>/dev/null | wc -c)"
if echo 1 > /proc/sys/kernel/shm_rmid_forced 2>/dev/null; then echo procsys=rw; else echo procsys=ro; fi
echo "sys=$(awk '$2 == "/sys" {print $4}' /proc/mounts | cut -d, -f1)"
echo "pidns=$(readlink /proc/self/ns/pid)"; echo "ipcns=$(readlink /proc/self/ns/ipc)"
echo "devs=$(ls /dev | tr '\n' ' ')"
echo done; sleep 1000"#;

fn pod_with(name: &str, pod_spec: &str, containers: &[(&str, &str)]) -> String {
    let mut y = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n{pod_spec}  containers:\n"
    );
    for (c, sc) in containers {
        y.push_str(&format!(
            "  - name: {c}\n    image: localhost/busybox:latest\n    imagePullPolicy: Never\n    command: [\"sh\", \"-c\", {}]\n    securityContext: {sc}\n",
            serde_json::to_string(PROBE).unwrap()
        ));
    }
    y
}

#[test]
fn identity_capabilities_and_filesystems() {
    assert!(require_root());
    let d = TestDaemon::start();
    d.write_manifest(
        "sec.yaml",
        &pod_with(
            "sec",
            "  securityContext: {supplementalGroups: [4000], fsGroup: 5000}\n",
            &[
                ("plain", "{}"),
                ("user", "{runAsUser: 1000, runAsGroup: 3000}"),
                (
                    "locked",
                    "{capabilities: {drop: [ALL], add: [NET_BIND_SERVICE]}, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true}",
                ),
                (
                    "extra",
                    "{capabilities: {add: [NET_ADMIN, sys_time], drop: [MKNOD]}}",
                ),
            ],
        ),
    );
    let plain = logs_when_done(&d, "sec", "plain");
    assert_eq!(field(&plain, "CapEff"), format!("{DEFAULT_CAPS:016x}"));
    assert_eq!(field(&plain, "CapPrm"), format!("{DEFAULT_CAPS:016x}"));
    assert_eq!(
        field(&plain, "CapInh"),
        "0000000000000000",
        "no inheritable caps"
    );
    assert_eq!(
        field(&plain, "CapAmb"),
        "0000000000000000",
        "no ambient caps"
    );
    assert_eq!(field(&plain, "NoNewPrivs"), "0", "the kubelet's default");
    let id = field(&plain, "id");
    assert!(id.starts_with("uid=0(root) gid=0(root)"), "{id}");
    assert!(
        id.contains("4000") && id.contains("5000"),
        "supplementalGroups and fsGroup: {id}"
    );
    assert_eq!(field(&plain, "root"), "rw");
    assert_eq!(field(&plain, "shm"), "rw");
    assert_eq!(
        field(&plain, "shmsize"),
        "65536",
        "a 64 MiB /dev/shm per pod"
    );
    assert_eq!(
        field(&plain, "interrupts"),
        "0",
        "/proc/interrupts is masked"
    );
    assert_eq!(field(&plain, "procsys"), "ro");
    assert_eq!(field(&plain, "sys"), "ro");

    let user = logs_when_done(&d, "sec", "user");
    let id = field(&user, "id");
    assert!(id.starts_with("uid=1000 gid=3000"), "{id}");
    assert!(id.contains("4000") && id.contains("5000"), "{id}");
    assert_eq!(
        field(&user, "CapEff"),
        "0000000000000000",
        "a non-root user"
    );

    let locked = logs_when_done(&d, "sec", "locked");
    assert_eq!(field(&locked, "CapEff"), format!("{:016x}", 1u64 << 10));
    assert_eq!(field(&locked, "NoNewPrivs"), "1");
    assert_eq!(field(&locked, "root"), "ro", "readOnlyRootFilesystem");
    assert_eq!(field(&locked, "shm"), "rw", "/dev/shm stays writable");

    let extra = logs_when_done(&d, "sec", "extra");
    let want = (DEFAULT_CAPS | (1 << 12) | (1 << 25)) & !(1 << 27);
    assert_eq!(field(&extra, "CapEff"), format!("{want:016x}"));

    // `podhost exec` runs as the container's process does (user, groups, capabilities,
    // no_new_privs), not as libcontainer's default root.
    let exec = |c: &str, cmd: &str| {
        let out = d.cli(&["exec", &d.full_name("sec"), "-c", c, "--", "sh", "-c", cmd]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(exec("user", "id -u; id -g"), "1000\n3000");
    assert_eq!(
        exec(
            "locked",
            "grep -E '^(CapEff|NoNewPrivs)' /proc/self/status | tr -s '\\t ' ' '"
        ),
        "CapEff: 0000000000000400\nNoNewPrivs: 1"
    );

    // The pod's containers share one /dev/shm and one IPC namespace.
    assert_eq!(field(&plain, "ipcns"), field(&user, "ipcns"));
    assert_ne!(field(&plain, "pidns"), field(&user, "pidns"));
    let pod = d.pod("sec").unwrap();
    assert_eq!(phase(&pod), "Running");
}

#[test]
fn privileged_and_host_namespaces() {
    assert!(require_root());
    let d = TestDaemon::start();
    d.write_manifest(
        "priv.yaml",
        &pod_with(
            "priv",
            "  hostPID: true\n  hostIPC: true\n",
            &[
                ("root", "{privileged: true}"),
                ("unmasked", "{procMount: Unmasked}"),
            ],
        ),
    );
    let root = logs_when_done(&d, "priv", "root");
    // Everything podhost itself holds (this host's root lacks CAP_SYS_RESOURCE).
    assert_eq!(field(&root, "CapEff"), own_status("CapBnd"));
    assert_eq!(field(&root, "sys"), "rw");
    assert_eq!(field(&root, "procsys"), "rw");
    assert_ne!(field(&root, "interrupts"), "0", "nothing masked");
    let host_dev_null = std::fs::read_dir("/dev").unwrap().count();
    let devs = field(&root, "devs");
    assert!(
        devs.split_whitespace().count() + 10 >= host_dev_null,
        "the host's devices: {devs}"
    );
    let host_pidns = std::fs::read_link("/proc/self/ns/pid").unwrap();
    let host_ipcns = std::fs::read_link("/proc/self/ns/ipc").unwrap();
    assert_eq!(
        field(&root, "pidns"),
        host_pidns.to_str().unwrap(),
        "hostPID"
    );
    assert_eq!(
        field(&root, "ipcns"),
        host_ipcns.to_str().unwrap(),
        "hostIPC"
    );
    let unavailable = d
        .pod_events("priv")
        .into_iter()
        .filter(|e| e["reason"] == "CapabilityUnavailable")
        .count();
    let missing = 41
        - u64::from_str_radix(&own_status("CapBnd"), 16)
            .unwrap()
            .count_ones() as usize;
    assert_eq!(
        unavailable, missing,
        "one event per capability the host lacks"
    );

    let unmasked = logs_when_done(&d, "priv", "unmasked");
    assert_ne!(field(&unmasked, "interrupts"), "0", "procMount: Unmasked");
    assert_eq!(field(&unmasked, "CapEff"), format!("{DEFAULT_CAPS:016x}"));
}

/// runAsNonRoot: refused as the kubelet refuses it (CreateContainerConfigError, the
/// pod does not start), visible in `get pods` and `describe`; a named image user is
/// checked by its uid in the image's /etc/passwd.
#[test]
fn run_as_non_root() {
    assert!(require_root());
    let d = TestDaemon::start();
    let tmp = tempfile::tempdir().unwrap();
    d.load(&image_variant(
        &tmp.path().join("nobody"),
        "localhost/busybox-nobody:1",
        serde_json::json!({"User": "nobody"}),
    ));
    let pod = |name: &str, image: &str, sc: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n  securityContext: {sc}\n  containers:\n  - name: main\n    image: {image}\n    imagePullPolicy: Never\n    command: [\"sh\", \"-c\", \"id; sleep 1000\"]\n"
        )
    };
    d.write_manifest(
        "root.yaml",
        &pod("asroot", "localhost/busybox:latest", "{runAsNonRoot: true}"),
    );
    d.write_manifest(
        "zero.yaml",
        &pod(
            "zero",
            "localhost/busybox:latest",
            "{runAsNonRoot: true, runAsUser: 0}",
        ),
    );
    d.write_manifest(
        "named.yaml",
        &pod(
            "named",
            "localhost/busybox-nobody:1",
            "{runAsNonRoot: true}",
        ),
    );
    d.write_manifest(
        "numeric.yaml",
        &pod(
            "numeric",
            "localhost/busybox:latest",
            "{runAsNonRoot: true, runAsUser: 1000}",
        ),
    );
    let waiting = |name: &str| -> Value {
        d.wait_pod(name, "CreateContainerConfigError", 30, |p| {
            let w = &container_status(p, "main")?["state"]["waiting"];
            (w["reason"] == "CreateContainerConfigError").then(|| p.clone())
        })
    };
    let p = waiting("asroot");
    assert_eq!(phase(&p), "Pending");
    let uid = p["metadata"]["uid"].as_str().unwrap();
    let msg = container_status(&p, "main").unwrap()["state"]["waiting"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        msg,
        format!(
            "container has runAsNonRoot and image will run as root (pod: \"{}_default({uid})\", container: main)",
            d.full_name("asroot")
        )
    );
    let msg = container_status(&waiting("zero"), "main").unwrap()["state"]["waiting"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        msg.starts_with("container's runAsUser breaks non-root policy"),
        "{msg}"
    );
    // Seen by a user: the table's status column and describe.
    let table = String::from_utf8_lossy(&d.cli(&["get", "pods"]).stdout).into_owned();
    let row = table
        .lines()
        .find(|l| l.starts_with(&d.full_name("asroot")))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(row.contains("CreateContainerConfigError"), "{table}");
    let describe =
        String::from_utf8_lossy(&d.cli(&["describe", "pod", &d.full_name("asroot")]).stdout)
            .into_owned();
    assert!(
        describe.contains("image will run as root"),
        "describe shows the reason:\n{describe}"
    );
    // Named user resolved in the image (65534) and an explicit uid: both run.
    for name in ["named", "numeric"] {
        d.wait_pod(name, "Running", 30, |p| {
            (phase(p) == "Running").then_some(())
        });
    }
    let id = wait_until(Duration::from_secs(10), "id printed", || {
        let l = d.logs_of("named", "main");
        (!l.is_empty()).then_some(l)
    })
    .unwrap();
    assert!(id.starts_with("uid=65534"), "{id}");
    // Never started, never restarted.
    assert_eq!(
        container_status(&waiting("asroot"), "main").unwrap()["restartCount"],
        0
    );
}

#[test]
fn sysctls_and_rejections() {
    assert!(require_root());
    let d = TestDaemon::start_with(&["--allowed-unsafe-sysctls=net.core.somaxconn,kernel.msg*"]);
    let sysctl_pod = |name: &str, extra: &str, sysctls: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n{extra}  securityContext:\n    sysctls: {sysctls}\n  containers:\n  - name: main\n    image: localhost/busybox:latest\n    imagePullPolicy: Never\n    command: [\"sh\", \"-c\", \"for f in kernel/shm_rmid_forced net/ipv4/ping_group_range net/core/somaxconn kernel/msgmax; do echo $f=$(cat /proc/sys/$f | tr '\\\\t' ' '); done; echo done; sleep 1000\"]\n"
        )
    };
    d.write_manifest(
        "ok.yaml",
        &sysctl_pod(
            "ok",
            "",
            "[{name: kernel.shm_rmid_forced, value: \"1\"}, {name: net/ipv4/ping_group_range, value: \"0 2000\"}, {name: net.core.somaxconn, value: \"1234\"}, {name: kernel.msgmax, value: \"9000\"}]",
        ),
    );
    d.write_manifest(
        "bad.yaml",
        &sysctl_pod("bad", "", "[{name: kernel.sem, value: \"1 2 3 4\"}]"),
    );
    d.write_manifest(
        "hostnet.yaml",
        &sysctl_pod(
            "hostnet",
            "  hostNetwork: true\n",
            "[{name: net.ipv4.tcp_syncookies, value: \"1\"}]",
        ),
    );
    d.write_manifest(
        "aa.yaml",
        &busybox_pod(
            "aa",
            "  securityContext: {appArmorProfile: {type: RuntimeDefault}}\n",
            "",
            "sleep 1000",
        ),
    );
    d.write_manifest(
        "userns.yaml",
        &busybox_pod(
            "userns",
            "  hostUsers: false\n  hostNetwork: true\n",
            "",
            "sleep 1000",
        ),
    );
    let logs = logs_when_done(&d, "ok", "main");
    assert_eq!(field(&logs, "kernel/shm_rmid_forced"), "1");
    assert_eq!(field(&logs, "net/ipv4/ping_group_range"), "0 2000");
    assert_eq!(field(&logs, "net/core/somaxconn"), "1234");
    assert_eq!(field(&logs, "kernel/msgmax"), "9000");
    let host_somaxconn = std::fs::read_to_string("/proc/sys/net/core/somaxconn").unwrap();
    assert_ne!(host_somaxconn.trim(), "1234", "the pod's own net namespace");
    let failed = |name: &str| -> Value {
        d.wait_pod(name, "Failed", 20, |p| {
            (phase(p) == "Failed").then(|| p.clone())
        })
    };
    let bad = failed("bad");
    assert_eq!(bad["status"]["reason"], "SysctlForbidden");
    assert_eq!(
        bad["status"]["message"],
        "Pod was rejected: forbidden sysctl: \"kernel.sem\" not allowlisted"
    );
    let hostnet = failed("hostnet");
    assert_eq!(
        hostnet["status"]["message"],
        "Pod was rejected: forbidden sysctl: \"net.ipv4.tcp_syncookies\" not allowed with host net enabled"
    );
    assert!(
        bad["status"]["containerStatuses"].is_null()
            || container_status(&bad, "main").unwrap()["state"]["running"].is_null(),
        "nothing of a rejected pod runs"
    );
    // This host has no AppArmor: the kubelet refuses such a pod.
    let aa = failed("aa");
    assert_eq!(aa["status"]["reason"], "AppArmor");
    assert_eq!(
        aa["status"]["message"],
        "Pod was rejected: Cannot enforce AppArmor: AppArmor is not enabled on the host"
    );
    assert!(
        d.pod_events("aa").iter().any(|e| e["reason"] == "AppArmor"),
        "a warning event"
    );
    let userns = failed("userns");
    assert_eq!(userns["status"]["reason"], "UserNamespacesInvalid");
    assert_eq!(
        userns["status"]["message"],
        "Pod was rejected: spec.hostNetwork: Forbidden: when `hostUsers` is false; remove one of them"
    );
}

#[test]
fn an_unknown_node_wide_sysctl_allowance_stops_the_daemon() {
    assert!(require_root());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_podhost"))
        .args(["daemon", "--allowed-unsafe-sysctls=kernel.pid_max"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("kernel.pid_max") && err.contains("namespaced"),
        "{err}"
    );
}

#[test]
fn a_malformed_sysctl_allowance_stops_the_daemon_from_a_flag_or_the_config_file() {
    assert!(require_root());
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nallowedUnsafeSysctls: [\"net..*\"]\n",
    )
    .unwrap();
    for (args, pattern) in [
        (
            vec!["daemon", "--allowed-unsafe-sysctls=net.ipv4/../../kernel.*"],
            "net.ipv4/../../kernel.*",
        ),
        (
            vec!["daemon", "--config", config.to_str().unwrap()],
            "net..*",
        ),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_podhost"))
            .args(&args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "--allowed-unsafe-sysctls (allowedUnsafeSysctls): {pattern:?} must have at most 253 characters and match regex"
            )),
            "{args:?}: {err}"
        );
    }
}

/// shareProcessNamespace: the containers see each other's processes; PID 1 is
/// `podhost pause`, which goes away with the pod.
#[test]
fn shared_process_namespace() {
    assert!(require_root());
    let d = TestDaemon::start();
    d.write_manifest(
        "share.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: share\nspec:\n  terminationGracePeriodSeconds: 1\n  shareProcessNamespace: true\n  containers:\n  - name: a\n    image: localhost/busybox:latest\n    imagePullPolicy: Never\n    command: [\"sleep\", \"1001\"]\n  - name: b\n    image: localhost/busybox:latest\n    imagePullPolicy: Never\n    command: [\"sh\", \"-c\", \"sleep 1; echo pid1=$(tr '\\\\0' ' ' < /proc/1/cmdline); echo peers=$(ps -o args | grep -c '^sleep 1001'); echo done; sleep 1000\"]\n",
    );
    let logs = logs_when_done(&d, "share", "b");
    assert!(
        field(&logs, "pid1").contains("podhost pause --ns-dir"),
        "{logs}"
    );
    assert_eq!(field(&logs, "peers"), "1", "b sees a's process: {logs}");
    let uid = d.pod("share").unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    let pause_pid_file = d.root.join(format!("pods/{uid}/ns/pause.pid"));
    let pause: i32 = std::fs::read_to_string(&pause_pid_file)
        .unwrap_or_else(|e| panic!("{}: {e}", pause_pid_file.display()))
        .trim()
        .parse()
        .unwrap();
    assert!(std::path::Path::new(&format!("/proc/{pause}")).exists());
    d.remove_manifest("share.yaml");
    d.wait_gone("share", 30);
    wait_until(Duration::from_secs(10), "the pause process is gone", || {
        (!std::path::Path::new(&format!("/proc/{pause}")).exists()).then_some(())
    })
    .expect("pause process stopped with the pod");
}

/// seccompProfile at pod and container level: RuntimeDefault by default, Unconfined on
/// request and for privileged containers, Localhost from `<root-dir>/seccomp/`; a missing
/// Localhost profile is a CreateContainerConfigError; `--seccomp-default=false` leaves
/// pods that name none Unconfined.
#[test]
fn seccomp_profiles() {
    assert!(require_root());
    let d = TestDaemon::start();
    let profiles = d.root.join("seccomp/profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    std::fs::write(
        profiles.join("no-mkdir.json"),
        r#"{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]}"#,
    )
    .unwrap();
    let probe = "echo seccomp=$(grep '^Seccomp:' /proc/self/status | cut -f2); if mkdir /tmp/d 2>/dev/null; then echo mkdir=ok; else echo mkdir=denied; fi; echo done; sleep 1000";
    let container = |name: &str, sc: &str| {
        format!(
            "  - name: {name}\n    image: localhost/busybox:latest\n    imagePullPolicy: Never\n    command: [\"sh\", \"-c\", {}]\n    securityContext: {sc}\n",
            serde_json::to_string(probe).unwrap()
        )
    };
    let mut y = String::from(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: sc\nspec:\n  terminationGracePeriodSeconds: 1\n  securityContext: {seccompProfile: {type: RuntimeDefault}}\n  containers:\n",
    );
    y.push_str(&container("default", "{}"));
    y.push_str(&container(
        "unconfined",
        "{seccompProfile: {type: Unconfined}}",
    ));
    y.push_str(&container("privileged", "{privileged: true}"));
    y.push_str(&container(
        "localhost",
        "{seccompProfile: {type: Localhost, localhostProfile: profiles/no-mkdir.json}}",
    ));
    d.write_manifest("sc.yaml", &y);
    let seen = |c: &str| {
        let l = logs_when_done(&d, "sc", c);
        (field(&l, "seccomp"), field(&l, "mkdir"))
    };
    assert_eq!(seen("default"), ("2".to_string(), "ok".to_string()));
    assert_eq!(seen("unconfined"), ("0".to_string(), "ok".to_string()));
    assert_eq!(seen("privileged"), ("0".to_string(), "ok".to_string()));
    assert_eq!(seen("localhost"), ("2".to_string(), "denied".to_string()));

    d.write_manifest(
        "missing.yaml",
        &busybox_pod(
            "missing",
            "  securityContext: {seccompProfile: {type: Localhost, localhostProfile: profiles/nope.json}}\n",
            "",
            "sleep 1000",
        ),
    );
    let w = d.wait_pod("missing", "CreateContainerConfigError", 30, |p| {
        let w = &container_status(p, "main")?["state"]["waiting"];
        (w["reason"] == "CreateContainerConfigError").then(|| w.clone())
    });
    assert!(w["message"].as_str().unwrap().contains("nope.json"), "{w}");

    let off = TestDaemon::start_with(&["--seccomp-default=false"]);
    off.write_manifest(
        "plain.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: plain\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n{}{}",
            container("none", "{}"),
            container("asked", "{seccompProfile: {type: RuntimeDefault}}")
        ),
    );
    let l = logs_when_done(&off, "plain", "none");
    assert_eq!(field(&l, "seccomp"), "0");
    let l = logs_when_done(&off, "plain", "asked");
    assert_eq!(field(&l, "seccomp"), "2");
}

/// A static pod as kubeadm writes it (etcd's manifest, with the busybox image in place of
/// etcd's): pod-level `seccompProfile: RuntimeDefault`, hostNetwork,
/// system-node-critical, probes and a hostPath volume (moved to a temp dir). It runs under
/// the filter, and none of its fields is reported as not honoured.
#[test]
fn a_kubeadm_style_static_pod_runs_confined() {
    assert!(require_root());
    let d = TestDaemon::start();
    let data = d.dir.path().join("etcd-data");
    d.write_manifest(
        "etcd.yaml",
        &r#"apiVersion: v1
kind: Pod
metadata:
  annotations:
    kubeadm.kubernetes.io/etcd.advertise-client-urls: https://10.0.0.10:2379
  creationTimestamp: null
  labels:
    component: etcd
    tier: control-plane
  name: etcd
  namespace: kube-system
spec:
  containers:
  - command:
    - sh
    - -c
    - echo seccomp=$(grep '^Seccomp:' /proc/self/status | cut -f2); echo done; sleep 1000
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    livenessProbe:
      failureThreshold: 8
      httpGet:
        host: 127.0.0.1
        path: /livez
        port: 2381
        scheme: HTTP
      initialDelaySeconds: 10
      periodSeconds: 10
      timeoutSeconds: 15
    name: etcd
    resources:
      requests:
        cpu: 100m
        memory: 100Mi
    volumeMounts:
    - mountPath: /var/lib/etcd
      name: etcd-data
  hostNetwork: true
  priority: 2000001000
  priorityClassName: system-node-critical
  securityContext:
    seccompProfile:
      type: RuntimeDefault
  volumes:
  - hostPath:
      path: /var/lib/etcd
      type: DirectoryOrCreate
    name: etcd-data
status: {}
"#
        .replace("path: /var/lib/etcd", &format!("path: {}", data.display())),
    );
    let logs = logs_when_done(&d, "etcd", "etcd");
    assert_eq!(field(&logs, "seccomp"), "2");
    let warned: Vec<String> = d
        .pod_events("etcd")
        .into_iter()
        .filter(|e| e["reason"] == "FieldNotHonoured")
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(
        !warned
            .iter()
            .any(|m| m.contains("livenessProbe") || m.contains("spec.volumes")),
        "probes and volumes are honoured: {warned:?}"
    );
    assert!(data.is_dir(), "the hostPath was made (DirectoryOrCreate)");
    assert!(
        !warned.iter().any(|m| m.contains("securityContext")),
        "securityContext is honoured: {warned:?}"
    );
}
