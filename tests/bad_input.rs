//! The bad-input corpus: manifests, images and API requests that real users send by
//! mistake (or on purpose). Each must get a clear answer that names the file, blob or
//! field, and none may disturb anything else: a healthy pod started before keeps
//! running (same container, same process, no restart), the daemon stays up within a
//! sane memory footprint, and its state on disk stays consistent.
//!
//! Fixtures are generated here; nothing big is committed. Network input (bad_input/
//! network.rs): the read-only port probed with only `--address`, a zlib bomb in a SPDY
//! header block on the kubelet API.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod common_spdy;

#[path = "bad_input/api.rs"]
mod api;
#[path = "bad_input/images.rs"]
mod images;
#[path = "bad_input/manifests.rs"]
mod manifests;
#[path = "bad_input/network.rs"]
mod network;

use std::path::Path;

use common::*;
use serde_json::Value;

/// The daemon's peak resident memory above which a bad input counts as a blow-up.
const MAX_DAEMON_PEAK_RSS_KIB: u64 = 256 * 1024;

/// One corpus entry's outcome, for the summary printed at the end of each test.
pub struct Outcome {
    pub kind: &'static str,
    pub message: String,
}

/// What a healthy pod looked like before the corpus was thrown at the daemon.
pub struct Healthy {
    uid: String,
    container_id: String,
    started_at: Value,
    init_pid: i32,
}

pub const HEALTHY_FILE: &str = "00-healthy.yaml";

impl Healthy {
    /// Starts the healthy pod and records its container.
    pub fn start(d: &TestDaemon) -> Self {
        d.write_manifest(
            HEALTHY_FILE,
            &busybox_pod("healthy", "", "", "while true; do sleep 1; done"),
        );
        let pod = d.wait_pod("healthy", "healthy pod Running", 30, |p| {
            let cs = container_status(p, "main")?;
            cs["state"]["running"].is_object().then(|| p.clone())
        });
        let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
        let cs = container_status(&pod, "main").unwrap();
        let started: Value = serde_json::from_slice(
            &std::fs::read(
                d.root
                    .join(format!("pods/{uid}/containers/main/0/started.json")),
            )
            .unwrap(),
        )
        .unwrap();
        Self {
            container_id: cs["containerID"].as_str().unwrap().to_string(),
            started_at: cs["state"]["running"]["startedAt"].clone(),
            init_pid: i32::try_from(started["init_pid"].as_i64().unwrap()).unwrap(),
            uid,
        }
    }

    /// Fails unless the healthy pod, the daemon and its state are as they were, with
    /// exactly `images` (sorted) in the store.
    pub fn assert_undisturbed(&self, d: &TestDaemon, images: &[&str]) {
        let pods = d.pods();
        let names: Vec<&str> = pods
            .iter()
            .map(|p| p["metadata"]["name"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(names, [d.full_name("healthy")], "only the healthy pod runs");
        let pod = &pods[0];
        assert_eq!(pod["metadata"]["uid"], self.uid.as_str());
        assert_eq!(phase(pod), "Running");
        let cs = container_status(pod, "main").unwrap();
        assert_eq!(
            cs["containerID"],
            self.container_id.as_str(),
            "same container"
        );
        assert_eq!(cs["restartCount"], 0, "no restart");
        assert_eq!(cs["state"]["running"]["startedAt"], self.started_at);
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.init_pid), None).unwrap_or_else(
            |e| {
                panic!(
                    "the healthy container's init {} is gone: {e}",
                    self.init_pid
                )
            },
        );
        // On disk: one pod dir (the healthy one), no temp file left anywhere.
        let pod_dirs: Vec<String> = std::fs::read_dir(d.root.join("pods"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            pod_dirs,
            std::slice::from_ref(&self.uid),
            "pod dirs on disk"
        );
        let temps = temp_files(&d.root);
        assert!(temps.is_empty(), "temp files left: {temps:?}");
        // The image store lists exactly the expected images and reads back.
        let out = d.cli(&["images"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let listing = String::from_utf8_lossy(&out.stdout);
        let mut refs: Vec<String> = listing
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().next().map(String::from))
            .collect();
        refs.sort();
        assert_eq!(refs, images, "images in the store:\n{listing}");
        let pid = d.daemon_pid().expect("daemon started");
        let peak = peak_rss_kib(pid as i32);
        eprintln!("daemon peak RSS: {} MiB", peak / 1024);
        assert!(
            peak < MAX_DAEMON_PEAK_RSS_KIB,
            "the daemon's peak RSS is {peak} KiB: some input blew up its memory"
        );
    }
}

/// The daemon's VmHWM (peak resident set) in KiB; fails if the daemon is gone.
pub fn peak_rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("the daemon (pid {pid}) is gone: {e}"));
    assert!(
        !status.contains("State:\tZ"),
        "the daemon (pid {pid}) died:\n{status}"
    );
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/PID/status")
}

/// Files whose names say they were being written (temp names) under `dir`, except in
/// containers' own upper dirs, where the workload writes what it likes.
fn temp_files(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let path = e.path();
        let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
        if name.contains(".tmp") || name.starts_with(".tmp") {
            found.push(path.display().to_string());
        }
        // A snapshot's (or a container's) files are the image's, not podhost's: look
        // at the snapshots' own names only.
        let inside_snapshots = dir.file_name().is_some_and(|n| n == "snapshots");
        if is_dir && !inside_snapshots && !matches!(name.as_str(), "upper" | "work" | "rootfs") {
            found.extend(temp_files(&path));
        }
    }
    found
}

/// Prints what each kind got, so the corpus reads as a table in the test log.
pub fn print_outcomes(what: &str, outcomes: &[Outcome]) {
    eprintln!("{what}: {} kinds", outcomes.len());
    for o in outcomes {
        eprintln!("  {:<28} {}", o.kind, o.message);
    }
}
