//! Hostile containers against the files root resolves or reads below what a container
//! can write: a subPath source swapped for a symlink to a host dir while the container
//! that mounts it restarts, the pod's DNS files grown large and attacked while the
//! daemon restarts and the pod is edited, and the termination-message file filled and
//! attacked. Containers run as root (the default). A host sentinel (modes, owners,
//! contents and entries of a directory no container sees) must come out unchanged, the
//! daemon's memory bounded, and each test prints how many swaps its container raced.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::common_hostile;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

use common::*;
use common_hostile::*;

/// What the DNS attacker writes into each of /etc/hosts and /etc/resolv.conf.
const DNS_FILL_MIB: u64 = 64;
/// How much more than a fresh daemon's peak resident memory the daemon may reach while
/// it compares those files: half of one file, which a daemon reading one whole exceeds.
const MAX_DNS_PEAK_GROWTH_KIB: u64 = DNS_FILL_MIB * 1024 / 2;
/// The kubelet's `MaxContainerTerminationMessageLength`.
const MAX_TERMINATION_MESSAGE: usize = 4096;

/// Restarts the daemon (SIGKILL, as a crash or an upgrade would) and waits for its API;
/// returns the peak RSS of the daemon it killed.
fn restart(d: &mut TestDaemon) -> u64 {
    let peak = peak_rss_kib(d.daemon_pid().unwrap());
    d.kill9();
    d.spawn_daemon();
    peak
}

fn swapper_pod(name: &str, spec: &str) -> String {
    format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n{spec}")
}

/// Every message logged so far by any instance of `container` (its log files, by
/// path): kept by the caller across polls, since old instances' logs are collected.
fn collect_logs(d: &TestDaemon, container: &str, into: &mut BTreeMap<PathBuf, Vec<String>>) {
    for pod_dir in std::fs::read_dir(&d.logs).into_iter().flatten().flatten() {
        let dir = pod_dir.path().join(container);
        for log in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let lines: Vec<String> = log_lines(&log.path())
                .into_iter()
                .map(|(_, _, m)| m)
                .collect();
            let known = into.entry(log.path()).or_default();
            if lines.len() > known.len() {
                *known = lines;
            }
        }
    }
}

fn waiting_of(pod: &Value, container: &str) -> Option<(String, String)> {
    let w = &container_status(pod, container)?["state"]["waiting"];
    Some((
        w["reason"].as_str()?.to_string(),
        w["message"].as_str().unwrap_or_default().to_string(),
    ))
}

#[test]
fn sub_path_source_swapped_for_a_host_link_is_never_mounted() {
    assert!(require_root());
    let sentinel = Sentinel::new();
    let mut d = TestDaemon::start();
    load_swapper(&d);
    // The victim restarts every few seconds (restartPolicy Always, short back-off), so
    // that its subPath is resolved again at each start, against the swapping attacker.
    let pod = swapper_pod(
        "subp",
        &format!(
            "  volumes:\n  - name: data\n    emptyDir: {{}}\n  containers:\n  - name: attacker\n    image: {IMAGE}\n    imagePullPolicy: Never\n    command: [swapper, subpath, /data, {host}]\n    volumeMounts:\n    - {{name: data, mountPath: /data}}\n  - name: victim\n    image: {IMAGE}\n    imagePullPolicy: Never\n    command: [sh, -c, 'echo listing; ls /x; echo listed; sleep 1; exit 1']\n    volumeMounts:\n    - {{name: data, mountPath: /x, subPath: sub}}\n",
            host = sentinel.host_dir()
        ),
    );
    d.write_manifest("subp.yaml", &pod);
    d.wait_pod("subp", "the attacker swapping", 60, |p| {
        (container_status(p, "attacker")?["state"]["running"].is_object()
            && d.logs_of("subp", "attacker").contains("ready"))
        .then_some(())
    });
    let mut logs = BTreeMap::new();
    let mut refusals = BTreeSet::new();
    let mut events = BTreeSet::new();
    let mut peak = 0;
    let restarts = 3;
    let start = Instant::now();
    let mut next_restart = Duration::from_secs(20);
    let mut polls = 0u64;
    while start.elapsed() < Duration::from_secs(80) {
        polls += 1;
        if let Some(p) = d.pod("subp")
            && let Some((reason, message)) = waiting_of(&p, "victim")
            && reason == "CreateContainerConfigError"
        {
            refusals.insert(message);
        }
        collect_logs(&d, "victim", &mut logs);
        if polls.is_multiple_of(8) {
            for e in d.pod_events("subp") {
                if e["reason"] == "Failed" {
                    events.insert(e["message"].as_str().unwrap_or_default().to_string());
                }
            }
        }
        if start.elapsed() > next_restart && next_restart < Duration::from_secs(20 * restarts) {
            peak = peak.max(restart(&mut d));
            next_restart += Duration::from_secs(20);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    collect_logs(&d, "victim", &mut logs);
    let (swaps, refused) = tally(&d.logs_of("subp", "attacker"));
    let listings: Vec<&Vec<String>> = logs
        .values()
        .filter(|l| l.iter().any(|m| m == "listed"))
        .collect();
    println!(
        "subPath: {restarts} daemon restarts; the attacker raced {swaps} swaps ({refused} refused); the victim listed /x {} times, its start was refused {} distinct ways, {} Failed events",
        listings.len(),
        refusals.len(),
        events.len()
    );
    sentinel.assert_unchanged(&d);
    assert!(
        swaps > 0,
        "the attacker never swapped: the test proves nothing"
    );
    // Never the host dir's entries: the bind is of the object opened beneath the volume.
    for (path, lines) in &logs {
        assert!(
            !lines
                .iter()
                .any(|m| m.contains("secret") || m.contains("inner")),
            "the victim saw the host dir at its subPath ({}): {lines:?}",
            path.display()
        );
    }
    // The victim did run with the real dir (its file `ok`), and was refused when the
    // source was the link: both outcomes happened, each as it must.
    assert!(
        listings
            .iter()
            .any(|l| l.iter().any(|m| m.split_whitespace().any(|w| w == "ok"))),
        "the victim never listed the subPath's own file: {logs:#?}"
    );
    assert!(
        refusals
            .iter()
            .chain(&events)
            .any(|m| m.contains("subPath \"sub\" of volume \"data\"")
                && m.contains("resolves outside the volume")),
        "no clear refusal of the swapped subPath: waiting {refusals:#?}, events {events:#?}"
    );
    // Any other refusal (a race the kernel reported) still names the subPath.
    for m in &refusals {
        assert!(
            m.contains("subPath \"sub\"") || m.contains("/sub"),
            "a refusal that does not name the subPath: {m}"
        );
    }
    peak = peak.max(peak_rss_kib(d.daemon_pid().unwrap()));
    assert!(peak < MAX_DAEMON_PEAK_RSS_KIB, "daemon peak RSS {peak} KiB");
}

fn dns_pod(host: &str, alias: u32) -> String {
    swapper_pod(
        "dns",
        &format!(
            "  hostAliases:\n  - ip: 10.9.9.{alias}\n    hostnames: [alias-{alias}]\n  containers:\n  - name: attacker\n    image: {IMAGE}\n    imagePullPolicy: Never\n    command: [sh, -c, 'grep alias- /etc/hosts; exec swapper fill /etc {host} {DNS_FILL_MIB} hosts resolv.conf']\n"
        ),
    )
}

/// The size of the pod dir's file `name` (the daemon's copy, bind-mounted into the
/// container).
fn pod_file_len(d: &TestDaemon, uid: &str, name: &str) -> u64 {
    std::fs::symlink_metadata(d.root.join("pods").join(uid).join(name))
        .map(|m| m.len())
        .unwrap_or(u64::MAX)
}

#[test]
fn dns_files_grown_and_replaced_cost_the_daemon_nothing() {
    assert!(require_root());
    let sentinel = Sentinel::new();
    let mut d = TestDaemon::start();
    // Each pod instance fills two files of the daemon's root dir: room for a few.
    let free = nix::sys::statvfs::statvfs(&d.root).unwrap();
    let free_mib = free.blocks_available() * free.fragment_size() / (1 << 20);
    assert!(
        free_mib > 8 * DNS_FILL_MIB,
        "{} has {free_mib} MiB free; the test needs {} MiB",
        d.root.display(),
        8 * DNS_FILL_MIB
    );
    load_swapper(&d);
    // A fresh daemon's peak, the measure for the ones that compare grown files (the
    // first daemon's counts the image load).
    restart(&mut d);
    std::thread::sleep(Duration::from_secs(3));
    let baseline = peak_rss_kib(d.daemon_pid().unwrap());
    let mut peaks = Vec::new();
    let mut raced = (0, 0);
    let edits = 3;
    for alias in 0..=edits {
        // An edit of hostAliases (a new pod, as every manifest edit): its container must
        // see the new alias in its /etc/hosts.
        d.write_manifest("dns.yaml", &dns_pod(sentinel.host_dir(), alias));
        let want = format!("alias-{alias}");
        let uid = d.wait_pod("dns", "the edited pod's attacker filling", 90, |p| {
            let edited = p["spec"]["hostAliases"][0]["hostnames"][0] == want.as_str();
            let logs = d.logs_of("dns", "attacker");
            (edited
                && container_status(p, "attacker")?["state"]["running"].is_object()
                && logs.contains(&want)
                && logs.contains("ready filled=2"))
            .then(|| p["metadata"]["uid"].as_str().unwrap().to_string())
        });
        let logs = d.logs_of("dns", "attacker");
        assert!(
            logs.lines()
                .any(|l| l.starts_with(&format!("10.9.9.{alias}")) && l.contains(&want)),
            "the container does not see the edited hostAliases in /etc/hosts: {logs}"
        );
        for name in ["etc-hosts", "resolv.conf"] {
            assert!(
                pod_file_len(&d, &uid, name) >= DNS_FILL_MIB << 20,
                "the container's write did not reach the pod's {name}"
            );
        }
        // The restarted daemon sets the sandbox up again and compares the files with
        // what it writes: they differ (the container grew them), so it replaces them.
        std::thread::sleep(Duration::from_secs(2));
        peaks.push(restart(&mut d));
        wait_until(Duration::from_secs(60), "the DNS files rewritten", || {
            (pod_file_len(&d, &uid, "etc-hosts") < 4096
                && pod_file_len(&d, &uid, "resolv.conf") < 4096)
                .then_some(())
        })
        .unwrap_or_else(|| {
            panic!(
                "the restarted daemon never rewrote the grown DNS files; daemon log:\n{}",
                d.daemon_log()
            )
        });
        let hosts =
            std::fs::read_to_string(d.root.join("pods").join(&uid).join("etc-hosts")).unwrap();
        assert!(hosts.contains(&want), "rewritten etc-hosts: {hosts}");
        std::thread::sleep(Duration::from_secs(1));
        peaks.push(peak_rss_kib(d.daemon_pid().unwrap()));
        let (swaps, refused) = tally(&d.logs_of("dns", "attacker"));
        raced = (raced.0 + swaps, raced.1 + refused);
    }
    println!(
        "DNS files: {edits} hostAliases edits, {} daemon restarts over files of {DNS_FILL_MIB} MiB; the containers raced {} replacements ({} refused by the kernel); daemon peaks {peaks:?} KiB (fresh: {baseline} KiB)",
        edits + 1,
        raced.0,
        raced.1
    );
    sentinel.assert_unchanged(&d);
    assert!(
        raced.1 > 0,
        "the attacker never tried: the test proves nothing"
    );
    assert_eq!(
        raced.0, 0,
        "a container replaced its bind-mounted DNS file (not a bind of the pod's file?)"
    );
    let peak = peaks.iter().copied().max().unwrap();
    assert!(
        peak < baseline + MAX_DNS_PEAK_GROWTH_KIB,
        "daemon peak RSS {peak} KiB (a fresh one's: {baseline} KiB) while comparing {DNS_FILL_MIB} MiB DNS files; daemon log:\n{}",
        d.daemon_log()
    );
}

#[test]
fn a_huge_termination_message_is_capped() {
    assert!(require_root());
    let d = TestDaemon::start();
    d.write_manifest(
        "msg.yaml",
        &busybox_pod(
            "msg",
            "  restartPolicy: Never\n",
            "",
            "head -c 1048576 /dev/zero | tr '\\0' x > /dev/termination-log; exit 1",
        ),
    );
    let term = d.wait_pod("msg", "the container terminated", 60, |p| {
        let t = &container_status(p, "main")?["state"]["terminated"];
        t.is_object().then(|| t.clone())
    });
    assert_eq!(term["exitCode"], 1, "{term}");
    let message = term["message"].as_str().unwrap_or_default();
    assert_eq!(
        message.len(),
        MAX_TERMINATION_MESSAGE,
        "the message is the file's first 4096 bytes"
    );
    assert!(message.bytes().all(|b| b == b'x'), "{message:.80}");
    let peak = peak_rss_kib(d.daemon_pid().unwrap());
    println!(
        "termination message: 1 MiB written, {} bytes kept; daemon peak {peak} KiB",
        message.len()
    );
    assert!(peak < MAX_DAEMON_PEAK_RSS_KIB, "daemon peak RSS {peak} KiB");
}

#[test]
fn a_termination_log_replaced_by_a_fifo_or_link_never_blocks_the_daemon() {
    assert!(require_root());
    let sentinel = Sentinel::new();
    let d = TestDaemon::start();
    load_swapper(&d);
    let attempts = 2000;
    d.write_manifest(
        "tlog.yaml",
        &swapper_pod(
            "tlog",
            &format!(
                "  restartPolicy: Never\n  containers:\n  - name: attacker\n    image: {IMAGE}\n    imagePullPolicy: Never\n    command: [swapper, termlog, /dev/termination-log, {host}, '{attempts}']\n",
                host = sentinel.host_dir()
            ),
        ),
    );
    let (term, seen_at) = d.wait_pod("tlog", "the attacker's exit in the status", 60, |p| {
        let t = &container_status(p, "attacker")?["state"]["terminated"];
        t.is_object().then(|| (t.clone(), chrono::Utc::now()))
    });
    let finished = ts(&term["finishedAt"]);
    let lag = (seen_at - finished).to_std().unwrap_or_default();
    let (swaps, refused) = tally(&d.logs_of("tlog", "attacker"));
    println!(
        "termination log: {swaps} replacements took effect, {refused} refused; the exit shown {lag:?} after it happened"
    );
    sentinel.assert_unchanged(&d);
    assert_eq!(term["exitCode"], 1, "{term}");
    assert!(
        refused > 0,
        "the attacker never tried: the test proves nothing"
    );
    assert_eq!(swaps, 0, "the container replaced its termination-log bind");
    assert_eq!(term["message"], "attacked", "{term}");
    assert!(
        lag < Duration::from_secs(10),
        "the exit reached the status {lag:?} late; daemon log:\n{}",
        d.daemon_log()
    );
    // The daemon still answers (a read blocked on a fifo would hold its worker).
    assert!(d.pod("tlog").is_some());
}
