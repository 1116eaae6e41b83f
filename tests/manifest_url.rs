//! The http static pod source (`--manifest-url`) against a real HTTP(S) server in the
//! test: its pods appear, change, stay while the URL fails (with a node event naming
//! the URL and the status), and go with an empty answer; the request headers arrive;
//! YAML, JSON, single Pods and PodLists; https verified with the system's CA roots
//! (`SSL_CERT_FILE` points them at a throwaway CA, and without it the same server is
//! refused). The manifest directory keeps working beside it.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::common_manifest_url;

use std::time::Duration;

use common::{TestDaemon, busybox_pod, phase, require_root, wait_until};
use common_manifest_url::{ManifestServer, TestCa};
use serde_json::{Value, json};

fn pod_yaml(name: &str) -> String {
    busybox_pod(name, "", "", "sleep 3600")
}

/// The pod's JSON form without kind/apiVersion, as hand-written PodList items are.
fn bare_item(name: &str) -> Value {
    let mut v: Value = serde_yaml_ng::from_str(&pod_yaml(name)).unwrap();
    let obj = v.as_object_mut().unwrap();
    obj.remove("kind");
    obj.remove("apiVersion");
    v
}

fn wait_running(d: &TestDaemon, name: &str) -> Value {
    d.wait_pod(name, &format!("{name} Running"), 60, |p| {
        (phase(p) == "Running").then(|| p.clone())
    })
}

fn wait_node_event(d: &TestDaemon, what: &str, matches: impl Fn(&str) -> bool) -> String {
    wait_until(Duration::from_secs(30), what, || {
        d.node_events()
            .iter()
            .filter_map(|e| e["message"].as_str())
            .find(|m| matches(m))
            .map(String::from)
    })
    .unwrap_or_else(|| {
        panic!(
            "no node event: {what}; events: {:#?}\ndaemon log:\n{}",
            d.node_events(),
            d.daemon_log()
        )
    })
}

#[test]
fn pods_follow_the_url_through_a_pod_a_list_errors_and_an_empty_answer() {
    assert!(require_root());
    let server = ManifestServer::http();
    let url = format!("http://{}/pods", server.addr);
    server.set("200 OK", &pod_yaml("one"));
    let d = TestDaemon::start_on_machine_network(&[
        "--manifest-url",
        &url,
        "--http-check-frequency",
        "0.2",
        "--manifest-url-header",
        "X-Token: secret,X-Multi:1",
        "--manifest-url-header=X-Multi:2",
    ]);
    d.write_manifest("local.yaml", &pod_yaml("local"));

    // A single Pod in YAML: the kubelet's http identity.
    let one = wait_running(&d, "one");
    let ann = &one["metadata"]["annotations"];
    assert_eq!(ann["kubernetes.io/config.source"], "http");
    let decoded = serde_yaml_ng::from_str(&pod_yaml("one")).unwrap();
    let uid = podhost::source::http_pod_uid(&decoded, &url);
    assert_eq!(one["metadata"]["uid"], uid.as_str());
    assert_eq!(ann["kubernetes.io/config.hash"], uid.as_str());
    assert!(one["spec"]["tolerations"].is_null(), "{}", one["spec"]);
    // The directory's pods run beside the URL's.
    assert_eq!(
        wait_running(&d, "local")["metadata"]["annotations"]["kubernetes.io/config.source"],
        "file"
    );

    // The headers, values of one name in the order given.
    let requests = server.requests();
    let last = requests.last().expect("the URL was requested");
    let values = |name: &str| -> Vec<&str> {
        last.iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    };
    assert_eq!(values("x-token"), ["secret"], "{last:?}");
    assert_eq!(values("x-multi"), ["1", "2"], "{last:?}");

    // A PodList in JSON: "one" is the same pod (same UID, not restarted), "two" is new.
    let list = json!({"apiVersion": "v1", "kind": "PodList",
                      "items": [bare_item("one"), bare_item("two")]});
    server.set("200 OK", &list.to_string());
    wait_running(&d, "two");
    assert_eq!(d.pod("one").unwrap()["metadata"]["uid"], uid.as_str());

    // A server error: an event naming the URL and the status; the pods stay.
    server.set("500 Internal Server Error", "boom");
    let msg = wait_node_event(&d, "the 500", |m| m.contains("500 Internal Server Error"));
    assert!(msg.contains(&url), "{msg}");
    // An answer that cannot be used: reported naming the item; the pods still stay.
    let bad = json!({"apiVersion": "v1", "kind": "PodList",
                     "items": [bare_item("one"), {"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c"}]}}]});
    server.set("200 OK", &bad.to_string());
    let msg = wait_node_event(&d, "the bad item", |m| m.contains("items[1]"));
    assert!(
        msg.contains(&format!("manifest {url} items[1]: spec.containers[0]")),
        "{msg}"
    );
    for name in ["one", "two", "local"] {
        assert_eq!(phase(&d.pod(name).unwrap()), "Running", "{name}");
    }

    // An empty answer: the URL defines no pods any more.
    server.set("200 OK", "");
    d.wait_gone("one", 60);
    d.wait_gone("two", 60);
    assert_eq!(phase(&d.pod("local").unwrap()), "Running");
}

#[test]
fn https_is_verified_with_the_system_ca_roots() {
    assert!(require_root());
    let certs = tempfile::tempdir().unwrap();
    let ca = TestCa::new(certs.path());
    let server = ManifestServer::https(&ca.server_cert, &ca.server_key);
    let url = format!("https://127.0.0.1:{}/pod", server.addr.port());
    server.set("200 OK", &pod_yaml("secure"));
    let flags = [
        "--manifest-url",
        url.as_str(),
        "--http-check-frequency",
        "0.2",
    ];

    // With the system roots (Debian's /etc/ssl/certs) the test CA is unknown: refused.
    let untrusting = TestDaemon::start_on_machine_network(&flags);
    let msg = wait_node_event(&untrusting, "the refused certificate", |m| {
        m.contains("cannot be fetched")
    });
    eprintln!("refused: {msg}");
    assert!(
        msg.contains(&url) && msg.to_lowercase().contains("certificate"),
        "{msg}"
    );
    assert!(untrusting.pod("secure").is_none());
    drop(untrusting);

    // The same roots loaded from SSL_CERT_FILE (how the system's CA bundle is found).
    let mut d = TestDaemon::prepare_on_machine_network(&flags);
    let ca_file = ca.ca_cert.display().to_string();
    d.spawn_daemon_with_env(&[("SSL_CERT_FILE", ca_file.as_str())]);
    d.wait_api_up();
    let pod = wait_running(&d, "secure");
    assert_eq!(
        pod["metadata"]["annotations"]["kubernetes.io/config.source"],
        "http"
    );
}
