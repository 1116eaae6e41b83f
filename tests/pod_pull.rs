//! Pods pull their images from a real registry on 127.0.0.1 per imagePullPolicy, and a
//! failing pull is ErrImagePull then ImagePullBackOff with the registry's message; a
//! static pod's imagePullSecrets come from `--config-dir`.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::common_registry;

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

/// A static pod's `imagePullSecrets` name Secrets of `--config-dir` (where its other
/// Secrets come from): the login of the one that exists pulls the image; a missing one
/// and one of another type are Warning events; without a usable secret the registry
/// refuses the pull with 401.
#[test]
fn a_static_pods_pull_secrets_come_from_the_config_dir() {
    common::require_root();
    let registry = Registry::start_with_auth("alice", "s3cret");
    registry.push_busybox("v1", &[]);
    let image = format!("{}/busybox:v1", registry.addr);
    let mut d = TestDaemon::prepare_on_machine_network(&[]);
    let config = d.dir.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    // stringData, as a config dir file may hold it; base64("alice:s3cret").
    let secrets = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: regcred}}\ntype: kubernetes.io/dockerconfigjson\n\
         stringData:\n  .dockerconfigjson: '{{\"auths\":{{\"{}\":{{\"auth\":\"YWxpY2U6czNjcmV0\"}}}}}}'\n\
         ---\napiVersion: v1\nkind: Secret\nmetadata: {{name: opaque}}\nstringData: {{a: b}}\n",
        registry.addr
    );
    std::fs::write(config.join("secrets.yaml"), secrets).unwrap();
    d.extra_args.push("--config-dir".into());
    d.extra_args.push(config.display().to_string());
    d.spawn_daemon();

    let with_secrets = |name: &str, secrets: &str| {
        pod(name, &image, "Always").replace(
            "spec:\n",
            &format!("spec:\n  imagePullSecrets: [{secrets}]\n"),
        )
    };
    d.write_manifest(
        "pulls.yaml",
        &with_secrets("pulls", "{name: gone}, {name: opaque}, {name: regcred}"),
    );
    d.wait_pod("pulls", "Running", 60, |p| {
        (phase(p) == "Running").then_some(())
    });
    let events: Vec<(String, String)> = d
        .pod_events("pulls")
        .iter()
        .map(|e| {
            (
                e["reason"].as_str().unwrap().to_string(),
                e["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        events.contains(&(
            "FailedToRetrieveImagePullSecret".to_string(),
            "Unable to retrieve some image pull secrets (gone); attempting to pull the image \
             may not succeed."
                .to_string()
        )),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|(reason, message)| reason == "InvalidImagePullSecret"
                && message.starts_with("Secret \"opaque\" in imagePullSecrets is not used")),
        "{events:?}"
    );

    d.write_manifest("refused.yaml", &with_secrets("refused", "{name: opaque}"));
    let message = d.wait_pod("refused", "ErrImagePull", 60, |p| {
        let w = &container_status(p, "main")?["state"]["waiting"];
        matches!(w["reason"].as_str()?, "ErrImagePull" | "ImagePullBackOff")
            .then(|| w["message"].as_str().unwrap_or("").to_string())
    });
    assert!(message.contains("401"), "{message}");
}
