//! The daemon under a service manager's notify protocol (`Type=notify`): the test plays
//! systemd with a unix datagram socket in `NOTIFY_SOCKET` and a `WATCHDOG_USEC`, and
//! reads READY=1 (after the first sync), STATUS, WATCHDOG=1, RELOADING=1 on SIGHUP and
//! STOPPING=1 on SIGTERM — after which the pod's container keeps running.
//!
//! This host does not run systemd as PID 1, so no test here runs under real systemd.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

use common::*;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

struct FakeSystemd {
    socket: UnixDatagram,
    seen: Vec<String>,
}

impl FakeSystemd {
    /// Reads messages until one satisfies `want`; fails the test after `limit`.
    fn wait_for(&mut self, what: &str, limit: Duration, want: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        let mut buf = vec![0u8; 4096];
        while start.elapsed() < limit {
            self.socket
                .set_read_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            let Ok(n) = self.socket.recv(&mut buf) else {
                continue;
            };
            let message = String::from_utf8_lossy(&buf[..n]).into_owned();
            self.seen.push(message.clone());
            if want(&message) {
                return message;
            }
        }
        panic!("no {what} within {limit:?}; messages: {:?}", self.seen);
    }
}

#[test]
fn ready_status_watchdog_reloading_and_stopping_reach_the_notify_socket() {
    assert!(require_root());
    let mut d = TestDaemon::prepare_with(&[]);
    let marker = format!("while :; do sleep 1; done; echo notify-{}", d.node);
    d.write_manifest("app.yaml", &busybox_pod("app", "", "", &marker));
    let socket_path = d.dir.path().join("notify.sock");
    let mut systemd = FakeSystemd {
        socket: UnixDatagram::bind(&socket_path).unwrap(),
        seen: Vec::new(),
    };
    d.spawn_daemon_with_env(&[
        ("NOTIFY_SOCKET", socket_path.to_str().unwrap()),
        ("WATCHDOG_USEC", "400000"),
    ]);
    let ready = systemd.wait_for("READY=1", Duration::from_secs(30), |m| {
        m.lines().any(|l| l == "READY=1")
    });
    assert!(ready.contains("\nSTATUS="), "{ready}");
    // READY=1 comes after the first sync: the manifest's pod is known by then.
    assert!(d.pod("app").is_some(), "READY=1 before the pod was seen");

    d.wait_pod("app", "app Running", 60, |p| {
        (phase(p) == "Running").then_some(())
    });
    let petted = systemd.wait_for(
        "WATCHDOG=1 with 1 pod running",
        Duration::from_secs(30),
        |m| m.starts_with("WATCHDOG=1\n") && m.contains("STATUS=1 pods running"),
    );
    assert!(petted.contains("(1 known)"), "{petted}");

    let pid = Pid::from_raw(i32::try_from(d.daemon_pid().unwrap()).unwrap());
    kill(pid, Signal::SIGHUP).unwrap();
    let reloading = systemd.wait_for("RELOADING=1", Duration::from_secs(10), |m| {
        m.starts_with("RELOADING=1\nMONOTONIC_USEC=")
    });
    let usec: u64 = reloading.rsplit('=').next().unwrap().parse().unwrap();
    assert!(usec > 0, "{reloading}");
    systemd.wait_for("READY=1 after the reload", Duration::from_secs(10), |m| {
        m == "READY=1"
    });
    assert!(d.daemon_pid().is_some());
    assert!(
        d.cli(&["get", "pods"]).status.success(),
        "SIGHUP must not stop the daemon"
    );

    let container_pids = TestDaemon::pids_with(&marker);
    assert!(
        !container_pids.is_empty(),
        "the container's process is not found"
    );
    let uid = uid_of(&d, "app");
    kill(pid, Signal::SIGTERM).unwrap();
    systemd.wait_for("STOPPING=1", Duration::from_secs(10), |m| m == "STOPPING=1");
    let status = d.wait_daemon_exit(Duration::from_secs(20));
    assert!(status.success(), "{status:?}");
    // Text log lines for journald: no colour escapes when stderr is not a terminal.
    let log = d.daemon_log();
    assert!(
        log.contains("podhost daemon started") && !log.contains('\u{1b}'),
        "{log}"
    );
    for p in &container_pids {
        assert!(
            Path::new(&format!("/proc/{p}")).exists(),
            "SIGTERM must leave containers running; {p} is gone"
        );
    }
    // Nor is the pod marked as being deleted: its record on disk has no
    // deletionTimestamp, and the next daemon shows it Running, not Terminating.
    let record = std::fs::read_to_string(d.root.join(format!("pods/{uid}/status.json"))).unwrap();
    assert!(!record.contains("deletionTimestamp"), "{record}");
    d.spawn_daemon();
    let pod = d.wait_pod("app", "app adopted and Running", 30, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    assert!(pod["metadata"]["deletionTimestamp"].is_null(), "{pod}");
    let table = String::from_utf8_lossy(&d.cli(&["get", "pods"]).stdout).into_owned();
    assert!(
        table
            .lines()
            .any(|l| l.starts_with(&d.full_name("app")) && l.contains(" Running ")),
        "{table}"
    );
    assert_eq!(
        TestDaemon::pids_with(&marker),
        container_pids,
        "adopted, not restarted"
    );
    // Its command ignores SIGTERM: it goes after the 30 s grace period.
    d.remove_manifest("app.yaml");
    d.wait_gone("app", 60);
}

fn uid_of(d: &TestDaemon, name: &str) -> String {
    let pod = d.pod(name).unwrap_or_else(|| panic!("no pod {name}"));
    pod["metadata"]["uid"].as_str().unwrap().to_string()
}

use std::path::Path;

/// The watchdog follows the pod manager's loop, not a timer: once the loop stops
/// answering (wedged on purpose by a debug-build hook), WATCHDOG=1 stops and STATUS
/// says why, so systemd would restart the daemon.
#[test]
fn a_wedged_pod_manager_stops_the_watchdog() {
    assert!(require_root());
    let mut d = TestDaemon::prepare_with(&[]);
    let socket_path = d.dir.path().join("notify.sock");
    let mut systemd = FakeSystemd {
        socket: UnixDatagram::bind(&socket_path).unwrap(),
        seen: Vec::new(),
    };
    d.spawn_daemon_with_env(&[
        ("NOTIFY_SOCKET", socket_path.to_str().unwrap()),
        ("WATCHDOG_USEC", "400000"),
        ("PODHOST_TEST_STALL_MANAGER", "3"),
    ]);
    systemd.wait_for("READY=1", Duration::from_secs(30), |m| {
        m.starts_with("READY=1")
    });
    systemd.wait_for("the stall reported", Duration::from_secs(30), |m| {
        m == "STATUS=the pod manager is not answering"
    });
    let pets = systemd
        .seen
        .iter()
        .filter(|m| m.starts_with("WATCHDOG=1"))
        .count();
    assert!(pets <= 2, "pets before the stall: {:?}", systemd.seen);
    // From now on nothing pets the watchdog, and STATUS keeps coming for more stalled
    // ticks than the ping queue holds.
    let until = systemd.seen.len();
    for _ in 0..6 {
        systemd.wait_for("another stalled tick", Duration::from_secs(30), |m| {
            m == "STATUS=the pod manager is not answering"
        });
    }
    assert!(
        systemd.seen[until..]
            .iter()
            .all(|m| !m.starts_with("WATCHDOG=1")),
        "{:?}",
        systemd.seen
    );
}
