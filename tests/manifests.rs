//! The manifest directory: add, edit (graceful replace), invalid files, warnings.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::*;

#[test]
fn edited_manifest_replaces_the_pod_after_the_old_one_terminated() {
    require_root();
    let d = TestDaemon::start();
    let version = |v: &str| {
        busybox_pod(
            "edit",
            "  terminationGracePeriodSeconds: 10\n",
            "",
            &format!(
                "trap 'echo {v}-stopping; sleep 1.5; echo {v}-stopped; exit 0' TERM; echo {v}-up; while true; do sleep 0.1; done"
            ),
        )
    };
    d.write_manifest("edit.yaml", &version("v1"));
    let old = d.wait_pod("edit", "v1 Running", 20, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    let old_uid = old["metadata"]["uid"].as_str().unwrap().to_string();
    let full = d.full_name("edit");
    wait_until(Duration::from_secs(5), "v1 up", || {
        String::from_utf8_lossy(&d.cli(&["logs", &full]).stdout)
            .contains("v1-up")
            .then_some(())
    })
    .expect("v1 logged");
    // Only the command changes (the kubelet's ignored-edit bug: any change counts here).
    d.write_manifest("edit.yaml", &version("v2"));
    let new = d.wait_pod("edit", "v2 Running", 30, |p| {
        (p["metadata"]["uid"] != old_uid.as_str() && phase(p) == "Running").then(|| p.clone())
    });
    let new_uid = new["metadata"]["uid"].as_str().unwrap();
    let old_log = log_lines(&d.logs.join(format!("default_{full}_{old_uid}/main/0.log")));
    let new_log = log_lines(&d.logs.join(format!("default_{full}_{new_uid}/main/0.log")));
    let stopped = old_log
        .iter()
        .find(|l| l.2 == "v1-stopped")
        .expect("v1 stopped gracefully")
        .0;
    let started = ts(&container_status(&new, "main").unwrap()["state"]["running"]["startedAt"]);
    assert!(
        started >= stopped - chrono::Duration::seconds(1),
        "v2 started {started} before v1 finished stopping {stopped}"
    );
    wait_until(Duration::from_secs(5), "v2 logs", || {
        log_lines(&d.logs.join(format!("default_{full}_{new_uid}/main/0.log")))
            .iter()
            .any(|l| l.2 == "v2-up")
            .then_some(())
    })
    .unwrap_or_else(|| panic!("v2 did not log: {new_log:?}"));
    // The API shows one pod of that name.
    let same_name = d
        .pods()
        .into_iter()
        .filter(|p| p["metadata"]["name"] == full.as_str())
        .count();
    assert_eq!(same_name, 1);
    // A seconds-precision check that the old UID is gone from disk.
    wait_until(Duration::from_secs(5), "old pod dir removed", || {
        (!d.root.join("pods").join(&old_uid).exists()).then_some(())
    })
    .expect("old pod dir removed");
}

#[test]
fn bad_files_are_reported_and_other_pods_keep_running() {
    require_root();
    let d = TestDaemon::start();
    d.write_manifest(
        "good.yaml",
        &busybox_pod("good", "", "", "while true; do sleep 1; done"),
    );
    let good = d.wait_pod("good", "good Running", 20, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    let started = container_status(&good, "main").unwrap()["state"]["running"]["startedAt"].clone();
    d.write_manifest(
        "broken.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: [unclosed\n",
    );
    d.write_manifest(
        "notpod.yaml",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: svc\n",
    );
    d.write_manifest(
        "noimage.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: noimage\nspec:\n  containers:\n  - name: main\n",
    );
    d.write_manifest(
        "typo.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: typo\nspec:\n  containers:\n  - name: main\n    image: localhost/busybox:latest\n    comand: [\"sh\"]\n",
    );
    d.write_manifest(".hidden.yaml", "this is skipped: {{{");
    let events = wait_until(Duration::from_secs(10), "4 manifest errors", || {
        let ev: Vec<_> = d
            .node_events()
            .into_iter()
            .filter(|e| e["reason"] == "FailedToLoadManifest")
            .collect();
        (ev.len() >= 4).then_some(ev)
    })
    .unwrap_or_else(|| panic!("events: {:?}\n{}", d.node_events(), d.daemon_log()));
    let text: Vec<String> = events
        .iter()
        .map(|e| e["message"].as_str().unwrap().to_string())
        .collect();
    let has = |file: &str, what: &str| text.iter().any(|m| m.contains(file) && m.contains(what));
    assert!(has("broken.yaml", ""), "{text:?}");
    assert!(has("notpod.yaml", "Pod"), "{text:?}");
    assert!(has("noimage.yaml", "image"), "{text:?}");
    assert!(has("typo.yaml", "comand"), "{text:?}");
    assert!(
        !text.iter().any(|m| m.contains(".hidden")),
        "dotfiles are skipped: {text:?}"
    );
    assert!(
        d.daemon_log().contains("typo.yaml"),
        "errors are in the daemon log too"
    );
    // The good pod was not touched.
    let good = d.pod("good").unwrap();
    assert_eq!(phase(&good), "Running");
    assert_eq!(
        container_status(&good, "main").unwrap()["state"]["running"]["startedAt"],
        started
    );
    assert_eq!(d.pods().len(), 1);
}

#[test]
fn fields_not_honoured_yet_are_warning_events() {
    require_root();
    let d = TestDaemon::start();
    d.write_manifest(
        "probe.yaml",
        &busybox_pod(
            "probe",
            "",
            "    resizePolicy:\n    - {resourceName: cpu, restartPolicy: NotRequired}\n",
            "while true; do sleep 1; done",
        ),
    );
    d.wait_pod("probe", "Running", 20, |p| {
        (phase(p) == "Running").then_some(())
    });
    let warnings: Vec<String> = d
        .pod_events("probe")
        .into_iter()
        .filter(|e| e["reason"] == "FieldNotHonoured")
        .map(|e| e["message"].as_str().unwrap().to_string())
        .collect();
    assert!(
        warnings.iter().any(|w| w.contains("resizePolicy")),
        "{warnings:?}"
    );
}

#[test]
fn an_edit_that_breaks_the_file_keeps_the_running_pod() {
    require_root();
    let d = TestDaemon::start();
    let good = busybox_pod(
        "keep",
        "  terminationGracePeriodSeconds: 2\n",
        "",
        "while true; do sleep 1; done",
    );
    d.write_manifest("keep.yaml", &good);
    let pod = d.wait_pod("keep", "Running", 20, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    let uid = pod["metadata"]["uid"].clone();
    d.write_manifest(
        "keep.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: keep\nspec: [",
    );
    let event = wait_until(Duration::from_secs(10), "ManifestInvalid", || {
        d.pod_events("keep")
            .into_iter()
            .find(|e| e["reason"] == "ManifestInvalid")
    })
    .unwrap_or_else(|| panic!("no ManifestInvalid event; {}", d.daemon_log()));
    assert!(
        event["message"].as_str().unwrap().contains("keep.yaml"),
        "{event}"
    );
    // Well past a rescan: the same pod still runs.
    std::thread::sleep(Duration::from_secs(3));
    let now = d.pod("keep").expect("pod kept");
    assert_eq!(now["metadata"]["uid"], uid);
    assert_eq!(phase(&now), "Running");
    // Removing the broken file removes the pod.
    d.remove_manifest("keep.yaml");
    d.wait_gone("keep", 40);
}
