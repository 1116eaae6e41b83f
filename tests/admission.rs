//! The node's pod admission as static pods meet it through a real daemon: the OS checks
//! (which the kubelet runs for every pod) refuse a pod for another OS with the
//! kubelet's reason and message, an event, and nothing started; a static pod that asks
//! for more than the node has still runs (static pods are counted, never refused for
//! resources, node affinity or taints). The checks pods from the API server get are
//! unit-tested in `model::admission` and `worker::admission_ledger`.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use serde_json::Value;

#[test]
fn a_pod_for_another_os_is_rejected_and_a_static_pod_is_never_refused_for_resources() {
    assert!(require_root());
    let d = TestDaemon::start();
    let labelled = busybox_pod("labelled", "", "", "sleep 1000").replace(
        "  name: labelled\n",
        "  name: labelled\n  labels: {kubernetes.io/os: windows}\n",
    );
    d.write_manifest("labelled.yaml", &labelled);
    d.write_manifest(
        "windows.yaml",
        &busybox_pod("windows", "  os: {name: windows}\n", "", "sleep 1000"),
    );
    d.write_manifest(
        "hungry.yaml",
        &busybox_pod(
            "hungry",
            "  nodeSelector: {disk: none-such}\n",
            "    resources: {requests: {cpu: \"4096\", memory: 64Ti}}\n",
            "sleep 1000",
        ),
    );
    let failed = |name: &str| -> Value {
        d.wait_pod(name, "Failed", 30, |p| {
            (phase(p) == "Failed").then(|| p.clone())
        })
    };
    let labelled = failed("labelled");
    assert_eq!(
        labelled["status"]["reason"],
        "PodOSSelectorNodeLabelDoesNotMatch"
    );
    assert_eq!(
        labelled["status"]["message"],
        "Pod was rejected: Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"
    );
    assert!(
        d.pod_events("labelled")
            .iter()
            .any(|e| e["reason"] == "PodOSSelectorNodeLabelDoesNotMatch" && e["type"] == "Warning"),
        "a warning event"
    );
    assert!(
        labelled["status"]["containerStatuses"].is_null()
            || container_status(&labelled, "main").unwrap()["state"]["running"].is_null(),
        "nothing of a rejected pod runs"
    );
    let windows = failed("windows");
    assert_eq!(windows["status"]["reason"], "PodOSNotSupported");
    assert_eq!(
        windows["status"]["message"],
        "Pod was rejected: Failed to admit pod as the OS field doesn't match node OS"
    );
    // 4096 cores, 64Ti and a selector no node label matches: a static pod runs anyway.
    d.wait_pod("hungry", "Running", 60, |p| {
        (phase(p) == "Running").then_some(())
    });
}
