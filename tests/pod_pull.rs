//! Pods pull their images from a real registry on 127.0.0.1 per imagePullPolicy, and a
//! failing pull is ErrImagePull then ImagePullBackOff with the registry's message.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod common_registry;

use std::time::Duration;

use common::{TestDaemon, container_status, phase, wait_until};
use common_registry::Registry;

fn pod(name: &str, image: &str, policy: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 2\n  containers:\n  - name: main\n    image: {image}\n    imagePullPolicy: {policy}\n    command: [\"sh\", \"-c\", \"echo pulled-and-running; sleep 100\"]\n"
    )
}

#[test]
fn pods_pull_per_policy_and_report_pull_errors() {
    common::require_root();
    let registry = Registry::start();
    registry.push_busybox("v1", &[]);
    // The registry listens on the machine's loopback.
    let d = TestDaemon::start_on_machine_network(&["--insecure-registry", &registry.addr]);
    let image = format!("{}/busybox:v1", registry.addr);
    d.write_manifest("always.yaml", &pod("always", &image, "Always"));
    d.wait_pod("always", "Running", 60, |p| {
        (phase(p) == "Running").then_some(())
    });
    let events: Vec<String> = d
        .pod_events("always")
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e["reason"].as_str().unwrap(),
                e["message"].as_str().unwrap()
            )
        })
        .collect();
    assert!(
        events
            .iter()
            .any(|e| e.starts_with(&format!("Pulling Pulling image \"{image}\""))),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("Pulled Successfully pulled image")),
        "{events:?}"
    );
    let out = d.cli(&["images"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains(&image));

    // A missing tag: ErrImagePull, then ImagePullBackOff, with the registry's message.
    let missing = format!("{}/busybox:nope", registry.addr);
    d.write_manifest("missing.yaml", &pod("missing", &missing, "IfNotPresent"));
    let first = d.wait_pod("missing", "ErrImagePull", 30, |p| {
        let w = &container_status(p, "main")?["state"]["waiting"];
        (w["reason"] == "ErrImagePull").then(|| w["message"].as_str().unwrap_or("").to_string())
    });
    assert!(first.contains(&missing), "{first}");
    let backoff = wait_until(Duration::from_secs(20), "ImagePullBackOff", || {
        let p = d.pod("missing")?;
        let w = &container_status(&p, "main")?["state"]["waiting"];
        (w["reason"] == "ImagePullBackOff").then(|| w["message"].as_str().unwrap_or("").to_string())
    })
    .expect("ImagePullBackOff");
    assert!(
        backoff.starts_with(&format!("Back-off pulling image \"{missing}\"")),
        "{backoff}"
    );
    eprintln!("pull error as shown: {first}");

    // CLI pull through the daemon.
    let out = d.cli(&["pull", &image]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(&format!("{image}@sha256:")));
}
