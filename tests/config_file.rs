//! `podhost daemon --config FILE`: a KubeletConfiguration's fields seen in behaviour
//! (container log rotation), a command-line flag winning over the file, unimplemented
//! fields reported once, SIGHUP applying a changed file live, a broken file on SIGHUP
//! keeping the configuration in effect, and an unknown field refusing to start.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use serde_json::Value;

const HEADER: &str = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";

fn write_config(path: &Path, body: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, format!("{HEADER}{body}")).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A pod whose container writes ~100 KiB of log, then `done`, then sleeps.
fn chatty_pod(name: &str) -> String {
    busybox_pod(
        name,
        "",
        "",
        "i=0; while [ $i -lt 1500 ]; do echo line-$i-abcdefghijklmnopqrstuvwxyz-abcdefghijklmnopqrstuvwxyz; i=$((i+1)); done; echo done; exec sleep 3600",
    )
}

/// The files of the pod's `main` container log dir (current and rotated).
fn log_files(d: &TestDaemon, pod: &str) -> Vec<PathBuf> {
    let full = d.full_name(pod);
    let Some(pod_dir) = std::fs::read_dir(&d.logs).ok().and_then(|entries| {
        entries.flatten().map(|e| e.path()).find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .contains(&format!("_{full}_"))
        })
    }) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(pod_dir.join("main"))
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| !p.to_string_lossy().ends_with(".tmp"));
    files.sort();
    files
}

/// Waits until the pod's log is complete (`done` in the current file) and its dir holds
/// `count` files (a rotated file being compressed shows twice for a moment), and
/// returns them.
fn wait_log_done(d: &TestDaemon, pod: &str, count: usize) -> Vec<PathBuf> {
    wait_until(Duration::from_secs(60), "log written", || {
        let files = log_files(d, pod);
        let current = files
            .iter()
            .find(|p| p.extension().is_some_and(|e| e == "log"))?;
        let done = std::fs::read_to_string(current).ok()?.contains(" done\n");
        (done && files.len() == count).then_some(files)
    })
    .unwrap_or_else(|| {
        panic!(
            "{pod}'s log never ended with `done` in {count} files: {:?}; daemon log:\n{}",
            log_files(d, pod),
            d.daemon_log()
        )
    })
}

fn uncompressed_sizes(files: &[PathBuf]) -> Vec<u64> {
    files
        .iter()
        .filter(|p| !p.to_string_lossy().ends_with(".gz"))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .collect()
}

fn node_event(d: &TestDaemon, reason: &str) -> Option<Value> {
    d.node_events()
        .into_iter()
        .rev()
        .find(|e| e["reason"] == reason)
}

fn wait_node_event(d: &TestDaemon, reason: &str) -> Value {
    wait_until(Duration::from_secs(20), reason, || node_event(d, reason)).unwrap_or_else(|| {
        panic!(
            "no {reason} node event in {:?}; daemon log:\n{}",
            d.node_events(),
            d.daemon_log()
        )
    })
}

fn sighup(d: &TestDaemon) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(d.daemon_pid().unwrap()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).unwrap();
}

#[test]
fn the_file_sets_flags_a_flag_wins_and_sighup_applies_a_changed_file() {
    assert!(require_root());
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    write_config(
        &config,
        "containerLogMaxSize: 4Ki\ncontainerLogMaxFiles: 5\ncpuCFSQuota: false\ncgroupDriver: systemd\nlogging:\n  format: json\nmaxOpenFiles: 4096\n",
    );
    let config_arg = config.to_str().unwrap();
    let mut d = TestDaemon::start_with(&["--config", config_arg, "--container-log-max-files", "3"]);

    // maxOpenFiles is the daemon's own RLIMIT_NOFILE.
    let limits =
        std::fs::read_to_string(format!("/proc/{}/limits", d.daemon_pid().unwrap())).unwrap();
    let nofile = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    assert_eq!(
        nofile.split_whitespace().collect::<Vec<_>>()[3..5],
        ["4096", "4096"],
        "{nofile}"
    );

    // The file's size and the command line's file count, both in behaviour.
    d.write_manifest("chatty.yaml", &chatty_pod("chatty"));
    // --container-log-max-files 3 beats the file's 5.
    let files = wait_log_done(&d, "chatty", 3);
    let sizes = uncompressed_sizes(&files);
    assert!(
        sizes.iter().all(|s| *s <= 4096),
        "containerLogMaxSize 4Ki: {sizes:?}"
    );

    // Unimplemented fields: one node event and one warning line, in JSON (logging.format).
    let event = wait_node_event(&d, "UnsupportedConfigField");
    let message = event["message"].as_str().unwrap();
    assert!(
        message.contains("cpuCFSQuota (") && message.contains("cgroupDriver ("),
        "{message}"
    );
    assert!(!message.contains("containerLogMaxSize"), "{message}");
    let log = d.daemon_log();
    let warnings: Vec<Value> = log
        .lines()
        .filter(|l| l.contains("UnsupportedConfigField"))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert_eq!(warnings.len(), 1, "{log}");
    assert_eq!(warnings[0]["level"], "WARN", "{:?}", warnings[0]);

    // SIGHUP with a changed file: the size applies to new containers at once; the
    // count stays the flag's; podPidsLimit waits for a restart.
    write_config(
        &config,
        "containerLogMaxSize: 8Ki\ncontainerLogMaxFiles: 4\npodPidsLimit: 50\ncpuCFSQuota: false\ncgroupDriver: systemd\nlogging:\n  format: json\n",
    );
    sighup(&d);
    let reloaded = wait_node_event(&d, "ConfigReloaded");
    let message = reloaded["message"].as_str().unwrap();
    assert!(message.contains("applied containerLogMaxSize"), "{message}");
    assert!(
        message.contains("a command-line flag overrides them: containerLogMaxFiles"),
        "{message}"
    );
    let restart = wait_node_event(&d, "ConfigChangeNeedsRestart");
    assert!(
        restart["message"]
            .as_str()
            .unwrap()
            .contains("podPidsLimit changed")
    );
    d.write_manifest("chatty2.yaml", &chatty_pod("chatty2"));
    let files = wait_log_done(&d, "chatty2", 3);
    let sizes = uncompressed_sizes(&files);
    assert!(
        sizes.iter().all(|s| *s <= 8192) && sizes.iter().any(|s| *s > 4096),
        "containerLogMaxSize 8Ki after the reload: {sizes:?}"
    );

    // A broken file on SIGHUP: an event naming the field, the daemon and its pods stay.
    write_config(&config, "containerLogMaxSize: 8Ki\nstaticPodPth: /tmp/x\n");
    sighup(&d);
    let failed = wait_node_event(&d, "ConfigReloadFailed");
    let message = failed["message"].as_str().unwrap();
    assert!(
        message.contains(config_arg)
            && message.contains("unknown field \"staticPodPth\" (did you mean \"staticPodPath\"?)")
            && message.ends_with("the configuration in effect is kept"),
        "{message}"
    );
    assert_eq!(phase(&d.pod("chatty").unwrap()), "Running");
    assert!(d.daemon_pid().is_some());
    d.write_manifest("chatty3.yaml", &chatty_pod("chatty3"));
    let sizes = uncompressed_sizes(&wait_log_done(&d, "chatty3", 3));
    assert!(
        sizes.iter().any(|s| *s > 4096),
        "the 8Ki size stays in effect: {sizes:?}"
    );
    d.kill9();
}

/// The node's DiskPressure condition ("True"/"False") from the daemon's API.
fn disk_pressure(d: &TestDaemon) -> String {
    let conditions: Value = podhost::api::client::Client::new(&d.socket)
        .get_json("/node/conditions")
        .unwrap();
    conditions
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "DiskPressure")
        .map(|c| c["status"].as_str().unwrap().to_string())
        .unwrap_or_default()
}

#[test]
fn sighup_applies_new_eviction_thresholds() {
    assert!(require_root());
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    let soft = |percent: u32| {
        format!(
            "evictionSoft:\n  nodefs.available: \"{percent}%\"\n\
             evictionSoftGracePeriod:\n  nodefs.available: 1h\n\
             evictionPressureTransitionPeriod: 1s\n"
        )
    };
    // No filesystem is ever below 0% free: no pressure.
    write_config(&config, &soft(0));
    let mut d = TestDaemon::start_with(&[
        "--config",
        config.to_str().unwrap(),
        "--eviction-monitoring-period",
        "0.2",
    ]);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(disk_pressure(&d), "False");
    // Every filesystem is below 100% free: a soft threshold raises the condition at
    // once (its eviction waits the hour's grace, so nothing is evicted).
    write_config(&config, &soft(100));
    sighup(&d);
    let reloaded = wait_node_event(&d, "ConfigReloaded");
    let message = reloaded["message"].as_str().unwrap();
    assert!(message.contains("applied evictionSoft"), "{message}");
    assert!(
        node_event(&d, "ConfigChangeNeedsRestart").is_none(),
        "{:?}",
        d.node_events()
    );
    wait_until(Duration::from_secs(10), "DiskPressure True", || {
        (disk_pressure(&d) == "True").then_some(())
    })
    .unwrap_or_else(|| panic!("no DiskPressure; daemon log:\n{}", d.daemon_log()));
    // And back: the condition clears after the transition period.
    write_config(&config, &soft(0));
    sighup(&d);
    wait_until(Duration::from_secs(10), "DiskPressure False", || {
        (disk_pressure(&d) == "False").then_some(())
    })
    .unwrap_or_else(|| panic!("DiskPressure stays; daemon log:\n{}", d.daemon_log()));
    d.kill9();
}

#[test]
fn an_unknown_field_stops_the_daemon_with_the_file_and_field_named() {
    assert!(require_root());
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    write_config(&config, "podPidLimit: 100\n");
    let mut d = TestDaemon::prepare_with(&["--config", config.to_str().unwrap()]);
    d.spawn_daemon_with_env(&[]);
    let status = d.wait_daemon_exit(Duration::from_secs(20));
    assert_eq!(status.code(), Some(1));
    let log = d.daemon_log();
    assert!(
        log.contains(&format!(
            "config file {}: unknown field \"podPidLimit\" (did you mean \"podPidsLimit\"?)",
            config.display()
        )),
        "{log}"
    );
}
