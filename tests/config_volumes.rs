//! ConfigMaps and Secrets from `--config-dir` reach a real pod: its env from `envFrom`
//! and `valueFrom` (with the downward API), the kubelet's errors and events when a
//! reference is missing or a key is unusable, and a late object unblocks the pod.
//! configMap, secret, downwardAPI and projected volumes: their files, modes, the secret on
//! tmpfs, and an edited ConfigMap reaching the mounted volume atomically.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

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

const VOLUME_CONFIG: &str = "apiVersion: v1
kind: ConfigMap
metadata: {name: web}
data:
  index.html: v1
  extra.conf: x=1
---
apiVersion: v1
kind: Secret
metadata: {name: tls}
stringData:
  key.pem: sekret
";

#[test]
fn config_map_secret_downward_and_projected_volumes_and_their_updates() {
    require_root();
    let (d, config) = daemon_with_config(&[("web.yaml", VOLUME_CONFIG)]);
    d.write_manifest(
        "vols.yaml",
        &busybox_pod(
            "vols",
            "  terminationGracePeriodSeconds: 2\n  volumes:\n  - name: web\n    configMap:\n      name: web\n      items:\n      - key: index.html\n        path: html/index.html\n  - name: tls\n    secret:\n      secretName: tls\n      defaultMode: 256\n  - name: info\n    downwardAPI:\n      items:\n      - path: labels\n        fieldRef: {fieldPath: metadata.labels}\n  - name: all\n    projected:\n      sources:\n      - configMap: {name: web}\n      - secret: {name: tls}\n",
            "    volumeMounts:\n    - {name: web, mountPath: /web}\n    - {name: tls, mountPath: /tls}\n    - {name: info, mountPath: /info}\n    - {name: all, mountPath: /all}\n",
            "exec sleep 1000",
        )
        .replace("metadata:\n  name: vols\n", "metadata:\n  name: vols\n  labels: {app: web}\n"),
    );
    d.wait_pod("vols", "running", 30, |p| {
        container_status(p, "main")?["state"]["running"]
            .is_object()
            .then_some(())
    });
    let pod = d.full_name("vols");
    let sh = |cmd: &str| {
        let out = d.cli(&["exec", &pod, "--", "sh", "-c", cmd]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(sh("cat /web/html/index.html"), "v1");
    assert_eq!(sh("ls /web"), "html", "only the listed item");
    assert_eq!(sh("cat /tls/key.pem"), "sekret");
    assert_eq!(sh("stat -L -c %a /tls/key.pem"), "400", "defaultMode");
    assert_eq!(sh("cat /info/labels"), "app=\"web\"");
    assert_eq!(sh("cat /all/extra.conf /all/key.pem"), "x=1sekret");
    assert_eq!(sh("readlink /web/html"), "..data/html");
    // The secret's bytes are on a tmpfs, never on the root dir's disk.
    let pod_json = d.pod("vols").unwrap();
    let uid = pod_json["metadata"]["uid"].as_str().unwrap().to_string();
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let tls = mountinfo
        .lines()
        .find(|l| l.contains(&uid) && l.contains("volumes/content/tls "))
        .unwrap_or_else(|| panic!("the secret volume is not mounted: {mountinfo}"));
    assert!(tls.contains(" - tmpfs "), "{tls}");
    // An edit of the ConfigMap reaches the mounted volume within a few seconds.
    put(
        &config,
        "web.yaml",
        &VOLUME_CONFIG.replace("index.html: v1", "index.html: v2"),
    );
    let updated = wait_until(Duration::from_secs(15), "v2 in the volume", || {
        (sh("cat /web/html/index.html") == "v2").then_some(())
    });
    assert!(
        updated.is_some(),
        "the volume still shows {}",
        sh("cat /web/html/index.html")
    );
    d.remove_manifest("vols.yaml");
    d.wait_gone("vols", 30);
    assert!(
        !d.mounts().iter().any(|m| m.contains(&uid)),
        "a volume of the pod is still mounted"
    );
}

#[test]
fn a_missing_config_map_volume_blocks_the_container_until_it_appears() {
    require_root();
    let (d, config) = daemon_with_config(&[]);
    d.write_manifest(
        "late.yaml",
        &busybox_pod(
            "late",
            "  volumes:\n  - name: web\n    configMap:\n      name: web\n",
            "    volumeMounts:\n    - {name: web, mountPath: /web}\n",
            "cat /web/index.html; exec sleep 1000",
        ),
    );
    let message = d.wait_pod("late", "blocked", 30, |p| {
        let w = &container_status(p, "main")?["state"]["waiting"];
        (w["reason"] == "CreateContainerConfigError").then(|| w["message"].to_string())
    });
    assert!(
        message.contains("MountVolume.SetUp failed for volume \\\"web\\\"")
            && message.contains("not found"),
        "{message}"
    );
    put(&config, "web.yaml", VOLUME_CONFIG);
    d.wait_pod("late", "running", 60, |p| {
        container_status(p, "main")?["state"]["running"]
            .is_object()
            .then_some(())
    });
}

/// The `size=` and the flags of the mount on `dest` as the container's /proc/mounts
/// shows them.
fn container_mount(d: &TestDaemon, pod: &str, dest: &str) -> (Vec<String>, Option<u64>) {
    let out = d.cli(&["exec", pod, "--", "cat", "/proc/mounts"]);
    let mounts = String::from_utf8_lossy(&out.stdout).to_string();
    let line = mounts
        .lines()
        .find(|l| l.split(' ').nth(1) == Some(dest))
        .unwrap_or_else(|| panic!("no mount on {dest} in the container: {mounts}"));
    let options: Vec<String> = line
        .split(' ')
        .nth(3)
        .unwrap_or_default()
        .split(',')
        .map(String::from)
        .collect();
    let size = options
        .iter()
        .find_map(|o| o.strip_prefix("size="))
        .map(|s| s.trim_end_matches('k').parse::<u64>().unwrap() * 1024);
    (options, size)
}

/// The machine's memory, which is the test daemon's allocatable memory (it runs without
/// eviction thresholds or reservations).
fn mem_total() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kb = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .unwrap()
        .trim()
        .trim_end_matches("kB")
        .trim();
    kb.parse::<u64>().unwrap() * 1024
}

#[test]
fn content_volumes_are_read_only_whatever_the_mount_says_and_their_tmpfs_is_sized() {
    require_root();
    let (d, _config) = daemon_with_config(&[("web.yaml", VOLUME_CONFIG)]);
    let volumes = "  volumes:\n  - name: web\n    configMap: {name: web}\n  - name: tls\n    secret: {secretName: tls}\n  - name: scratch\n    emptyDir: {medium: Memory, sizeLimit: 8Mi}\n";
    let mounts = "    volumeMounts:\n    - {name: web, mountPath: /web, readOnly: false}\n    - {name: tls, mountPath: /tls}\n    - {name: scratch, mountPath: /scratch}\n";
    d.write_manifest(
        "limited.yaml",
        &busybox_pod(
            "limited",
            volumes,
            &format!("    resources: {{limits: {{memory: 48Mi}}}}\n{mounts}"),
            "exec sleep 1000",
        ),
    );
    d.write_manifest(
        "unlimited.yaml",
        &busybox_pod("unlimited", volumes, mounts, "exec sleep 1000"),
    );
    for name in ["limited", "unlimited"] {
        d.wait_pod(name, "running", 60, |p| {
            container_status(p, "main")?["state"]["running"]
                .is_object()
                .then_some(())
        });
    }
    let limited = d.full_name("limited");
    let sh = |pod: &str, cmd: &str| {
        let out = d.cli(&["exec", pod, "--", "sh", "-c", cmd]);
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    // `readOnly: false` and no readOnly at all: the container cannot write either
    // volume, not a new file, not the payload, not the `..data` link.
    for cmd in [
        "echo x > /web/new",
        "echo x > /web/..data/index.html",
        "rm /web/..data",
        "echo x > /tls/new",
    ] {
        let said = sh(&limited, &format!("{cmd} && echo WROTE"));
        assert!(
            said.contains("Read-only file system") && !said.contains("WROTE"),
            "{cmd}: {said}"
        );
    }
    assert_eq!(sh(&limited, "cat /web/index.html"), "v1");
    // The emptyDir stays writable.
    assert_eq!(sh(&limited, "echo x > /scratch/f && cat /scratch/f"), "x\n");
    for dest in ["/web", "/tls"] {
        let (options, size) = container_mount(&d, &limited, dest);
        assert_eq!(options[0], "ro", "{dest}: {options:?}");
        assert_eq!(size, Some(48 << 20), "{dest}: the pod's memory limit");
    }
    let (_, size) = container_mount(&d, &limited, "/scratch");
    assert_eq!(size, Some(8 << 20), "the sizeLimit under the pod's limit");
    // Without memory limits: the node's allocatable memory (the test daemon has no
    // reservations or eviction thresholds: all of the machine's memory).
    let unlimited = d.full_name("unlimited");
    for dest in ["/web", "/tls"] {
        let (options, size) = container_mount(&d, &unlimited, dest);
        assert_eq!(options[0], "ro", "{dest}: {options:?}");
        assert_eq!(size, Some(mem_total()), "{dest}: node allocatable");
    }
    // The mount that asked for readOnly: false is named in a warning.
    let events = d.pod_events("limited");
    assert!(
        events.iter().any(|e| e["reason"] == "FieldNotHonoured"
            && e["message"]
                .as_str()
                .unwrap_or_default()
                .starts_with("spec.containers[0].volumeMounts[0].readOnly is ignored")),
        "{events:#?}"
    );
}
