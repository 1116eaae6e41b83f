//! Container log rotation and reading through the real daemon and shim: a container
//! floods its output with small limits; the files rotate by the writer, their count
//! never exceeds the limit, names are the kubelet's, no line is lost (sequence
//! numbers), `podhost logs` reads across rotated (and gzip) files, `--tail`,
//! `--limit-bytes` and `--previous` are right; and a full log disk (a small tmpfs)
//! drops lines with a `LogWriteFailed` event, never kills the container, and writing
//! resumes when space returns.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;

/// The one container log dir (`<logs>/<ns>_<pod>_<uid>/main`) of `pod`.
fn log_dir(d: &TestDaemon, pod: &str) -> PathBuf {
    let prefix = format!("default_{}_", d.full_name(pod));
    wait_until(Duration::from_secs(20), "log dir", || {
        std::fs::read_dir(&d.logs)
            .ok()?
            .flatten()
            .find(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .map(|e| e.path().join("main"))
            .filter(|p| p.join("0.log").exists())
    })
    .unwrap_or_else(|| panic!("no log dir for {pod}; daemon log:\n{}", d.daemon_log()))
}

/// File names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// `<restart>.log` or `<restart>.log.YYYYMMDD-HHMMSS[_NNN][.gz]` (the kubelet's names;
/// `.tmp` while a compression runs).
fn kubelet_name(name: &str) -> bool {
    let Some((restart, rest)) = name.split_once(".log") else {
        return false;
    };
    if restart.is_empty() || !restart.chars().all(|c| c.is_ascii_digit()) {
        return false;
    }
    if rest.is_empty() {
        return true;
    }
    let Some(rest) = rest.strip_prefix('.') else {
        return false;
    };
    let rest = rest.strip_suffix(".gz").unwrap_or(rest);
    let (stamp, seq) = rest.split_once('_').unwrap_or((rest, "000"));
    stamp.len() == 15
        && stamp.as_bytes()[8] == b'-'
        && stamp.chars().filter(char::is_ascii_digit).count() == 14
        && seq.len() == 3
        && seq.chars().all(|c| c.is_ascii_digit())
}

/// Numbers printed one per line.
fn numbers(text: &str) -> Vec<u64> {
    text.lines()
        .map(|l| {
            l.parse()
                .unwrap_or_else(|_| panic!("not a number line: {l:?}"))
        })
        .collect()
}

/// Compares two number lists, naming only the first difference (they are long).
fn same(got: &[u64], want: &[u64], what: &str) {
    if got != want {
        let at = got.iter().zip(want).position(|(a, b)| a != b);
        panic!(
            "{what}: {} numbers, want {}; first difference at {at:?}: got {:?}, want {:?}",
            got.len(),
            want.len(),
            at.map(|i| got[i]),
            at.map(|i| want[i])
        );
    }
}

/// Like [`logs`], but `None` while the API refuses (e.g. a new instance's file does not
/// exist yet), for waiting loops.
fn try_logs(d: &TestDaemon, pod: &str, extra: &[&str]) -> Option<String> {
    let full = d.full_name(pod);
    let mut args = vec!["logs", full.as_str()];
    args.extend_from_slice(extra);
    let out = d.cli(&args);
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn logs(d: &TestDaemon, pod: &str, extra: &[&str]) -> String {
    let full = d.full_name(pod);
    let mut args = vec!["logs", full.as_str()];
    args.extend_from_slice(extra);
    let out = d.cli(&args);
    assert!(
        out.status.success(),
        "podhost logs {extra:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn flood_rotates_within_max_files_with_kubelet_names_and_reads_back() {
    require_root();
    let d = TestDaemon::start_with(&[
        "--container-log-max-size",
        "64Ki",
        "--container-log-max-files",
        "3",
    ]);
    // ~1.3 MB of numbered lines as fast as busybox writes them, then idle.
    d.write_manifest(
        "flood.yaml",
        &busybox_pod("flood", "", "", "seq 1 200000; sleep 3600"),
    );
    let dir = log_dir(&d, "flood");
    let mut most = 0;
    let done = wait_until(Duration::from_secs(60), "flood written", || {
        let n = names(&dir);
        let counted: Vec<&String> = n.iter().filter(|f| !f.ends_with(".tmp")).collect();
        most = most.max(counted.len());
        assert!(counted.len() <= 3, "more than 3 files: {n:?}");
        for f in &n {
            assert!(kubelet_name(f.trim_end_matches(".tmp")), "bad name {f}");
        }
        let tail = try_logs(&d, "flood", &["--tail", "1"])?;
        (tail == "200000\n").then_some(())
    });
    assert!(
        done.is_some(),
        "flood did not finish; files {:?}",
        names(&dir)
    );
    assert_eq!(most, 3, "the log rotated up to the limit");
    // The older rotated file is gzip-compressed (by the shim's thread, shortly after).
    let final_names = wait_until(Duration::from_secs(10), "a .gz file", || {
        let n = names(&dir);
        n.iter().any(|f| f.ends_with(".gz")).then_some(n)
    })
    .unwrap_or_default();
    assert!(
        final_names.iter().any(|f| f.ends_with(".gz")),
        "{final_names:?}"
    );
    for f in &final_names {
        let len = std::fs::metadata(dir.join(f)).unwrap().len();
        assert!(len <= 64 * 1024, "{f} is {len} bytes, over 64Ki");
    }
    // Across the kept files: a contiguous run of numbers ending at the last one.
    let all = numbers(&logs(&d, "flood", &[]));
    let first = all[0];
    assert!(first > 1, "the oldest lines went with the oldest files");
    same(&all, &(first..=200_000).collect::<Vec<_>>(), "no gap");
    assert_eq!(
        logs(&d, "flood", &["--tail", "5"]),
        "199996\n199997\n199998\n199999\n200000\n"
    );
    // A tail that needs all three files (the oldest one gzip).
    let n = all.len() - 10;
    let span = numbers(&logs(&d, "flood", &["--tail", &n.to_string()]));
    same(&span, &all[10..], "tail across the files");
}

#[test]
fn no_line_is_lost_across_many_rotations_and_previous_reads_the_last_instance() {
    require_root();
    let d = TestDaemon::start_with(&[
        "--container-log-max-size",
        "16Ki",
        "--container-log-max-files",
        "1000",
    ]);
    // A flood on stdout, then stderr; once it is written the container is killed, and
    // the second instance (restartPolicy Always) floods again, so the first one is
    // --previous.
    d.write_manifest(
        "seq.yaml",
        &busybox_pod("seq", "", "", "seq 1 60000; seq 1 100 >&2; sleep 3600"),
    );
    let dir = log_dir(&d, "seq");
    wait_until(Duration::from_secs(60), "first flood", || {
        try_logs(&d, "seq", &["--tail", "1"])?
            .eq("100\n")
            .then_some(())
    })
    .expect("the first instance's output");
    kill_first_instance(&d);
    d.wait_pod("seq", "restarted once", 60, |p| {
        let cs = container_status(p, "main")?;
        (cs["restartCount"] == 1 && cs["state"]["running"].is_object()).then_some(())
    });
    let prev = logs(&d, "seq", &["--previous"]);
    let mut want: Vec<u64> = (1..=60_000).collect();
    want.extend(1..=100);
    assert_eq!(
        numbers(&prev),
        want,
        "every line of the first instance, in order"
    );
    let rotated0 = names(&dir)
        .into_iter()
        .filter(|n| n.starts_with("0.log."))
        .count();
    assert!(
        rotated0 > 20,
        "the first instance's log rotated ({rotated0} files)"
    );
    let bad: Vec<String> = names(&dir)
        .into_iter()
        .filter(|n| !kubelet_name(n.trim_end_matches(".tmp")))
        .collect();
    assert!(bad.is_empty(), "not the kubelet's names: {bad:?}");
    let tail = logs(&d, "seq", &["--previous", "--tail", "30000"]);
    let mut want_tail: Vec<u64> = (30_101..=60_000).collect();
    want_tail.extend(1..=100);
    same(&numbers(&tail), &want_tail, "--previous --tail 30000");
    let limited = logs(&d, "seq", &["--previous", "--limit-bytes", "12"]);
    assert_eq!(limited, "1\n2\n3\n4\n5\n6\n");
    // The current instance: its own file set (1.log…), read in full.
    let current = wait_until(Duration::from_secs(30), "second flood", || {
        let t = try_logs(&d, "seq", &[])?;
        t.ends_with("99\n100\n").then_some(t)
    })
    .expect("second instance's output");
    same(&numbers(&current), &want, "the current instance");
    let recent = logs(&d, "seq", &["--since", "1h", "--tail", "2"]);
    assert_eq!(recent, "99\n100\n");
    assert_eq!(
        logs(&d, "seq", &["--since-time", "2999-01-01T00:00:00Z"]),
        ""
    );
}

/// SIGKILLs the init process of the pod's first container instance.
fn kill_first_instance(d: &TestDaemon) {
    let pods = d.root.join("pods");
    let started = std::fs::read_dir(&pods)
        .unwrap()
        .flatten()
        .map(|e| e.path().join("containers/main/0/started.json"))
        .find(|p| p.exists())
        .expect("started.json of instance 0");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(started).unwrap()).unwrap();
    let pid = i32::try_from(v["init_pid"].as_i64().unwrap()).unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
}

/// A tmpfs mounted over the daemon's log dir (unmounted by the daemon's clean-up).
fn mount_small_tmpfs(dir: &Path, size: &str) {
    nix::mount::mount(
        Some("tmpfs"),
        dir,
        Some("tmpfs"),
        nix::mount::MsFlags::empty(),
        Some(format!("size={size},mode=0755").as_str()),
    )
    .expect("mount tmpfs on the log dir");
}

/// Fills the filesystem of `dir` with one file until it is full.
fn fill(dir: &Path) -> PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let block = vec![0u8; 4096];
    while f.write_all(&block).is_ok() {}
    path
}

#[test]
fn full_log_disk_drops_lines_with_an_event_and_resumes() {
    require_root();
    let d = TestDaemon::start_with(&[
        "--container-log-max-size",
        "64Ki",
        "--container-log-max-files",
        "2",
    ]);
    mount_small_tmpfs(&d.logs, "1m");
    d.write_manifest(
        "chatty.yaml",
        &busybox_pod(
            "chatty",
            "",
            "",
            "i=0; while true; do i=$((i+1)); echo line-$i; usleep 20000; done",
        ),
    );
    let dir = log_dir(&d, "chatty");
    wait_until(Duration::from_secs(20), "first lines", || {
        try_logs(&d, "chatty", &["--tail", "1"])?
            .starts_with("line-")
            .then_some(())
    })
    .expect("the container logs");
    let filler = fill(&d.logs);
    let failed = wait_until(Duration::from_secs(20), "LogWriteFailed", || {
        d.pod_events("chatty")
            .into_iter()
            .find(|e| e["reason"] == "LogWriteFailed")
    })
    .unwrap_or_else(|| panic!("no LogWriteFailed event; daemon log:\n{}", d.daemon_log()));
    let msg = failed["message"].as_str().unwrap();
    assert!(msg.contains("No space left on device"), "{msg}");
    assert!(msg.contains("0.log"), "{msg}");
    // Lines are being dropped now; the container lives on.
    std::thread::sleep(Duration::from_millis(500));
    let pod = d.pod("chatty").unwrap();
    let cs = container_status(&pod, "main").unwrap();
    assert!(cs["state"]["running"].is_object(), "{cs}");
    assert_eq!(cs["restartCount"], 0);
    let before_free = logs(&d, "chatty", &["--tail", "1"]);
    std::fs::remove_file(&filler).unwrap();
    let resumed = wait_until(Duration::from_secs(20), "LogWriteResumed", || {
        d.pod_events("chatty")
            .into_iter()
            .find(|e| e["reason"] == "LogWriteResumed")
    })
    .unwrap_or_else(|| panic!("no LogWriteResumed event; daemon log:\n{}", d.daemon_log()));
    assert!(
        resumed["message"].as_str().unwrap().contains("lines"),
        "{resumed}"
    );
    let after = wait_until(Duration::from_secs(10), "new lines", || {
        let t = try_logs(&d, "chatty", &["--tail", "1"])?;
        (t != before_free).then_some(t)
    })
    .expect("writing resumed");
    let n = |s: &str| -> u64 { s.trim().trim_start_matches("line-").parse().unwrap() };
    assert!(
        n(&after) > n(&before_free) + 1,
        "{before_free} then {after}"
    );
    // Every line in the files is whole, and a gap shows the dropped ones.
    let text = logs(&d, "chatty", &[]);
    let seq: Vec<u64> = text.lines().map(n).collect();
    assert!(seq.windows(2).all(|w| w[0] < w[1]), "in order");
    assert!(
        seq.windows(2).any(|w| w[1] > w[0] + 1),
        "the dropped lines leave a gap"
    );
    for f in names(&dir) {
        let data = std::fs::read(dir.join(&f)).unwrap_or_default();
        if !f.ends_with(".gz") {
            assert!(
                data.is_empty() || data.ends_with(b"\n"),
                "{f} ends mid-line"
            );
        }
    }
}
