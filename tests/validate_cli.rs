//! `podhost validate`, the real binary on real-world manifests: kubeadm's etcd and
//! kube-apiserver (written the way kubeadm writes them) and user-written ones. Checks
//! the exit status, the text for people and the `-o json` schema for tools. No daemon
//! is involved: validate reads files only.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/validate")
}

fn podhost(args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_podhost"))
        .args(["validate", "--node-name", "cp-1"])
        .args(args)
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn json(args: &[&str]) -> (i32, Vec<Value>) {
    let mut all = vec!["-o", "json"];
    all.extend_from_slice(args);
    let out = podhost(&all);
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    (out.status.code().unwrap(), v.as_array().unwrap().clone())
}

fn fixture(name: &str) -> String {
    fixtures().join(name).display().to_string()
}

#[test]
fn kubeadm_manifests_are_valid_and_every_field_is_accounted_for() {
    for name in ["etcd.yaml", "kube-apiserver.yaml"] {
        let out = podhost(&[&fixture(name)]);
        let t = text(&out);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: {t}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let pod = name.trim_end_matches(".yaml");
        assert!(
            t.starts_with(&format!("{} (pod {pod}): valid\n", fixture(name))),
            "{t}"
        );
        assert!(t.contains("  honoured  spec.containers[0].image\n"), "{t}");
        assert!(t.contains("  honoured  spec.hostNetwork\n"), "{t}");
        assert!(t.contains("  honoured  spec.priorityClassName\n"), "{t}");
        assert!(!t.contains("  error "), "{t}");
        // The summary counts the ignored lines (which ones depends on what this build
        // honours: the table in crates/source/src/fields.rs) and, on a host that does not
        // enforce every resource field (cgroup v1), the fields not enforced here.
        let ignored = t.lines().filter(|l| l.starts_with("  ignored ")).count();
        let not_enforced = t
            .lines()
            .filter(|l| l.starts_with("  not-enforced "))
            .count();
        let host_part = match not_enforced {
            0 => String::new(),
            1 => ", 1 field not enforced on this host".to_string(),
            n => format!(", {n} fields not enforced on this host"),
        };
        assert!(
            t.ends_with(&format!(
                "1 manifest, 0 with errors, {ignored} ignored fields{host_part}\n"
            )),
            "{t}"
        );
        // requests.cpu: honoured on a cgroup v2 host; on this v1/hybrid one its QoS
        // hierarchy is not enforced, and validate says so instead of "honoured".
        let cpu_line = t
            .lines()
            .find(|l| {
                l.ends_with("spec.containers[0].resources.requests.cpu")
                    || l.contains("spec.containers[0].resources.requests.cpu:")
            })
            .unwrap_or_else(|| panic!("{t}"));
        match podhost::runtime::node_cgroups::probe_host() {
            podhost::model::cgroup_enforcement::HostEnforcement::Full => {
                assert_eq!(
                    cpu_line, "  honoured  spec.containers[0].resources.requests.cpu",
                    "{t}"
                );
            }
            host => {
                eprintln!("host {host:?}: resource fields are checked as not enforced here");
                assert!(
                    cpu_line.starts_with("  not-enforced spec.containers[0].resources.requests.cpu: not enforced on this host"),
                    "{host:?}: {t}"
                );
            }
        }
    }
    let (code, verdicts) = json(&[&fixture("etcd.yaml")]);
    assert_eq!(code, 0);
    assert_eq!(verdicts.len(), 1);
    let v = &verdicts[0];
    assert_eq!(v["file"], fixture("etcd.yaml"));
    assert_eq!(v["pod"], "etcd");
    assert_eq!(v["errors"], serde_json::json!([]));
    let fields = v["fields"].as_array().unwrap();
    let find = |path: &str| {
        fields
            .iter()
            .find(|f| f["path"] == path)
            .unwrap_or_else(|| panic!("{path} not in {fields:#?}"))
    };
    assert_eq!(
        find("spec.containers[0].resources.requests.memory"),
        &serde_json::json!({"path": "spec.containers[0].resources.requests.memory", "status": "honoured", "reason": ""})
    );
    // `status: {}` and `creationTimestamp: null` ask for nothing: not listed.
    assert!(
        fields
            .iter()
            .all(|f| f["path"] != "status" && f["path"] != "metadata.creationTimestamp")
    );
    // Every field's status is one of four words, and every object has the same keys.
    for f in fields {
        let keys: Vec<&String> = f.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["path", "reason", "status"]);
        assert!(
            ["honoured", "ignored", "rejected", "not-enforced"]
                .contains(&f["status"].as_str().unwrap())
        );
        assert_eq!(f["status"] == "honoured", f["reason"] == "", "{f}");
    }
}

#[test]
fn a_users_mistakes_are_each_named_with_their_field_and_fail_the_run() {
    let out = podhost(&[&fixture("web-typos.yaml")]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    let q = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' (e.g. 500m, 0.5, 128Mi, 1G)";
    for line in [
        format!("{} (pod web): INVALID", fixture("web-typos.yaml")),
        format!("  error     spec.containers[0].resources.requests.cpu: invalid value \"1 core\": {q}"),
        format!("  error     spec.containers[0].resources.limits.memory: invalid value \"512MB\": {q}"),
        "  error     spec.containers[0].livenessProbe.httpGet.port: invalid value \"0\": must be between 1 and 65535, inclusive".to_string(),
        "  error     spec.containers[0].volumeMounts[0].name: invalid value \"htmll\": no volume of this name in spec.volumes; declare the volume or fix the name".to_string(),
        "  error     spec.ephemeralContainers: is not supported by podhost: ephemeral containers are added to a running pod (podhost debug), not written in a manifest".to_string(),
        "  honoured  spec.containers[0].ports".to_string(),
    ] {
        assert!(t.lines().any(|l| l == line), "no line {line:?} in:\n{t}");
    }
    // One line per problem: the refused field is not listed again as "rejected".
    assert_eq!(
        t.lines()
            .filter(|l| l.contains("spec.ephemeralContainers"))
            .count(),
        1,
        "{t}"
    );
    let (code, verdicts) = json(&[&fixture("web-typos.yaml")]);
    assert_eq!(code, 1);
    let errors = verdicts[0]["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 5, "{errors:#?}");
    assert_eq!(
        errors[2],
        serde_json::json!({
            "field": "spec.containers[0].livenessProbe.httpGet.port",
            "message": "invalid value \"0\": must be between 1 and 65535, inclusive"
        })
    );
}

#[test]
fn a_sysctl_name_that_is_a_path_is_an_error_with_its_field() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sysctl.yaml");
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: sysctl\nspec:\n  securityContext:\n    sysctls:\n    - {name: net.ipv4/../../kernel.core_pattern, value: core}\n    - {name: net.core.somaxconn, value: \"1\\nkernel.x=1\"}\n  containers:\n  - name: main\n    image: busybox\n",
    )
    .unwrap();
    let (code, verdicts) = json(&[file.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert_eq!(
        verdicts[0]["errors"],
        serde_json::json!([
            {
                "field": "spec.securityContext.sysctls[0].name",
                "message": "invalid value \"net.ipv4/../../kernel.core_pattern\": must have at most 253 characters and match regex ([a-z0-9]([-_a-z0-9]*[a-z0-9])?[./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?"
            },
            {
                "field": "spec.securityContext.sysctls[1].value",
                "message": "invalid value \"1\\nkernel.x=1\": must not contain a newline, carriage return or NUL character"
            }
        ])
    );
}

#[test]
fn a_directory_is_read_as_the_daemon_reads_it_and_one_bad_file_fails_it() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = std::fs::read_to_string(fixtures().join("etcd.yaml")).unwrap();
    std::fs::write(dir.path().join("a-etcd.yaml"), &etcd).unwrap();
    std::fs::write(dir.path().join("b-etcd-again.yaml"), &etcd).unwrap();
    std::fs::write(
        dir.path().join("c-deployment.yaml"),
        "apiVersion: apps/v1\nkind: Deployment\n",
    )
    .unwrap();
    std::fs::write(dir.path().join(".swp"), "garbage: [").unwrap();
    let (code, verdicts) = json(&[dir.path().to_str().unwrap()]);
    assert_eq!(code, 1);
    let files: Vec<&str> = verdicts
        .iter()
        .map(|v| v["file"].as_str().unwrap())
        .collect();
    let name = |f: &str| dir.path().join(f).display().to_string();
    assert_eq!(
        files,
        [
            name("a-etcd.yaml"),
            name("b-etcd-again.yaml"),
            name("c-deployment.yaml")
        ]
    );
    assert_eq!(verdicts[0]["errors"], serde_json::json!([]));
    assert_eq!(
        verdicts[1]["errors"][0]["message"],
        format!(
            "pod kube-system/etcd-cp-1 is already defined by {}; the daemon ignores this file, rename the pod or remove one of the files",
            name("a-etcd.yaml")
        )
    );
    assert_eq!(
        verdicts[2]["errors"],
        serde_json::json!([{
            "field": "",
            "message": "expected kind Pod, found kind Deployment; a static-pod manifest holds exactly one `kind: Pod`"
        }])
    );
    assert_eq!(verdicts[2]["pod"], Value::Null);
    assert_eq!(verdicts[2]["fields"], serde_json::json!([]));
}

#[test]
fn usage_errors_are_reported() {
    let out = podhost(&["-o", "yaml", &fixture("etcd.yaml")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown output format \"yaml\""));
    let missing = podhost(&["/nonexistent/podhost-validate.yaml"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        text(&missing).contains("cannot be read: No such file or directory"),
        "{}",
        text(&missing)
    );
}

#[test]
fn content_volumes_are_reported_read_only_and_every_memory_volume_with_its_size() {
    let file = fixture("web-volumes.yaml");
    let out = podhost(&[&file]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    let forced = "configMap, secret, downwardAPI and projected volumes are always mounted read-only, as the kubelet mounts them (CVE-2017-1002102)";
    for line in [
        format!("  ignored   spec.containers[0].volumeMounts[0].readOnly: {forced}"),
        "  honoured  spec.containers[0].volumeMounts[3].readOnly".to_string(),
        "  honoured  spec.containers[1].volumeMounts[0].readOnly".to_string(),
        format!("  note      spec.containers[0].volumeMounts[0]: mounted read-only although readOnly is false: \"config\" is a configMap volume; {forced}"),
        format!("  note      spec.containers[0].volumeMounts[1]: mounted read-only although readOnly is not set: \"tls\" is a secret volume; {forced}"),
        // The sidecar has no memory limit: the pod has none, and a content volume
        // is as large as the node's allocatable memory.
        "  note      spec.volumes[0].configMap: a tmpfs of at most the node's allocatable memory (the kubelet's size of a memory-backed volume when the pod sets no smaller bound: a memory limit on every container, or an emptyDir sizeLimit)".to_string(),
        "  note      spec.volumes[2].emptyDir: a tmpfs of at most 16Mi (its sizeLimit; the node's allocatable memory if that is smaller)".to_string(),
    ] {
        assert!(t.lines().any(|l| l == line), "no line {line:?} in:\n{t}");
    }
    // Mounts that say readOnly: true themselves, and disk-backed volumes, get no note.
    assert!(!t.contains("note      spec.containers[1]"), "{t}");
    assert!(!t.contains("note      spec.volumes[3]"), "{t}");
    let (code, verdicts) = json(&[&file]);
    assert_eq!(code, 0);
    let notes = verdicts[0]["notes"].as_array().unwrap();
    let fields: Vec<&str> = notes.iter().map(|n| n["field"].as_str().unwrap()).collect();
    assert_eq!(
        fields,
        [
            "spec.containers[0].volumeMounts[0]",
            "spec.containers[0].volumeMounts[1]",
            "spec.volumes[0].configMap",
            "spec.volumes[1].secret",
            "spec.volumes[2].emptyDir",
        ]
    );
    for n in notes {
        let keys: Vec<&String> = n.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["field", "message"]);
    }

    // Every container limited: the pod's limit bounds the content volumes.
    let dir = tempfile::tempdir().unwrap();
    let limited = std::fs::read_to_string(fixtures().join("web-volumes.yaml"))
        .unwrap()
        .replace(
            "    image: busybox:1.36\n",
            "    image: busybox:1.36\n    resources:\n      limits: {memory: 64Mi}\n",
        );
    let path = dir.path().join("limited.yaml");
    std::fs::write(&path, limited).unwrap();
    let t = text(&podhost(&[path.to_str().unwrap()]));
    assert!(
        t.lines().any(|l| l
            == "  note      spec.volumes[1].secret: a tmpfs of at most 192Mi (the pod's memory limit; the node's allocatable memory if that is smaller)"),
        "{t}"
    );
}

/// A typo'd field: one error line, with the field it was probably meant to be, and no
/// "ignored" line for it besides.
#[test]
fn a_typo_is_one_error_line_with_the_field_it_meant() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("typos.yaml");
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: t\n  lables: {app: t}\nspec:\n  restartpolicy: Never\n  containers:\n  - name: main\n    image: busybox\n    comand: [sh]\n    imagePullPolcy: Never\n    frobnicate: 1\n",
    )
    .unwrap();
    let out = podhost(&[file.to_str().unwrap()]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    for line in [
        "  error     metadata.lables: unknown field (did you mean \"labels\"?); check the spelling against the v1 Pod API (`kubectl explain pod.spec`)",
        "  error     spec.restartpolicy: unknown field (did you mean \"restartPolicy\"?); check the spelling against the v1 Pod API (`kubectl explain pod.spec`)",
        "  error     spec.containers[0].comand: unknown field (did you mean \"command\"?); check the spelling against the v1 Pod API (`kubectl explain pod.spec`)",
        "  error     spec.containers[0].imagePullPolcy: unknown field (did you mean \"imagePullPolicy\"?); check the spelling against the v1 Pod API (`kubectl explain pod.spec`)",
        "  error     spec.containers[0].frobnicate: unknown field; check the spelling against the v1 Pod API (`kubectl explain pod.spec`)",
    ] {
        assert!(t.lines().any(|l| l == line), "no line {line:?} in:\n{t}");
    }
    for field in [
        "lables",
        "restartpolicy",
        "comand",
        "imagePullPolcy",
        "frobnicate",
    ] {
        assert_eq!(
            t.lines().filter(|l| l.contains(field)).count(),
            1,
            "{field} once:\n{t}"
        );
    }
    assert!(
        t.ends_with("1 manifest, 1 with errors, 0 ignored fields\n"),
        "{t}"
    );
}

/// The text output in full (tests/fixtures/validate/one-typo.txt, written from the
/// format docs/static-pods.md and the README describe: the verdict line, each error
/// with its field, then each field set with its status, then the totals).
#[test]
fn the_text_output_is_the_documented_format_line_for_line() {
    let path = fixture("one-typo.yaml");
    let out = podhost(&[&path]);
    assert_eq!(out.status.code(), Some(1));
    let golden = std::fs::read_to_string(fixtures().join("one-typo.txt"))
        .unwrap()
        .replace("FILE", &path);
    assert_eq!(text(&out), golden);
}
