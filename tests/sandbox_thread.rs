//! A plain pod's sandbox is made on a thread of the daemon (no helper exec): the pod
//! gets its own ipc, uts and net namespaces, and none of the daemon's threads is left
//! in them.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;

fn ns_of(pid_or_task: &str, ns: &str) -> String {
    std::fs::read_link(format!("/proc/{pid_or_task}/ns/{ns}"))
        .unwrap()
        .display()
        .to_string()
}

#[test]
fn a_daemon_made_sandbox_is_the_pods_alone() {
    require_root();
    let d = TestDaemon::start();
    d.write_manifest(
        "a.yaml",
        &busybox_pod(
            "a",
            "  terminationGracePeriodSeconds: 1\n",
            "",
            "exec sleep 1000",
        ),
    );
    d.write_manifest(
        "b.yaml",
        &busybox_pod(
            "b",
            "  hostIPC: true\n  terminationGracePeriodSeconds: 1\n",
            "",
            "exec sleep 1000",
        ),
    );
    for name in ["a", "b"] {
        d.wait_pod(name, "Running", 30, |p| {
            (phase(p) == "Running").then_some(())
        });
    }
    let daemon = d.daemon_pid().unwrap().to_string();
    let tasks: Vec<String> = std::fs::read_dir(format!("/proc/{daemon}/task"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for ns in ["net", "uts", "ipc"] {
        let own = ns_of(&daemon, ns);
        for t in &tasks {
            let comm = std::fs::read_to_string(format!("/proc/{daemon}/task/{t}/comm"))
                .unwrap_or_default();
            assert_ne!(comm.trim(), "pod-sandbox", "the sandbox thread is gone");
            assert_eq!(
                ns_of(&format!("{daemon}/task/{t}"), ns),
                own,
                "daemon thread {t} ({}) stays in the daemon's {ns} namespace",
                comm.trim()
            );
        }
    }
    // The containers: their own net and uts; b shares the host's (daemon's) ipc.
    let exec = |pod: &str, cmd: &str| {
        let out = d.cli(&["exec", &d.full_name(pod), "--", "sh", "-c", cmd]);
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let container_ns = |pod: &str, ns: &str| exec(pod, &format!("readlink /proc/self/ns/{ns}"));
    for ns in ["net", "uts", "ipc"] {
        assert_ne!(
            container_ns("a", ns),
            ns_of(&daemon, ns),
            "a has its own {ns}"
        );
    }
    assert_eq!(container_ns("b", "ipc"), ns_of(&daemon, "ipc"), "hostIPC");
    assert_ne!(container_ns("b", "net"), container_ns("a", "net"));
    assert_eq!(exec("a", "hostname"), d.full_name("a"));
    assert!(
        exec("a", "ip -o link show lo").contains("UP"),
        "loopback is up"
    );
    for name in ["a", "b"] {
        d.remove_manifest(&format!("{name}.yaml"));
        d.wait_gone(name, 30);
    }
    assert!(
        !d.mounts().iter().any(|m| m.contains("/ns/")),
        "the namespace handles are released: {:?}",
        d.mounts()
    );
}
