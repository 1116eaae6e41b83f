//! ConfigMaps and Secrets from `--config-dir` reach a real pod: its env from `envFrom`
//! and `valueFrom` (with the downward API), the kubelet's errors and events when a
//! reference is missing or a key is unusable, and a late object unblocks the pod.
//! (The configMap/secret volumes' end-to-end test comes with the volume mounts.)

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;

/// A daemon whose `--config-dir` is its own temp dir, filled by `files` before start.
fn daemon_with_config(files: &[(&str, &str)]) -> (TestDaemon, PathBuf) {
    let mut d = TestDaemon::prepare_with(&[]);
    let config = d.dir.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    for (name, text) in files {
        put(&config, name, text);
    }
    d.extra_args.push("--config-dir".into());
    d.extra_args.push(config.display().to_string());
    d.spawn_daemon();
    (d, config)
}

/// Writes a config file whole (temp + rename), as a config tool would.
fn put(dir: &Path, name: &str, text: &str) {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

/// The lines `env` printed in the container's first log.
fn env_lines(d: &TestDaemon, name: &str, pod: &serde_json::Value) -> Vec<String> {
    let uid = pod["metadata"]["uid"].as_str().unwrap();
    let log = d
        .logs
        .join(format!("default_{}_{uid}/main/0.log", d.full_name(name)));
    wait_until(Duration::from_secs(30), "env printed", || {
        let lines: Vec<String> = log_lines(&log).into_iter().map(|(_, _, m)| m).collect();
        lines.iter().any(|l| l == "END").then_some(lines)
    })
    .unwrap_or_else(|| {
        panic!(
            "no END in {}; daemon log:\n{}",
            log.display(),
            d.daemon_log()
        )
    })
}

const APP_CONFIG: &str = "apiVersion: v1
kind: ConfigMap
metadata: {name: app}
data:
  MODE: prod
  LEVEL: '3'
  1st: skipped
---
apiVersion: v1
kind: Secret
metadata: {name: db}
data:
  PASSWORD: czNjcmV0
stringData:
  USER: admin
";

#[test]
fn env_comes_from_config_map_and_secret_files_and_the_downward_api() {
    require_root();
    let (d, _config) = daemon_with_config(&[
        ("app.yaml", APP_CONFIG),
        ("broken.yaml", "kind: ConfigMap\nmetadata: {name: [\n"),
    ]);
    d.write_manifest(
        "envpod.yaml",
        &busybox_pod(
            "envpod",
            "",
            "    resources: {limits: {memory: 64Mi}}
    envFrom:
    - configMapRef: {name: app}
    - secretRef: {name: db}
      prefix: DB_
    env:
    - {name: LEVEL, value: level-$(MODE)}
    - name: ONE_KEY
      valueFrom: {configMapKeyRef: {name: app, key: MODE}}
    - name: SECRET_KEY
      valueFrom: {secretKeyRef: {name: db, key: USER}}
    - name: POD_NAME
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
    - name: NODE
      valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
    - name: MEM_MI
      valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1Mi}}
    - name: OPTIONAL
      valueFrom: {secretKeyRef: {name: absent, key: k, optional: true}}
",
            "env | sort; echo END; sleep 3600",
        ),
    );
    let pod = d.wait_pod("envpod", "pod Running", 60, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    let lines = env_lines(&d, "envpod", &pod);
    let full = d.full_name("envpod");
    for want in [
        "MODE=prod".to_string(),
        "LEVEL=level-prod".into(),
        "DB_PASSWORD=s3cret".into(),
        "DB_USER=admin".into(),
        "ONE_KEY=prod".into(),
        "SECRET_KEY=admin".into(),
        format!("POD_NAME={full}"),
        format!("NODE={}", d.node),
        "MEM_MI=64".into(),
    ] {
        assert!(lines.contains(&want), "{want} missing from {lines:#?}");
    }
    assert!(
        !lines.iter().any(|l| l.starts_with("OPTIONAL=")),
        "an optional missing secret leaves the variable unset: {lines:#?}"
    );
    let events = d.pod_events("envpod");
    assert!(
        events
            .iter()
            .any(|e| e["reason"] == "InvalidEnvironmentVariableNames"
                && e["message"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("Keys [1st] from the EnvFrom configMap default/app were skipped")),
        "{events:#?}"
    );
    let node_events = d.node_events();
    assert!(
        node_events.iter().any(|e| e["reason"] == "BadConfigObject"
            && e["message"]
                .as_str()
                .unwrap_or_default()
                .contains("broken.yaml")),
        "the bad file is named in a node event: {node_events:#?}"
    );
}

#[test]
fn a_missing_config_map_blocks_the_container_until_its_file_appears() {
    require_root();
    let (d, config) = daemon_with_config(&[]);
    d.write_manifest(
        "waits.yaml",
        &busybox_pod(
            "waits",
            "",
            "    env:
    - name: MODE
      valueFrom: {configMapKeyRef: {name: late, key: MODE}}
",
            "echo MODE=$MODE; echo END; sleep 3600",
        ),
    );
    let waiting = d.wait_pod("waits", "CreateContainerConfigError", 60, |p| {
        let w = &container_status(p, "main")?["state"]["waiting"];
        (w["reason"] == "CreateContainerConfigError").then(|| w.clone())
    });
    assert_eq!(waiting["message"], "configmap \"late\" not found");

    // The object without the key: the kubelet's key message.
    put(
        &config,
        "late.yaml",
        "kind: ConfigMap\nmetadata: {name: late}\ndata: {OTHER: x}\n",
    );
    d.wait_pod("waits", "the missing-key message", 60, |p| {
        let w = &container_status(p, "main")?["state"]["waiting"];
        (w["message"] == "couldn't find key MODE in ConfigMap default/late").then_some(())
    });

    // With the key, the container starts (within the back-off, no restart of the daemon).
    put(
        &config,
        "late.yaml",
        "kind: ConfigMap\nmetadata: {name: late}\ndata: {MODE: ready}\n",
    );
    let pod = d.wait_pod("waits", "pod Running", 60, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    let uid = pod["metadata"]["uid"].as_str().unwrap();
    let dir = d
        .logs
        .join(format!("default_{}_{uid}/main", d.full_name("waits")));
    let log = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "log"))
        .expect("a container log");
    let lines = wait_until(Duration::from_secs(30), "env printed", || {
        let lines: Vec<String> = log_lines(&log).into_iter().map(|(_, _, m)| m).collect();
        lines.iter().any(|l| l == "END").then_some(lines)
    })
    .expect("the container printed its env");
    assert!(lines.contains(&"MODE=ready".to_string()), "{lines:#?}");
}
