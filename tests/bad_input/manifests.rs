//! Bad manifests in the watched directory: each is reported as a `FailedToLoadManifest`
//! node event naming the file and the field, and nothing else changes.

use std::path::Path;
use std::time::Duration;

use super::common::*;
use super::{HEALTHY_FILE, Healthy, Outcome, print_outcomes};

/// A sysctl name that climbs from the (namespaced) net tree to a node-wide sysctl: with
/// `--allowed-unsafe-sysctls 'net.*'` a prefix match lets it through, and the runtime's
/// `/proc/sys/` + name would reach the host's core_pattern.
const SYSCTL_TRAVERSAL: &str = "net.ipv4/../../kernel.core_pattern";

/// What the traversal would write: a plain file name (never a pipe), harmless if a
/// regression lets it through; the guard below puts the host's value back.
const CORE_PATTERN_PROBE: &str = "core.podhost-corpus";

const CORE_PATTERN: &str = "/proc/sys/kernel/core_pattern";

/// The host's core_pattern as the test found it, written back on drop if a corpus
/// entry changed it (so a failing run does not leave the machine altered).
struct HostCorePattern(String);

impl HostCorePattern {
    fn record() -> Self {
        Self(std::fs::read_to_string(CORE_PATTERN).unwrap())
    }

    fn assert_unchanged(&self) {
        let now = std::fs::read_to_string(CORE_PATTERN).unwrap();
        assert_eq!(
            now, self.0,
            "the host's {CORE_PATTERN} changed: a pod's sysctl name reached it"
        );
    }
}

impl Drop for HostCorePattern {
    fn drop(&mut self) {
        if std::fs::read_to_string(CORE_PATTERN).is_ok_and(|now| now != self.0) {
            let _ = std::fs::write(CORE_PATTERN, self.0.trim_end());
        }
    }
}

/// How a corpus entry is put into the manifest directory.
enum Entry {
    Text(String),
    Bytes(Vec<u8>),
    Symlink(&'static str),
    Dir,
    Fifo,
}

struct Case {
    kind: &'static str,
    file: &'static str,
    entry: Entry,
    /// Every fragment must be in the event's message (after `<path>: `).
    expect: &'static [&'static str],
}

fn pod(name: &str, spec_extra: &str, container_extra: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n{spec_extra}  containers:\n  - name: main\n    image: localhost/busybox:latest\n    imagePullPolicy: Never\n    command: [sleep, \"100\"]\n{container_extra}"
    )
}

/// Bytes no text editor writes: a fixed pseudo-random sequence (xorshift).
fn garbage(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24).to_le_bytes()[0]
        })
        .collect()
}

/// The "billion laughs": nine levels of aliases, each ten times the one below.
fn billion_laughs() -> String {
    let mut y = String::from(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: laughs\n  labels:\n    a0: &a0 lol\n",
    );
    for i in 1..10 {
        let prev = format!("*a{}", i - 1);
        let list = [prev.as_str(); 10].join(", ");
        y.push_str(&format!("    a{i}: &a{i} [{list}]\n"));
    }
    y.push_str("spec:\n  containers:\n  - name: main\n    image: localhost/busybox:latest\n    args: *a9\n");
    y
}

fn cases() -> Vec<Case> {
    use Entry::*;
    let c = |kind, file, entry, expect| Case {
        kind,
        file,
        entry,
        expect,
    };
    let mut huge = pod("huge", "", "");
    huge.push_str("# ");
    huge.push_str(&"x".repeat(11 << 20));
    huge.push('\n');
    let mut not_utf8 = b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: \"caf".to_vec();
    not_utf8.extend_from_slice(&[0xe9, 0xff]);
    not_utf8.extend_from_slice(b"\"\n");
    vec![
        c(
            "invalid YAML",
            "invalid-yaml.yaml",
            Text("apiVersion: v1\nkind: Pod\nmetadata: [unclosed\n".into()),
            &["invalid YAML", "fix the syntax"],
        ),
        c(
            "duplicate container names",
            "dup-containers.yaml",
            Text(pod(
                "dupc",
                "",
                "  - name: main\n    image: localhost/busybox:latest\n",
            )),
            &[
                "spec.containers[1].name: duplicate container name \"main\" (also used by spec.containers[0])",
            ],
        ),
        c(
            "bad quantity",
            "bad-quantity.yaml",
            Text(pod(
                "qty",
                "",
                "    resources:\n      limits:\n        memory: lots\n",
            )),
            &[
                "spec.containers[0].resources.limits.memory: invalid value \"lots\": quantities must match",
            ],
        ),
        c(
            "negative quantity",
            "negative-cpu.yaml",
            Text(pod(
                "negcpu",
                "",
                "    resources:\n      requests:\n        cpu: \"-1\"\n",
            )),
            &[
                "spec.containers[0].resources.requests.cpu: invalid value \"-1\": must be greater than or equal to 0",
            ],
        ),
        c(
            "request above limit",
            "request-over-limit.yaml",
            Text(pod(
                "overlimit",
                "",
                "    resources:\n      requests:\n        memory: 2Gi\n      limits:\n        memory: 1Gi\n",
            )),
            &[
                "spec.containers[0].resources.requests.memory: invalid value \"2Gi\": must be less than or equal to memory limit of 1Gi",
            ],
        ),
        c(
            "unknown field (typo)",
            "unknown-field.yaml",
            Text(pod("typo", "  restartPolcy: Never\n", "")),
            &[
                "spec.restartPolcy: unknown field (did you mean \"restartPolicy\"?)",
                "kubectl explain",
            ],
        ),
        c(
            "huge file (11 MiB)",
            "huge.yaml",
            Text(huge),
            &["more than the limit of 10485760 bytes"],
        ),
        c(
            "binary garbage",
            "garbage.yaml",
            Bytes(garbage(4096)),
            &["invalid YAML"],
        ),
        c(
            "not UTF-8",
            "latin1.yaml",
            Bytes(not_utf8),
            &["invalid YAML"],
        ),
        c(
            "symlink to /dev/zero",
            "zero.yaml",
            Symlink("/dev/zero"),
            &["is not a regular file; remove it from the manifest directory"],
        ),
        c(
            "dangling symlink",
            "dangling.yaml",
            Symlink("/nonexistent/podhost-corpus"),
            &["cannot be read: No such file or directory"],
        ),
        c(
            "directory named like a manifest",
            "dir.yaml",
            Dir,
            &["is a directory; subdirectories are not read"],
        ),
        c("FIFO", "fifo.yaml", Fifo, &["is not a regular file"]),
        c(
            "empty file",
            "empty.yaml",
            Text(String::new()),
            &["is empty; write a v1 Pod manifest"],
        ),
        c(
            "only comments",
            "comments.yaml",
            Text("# nothing here\n---\n# nor here\n".into()),
            &["is empty"],
        ),
        c(
            "multi-document YAML",
            "multi-doc.yaml",
            Text(format!("{}---\n{}", pod("one", "", ""), pod("two", "", ""))),
            &["holds 2 YAML documents, expected kind Pod (one Pod per file)"],
        ),
        c(
            "wrong apiVersion",
            "api-version.yaml",
            Text(pod("apiv", "", "").replace("apiVersion: v1", "apiVersion: apps/v1")),
            &["apiVersion: expected \"v1\", found \"apps/v1\""],
        ),
        c(
            "wrong kind",
            "deployment.yaml",
            Text(pod("dep", "", "").replace("kind: Pod", "kind: Deployment")),
            &["expected kind Pod, found kind Deployment"],
        ),
        c(
            "a List",
            "list.yaml",
            Text(format!(
                "apiVersion: v1\nkind: List\nitems:\n- {}\n",
                serde_json::to_string(
                    &serde_yaml_ng::from_str::<serde_json::Value>(&pod("inlist", "", "")).unwrap()
                )
                .unwrap()
            )),
            &["expected kind Pod, found kind List"],
        ),
        c(
            "a bare string",
            "string.yaml",
            Text("just some words\n".into()),
            &["expected kind Pod, found a YAML string"],
        ),
        c(
            "missing metadata.name",
            "no-name.yaml",
            Text(pod("x", "", "").replace("  name: x\n", "  labels: {a: b}\n")),
            &["metadata.name: field is required; give the pod a name"],
        ),
        c(
            "missing image",
            "no-image.yaml",
            Text(pod("noimg", "", "").replace("    image: localhost/busybox:latest\n", "")),
            &["spec.containers[0]: field \"image\" is required; add the image to run"],
        ),
        c(
            "no containers",
            "no-containers.yaml",
            Text(
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: empty\nspec:\n  containers: []\n"
                    .into(),
            ),
            &["spec.containers: at least one container is required"],
        ),
        c(
            "invalid pod name (DNS-1123)",
            "bad-name.yaml",
            Text(pod("Web_1", "", "")),
            &["metadata.name: invalid value \"Web_1\": must be a DNS-1123 subdomain"],
        ),
        c(
            "invalid container name",
            "bad-cname.yaml",
            Text(pod("cname", "", "").replace("- name: main", "- name: Main.1")),
            &["spec.containers[0].name: invalid value \"Main.1\": must be a DNS-1123 label"],
        ),
        c(
            "invalid namespace",
            "bad-ns.yaml",
            Text(
                pod("ns", "", "").replace("  name: ns\n", "  name: ns\n  namespace: Kube_System\n"),
            ),
            &["metadata.namespace: invalid value \"Kube_System\""],
        ),
        c(
            "bad restartPolicy",
            "restart-policy.yaml",
            Text(pod("rp", "  restartPolicy: Sometimes\n", "")),
            &[
                "spec.restartPolicy: invalid value \"Sometimes\": must be one of Always, OnFailure, Never",
            ],
        ),
        c(
            "bad imagePullPolicy",
            "pull-policy.yaml",
            Text(pod("pp", "", "").replace("imagePullPolicy: Never", "imagePullPolicy: Sometimes")),
            &["spec.containers[0].imagePullPolicy: invalid value \"Sometimes\""],
        ),
        c(
            "port out of range",
            "bad-port.yaml",
            Text(pod("port", "", "    ports:\n    - containerPort: 70000\n")),
            &[
                "spec.containers[0].ports[0].containerPort: invalid value \"70000\": must be between 1 and 65535, inclusive",
            ],
        ),
        c(
            "unknown port protocol",
            "bad-proto.yaml",
            Text(pod(
                "proto",
                "",
                "    ports:\n    - containerPort: 80\n      protocol: ICMP\n",
            )),
            &[
                "spec.containers[0].ports[0].protocol: invalid value \"ICMP\": must be one of TCP, UDP, SCTP",
            ],
        ),
        c(
            "env name with '='",
            "bad-env.yaml",
            Text(pod(
                "env",
                "",
                "    env:\n    - name: A=B\n      value: c\n",
            )),
            &[
                "spec.containers[0].env[0].name: invalid value \"A=B\": must be printable ASCII characters other than '='",
            ],
        ),
        c(
            "quantity with a unit the API does not know",
            "bad-unit.yaml",
            Text(pod(
                "unit",
                "",
                "    resources:\n      limits:\n        memory: 512MB\n        cpu: 1 core\n",
            )),
            &[
                "spec.containers[0].resources.limits.cpu: invalid value \"1 core\": quantities must match",
                "spec.containers[0].resources.limits.memory: invalid value \"512MB\": quantities must match",
            ],
        ),
        c(
            "quantity with an overflowing exponent",
            "huge-exponent.yaml",
            Text(pod(
                "hugeexp",
                "",
                "    resources:\n      limits:\n        memory: 1e400\n",
            )),
            &[
                "spec.containers[0].resources.limits.memory: invalid value \"1e400\": is too large: at most 9223372036854775807 units",
            ],
        ),
        c(
            "probe on port 0",
            "probe-port.yaml",
            Text(pod(
                "probeport",
                "",
                "    livenessProbe:\n      httpGet: {port: 0}\n",
            )),
            &[
                "spec.containers[0].livenessProbe.httpGet.port: invalid value \"0\": must be between 1 and 65535, inclusive",
            ],
        ),
        c(
            "mount of an undeclared volume",
            "no-volume.yaml",
            Text(pod(
                "novol",
                "",
                "    volumeMounts:\n    - {name: data, mountPath: /data}\n",
            )),
            &[
                "spec.containers[0].volumeMounts[0].name: invalid value \"data\": no volume of this name in spec.volumes",
            ],
        ),
        c(
            "hostPath type typo",
            "hostpath-type.yaml",
            Text(pod(
                "hptype",
                "  volumes:\n  - name: data\n    hostPath: {path: /var/lib/x, type: Dir}\n",
                "",
            )),
            &[
                "spec.volumes[0].hostPath.type: invalid value \"Dir\": must be one of , DirectoryOrCreate, Directory",
            ],
        ),
        c(
            "restartPolicy on a regular container",
            "container-restart.yaml",
            Text(pod("crp", "", "    restartPolicy: Always\n")),
            &[
                "spec.containers[0].restartPolicy: invalid value \"Always\": may not be set on a regular container",
            ],
        ),
        c(
            "activeDeadlineSeconds 0",
            "deadline.yaml",
            Text(pod("deadline", "  activeDeadlineSeconds: 0\n", "")),
            &[
                "spec.activeDeadlineSeconds: invalid value \"0\": must be between 1 and 2147483647, inclusive",
            ],
        ),
        c(
            "ephemeral container in a manifest",
            "ephemeral.yaml",
            Text(pod(
                "eph",
                "  ephemeralContainers:\n  - name: debug\n    image: localhost/busybox:latest\n",
                "",
            )),
            &[
                "spec.ephemeralContainers: is not supported by podhost: ephemeral containers are added to a running pod (podhost debug)",
            ],
        ),
        c(
            "wrong type (string for a list)",
            "wrong-type.yaml",
            Text(pod("wt", "", "").replace("command: [sleep, \"100\"]", "command: sleep 100")),
            &["spec.containers[0]", "fix the value"],
        ),
        c(
            "negative grace period",
            "grace.yaml",
            Text(pod("grace", "  terminationGracePeriodSeconds: -5\n", "")),
            &[
                "spec.terminationGracePeriodSeconds: invalid value \"-5\": must be 0 or more seconds",
            ],
        ),
        c(
            "billion laughs (aliases)",
            "laughs.yaml",
            Text(billion_laughs()),
            &["invalid YAML"],
        ),
        c(
            "deep nesting",
            "deep.yaml",
            Text(format!(
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: deep\n  labels: {}{}\n",
                "[".repeat(20_000),
                "]".repeat(20_000)
            )),
            &["invalid YAML", "recursion limit exceeded"],
        ),
        c(
            "sysctl name climbing out of /proc/sys/net",
            "sysctl-traversal.yaml",
            Text(pod(
                "sysctltraversal",
                &format!(
                    "  securityContext:\n    sysctls:\n    - {{name: {SYSCTL_TRAVERSAL}, value: {CORE_PATTERN_PROBE}}}\n"
                ),
                "",
            )),
            &[
                "spec.securityContext.sysctls[0].name: invalid value \"net.ipv4/../../kernel.core_pattern\": must have at most 253 characters and match regex",
            ],
        ),
        c(
            "sysctl value with a newline",
            "sysctl-newline.yaml",
            Text(pod(
                "sysctlnewline",
                "  securityContext:\n    sysctls:\n    - {name: net.core.somaxconn, value: \"1\\nkernel.core_pattern=x\"}\n",
                "",
            )),
            &[
                "spec.securityContext.sysctls[0].value: invalid value \"1\\nkernel.core_pattern=x\": must not contain a newline, carriage return or NUL character",
            ],
        ),
        c(
            "same pod as another file",
            "zz-healthy-again.yaml",
            Text(busybox_pod("healthy", "", "", "sleep 1")),
            &[
                "pod default/healthy-",
                "is already defined by",
                HEALTHY_FILE,
            ],
        ),
    ]
}

fn put(dir: &Path, case: &Case) {
    let path = dir.join(case.file);
    let tmp = dir.join(format!(".{}.tmp", case.file));
    match &case.entry {
        Entry::Text(t) => {
            std::fs::write(&tmp, t).unwrap();
            std::fs::rename(&tmp, &path).unwrap();
        }
        Entry::Bytes(b) => {
            std::fs::write(&tmp, b).unwrap();
            std::fs::rename(&tmp, &path).unwrap();
        }
        Entry::Symlink(target) => std::os::unix::fs::symlink(target, &path).unwrap(),
        Entry::Dir => std::fs::create_dir(&path).unwrap(),
        Entry::Fifo => {
            nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap()
        }
    }
}

#[test]
fn bad_manifests_are_reported_by_file_and_field_and_disturb_nothing() {
    require_root();
    let core_pattern = HostCorePattern::record();
    assert_ne!(core_pattern.0.trim(), CORE_PATTERN_PROBE);
    // `net.*` allowed: the traversal must be refused for its syntax, not its prefix.
    let d = TestDaemon::start_with(&["--allowed-unsafe-sysctls=net.*"]);
    let healthy = Healthy::start(&d);
    let cases = cases();
    for case in &cases {
        put(&d.manifests, case);
    }
    // One event per file, each starting with the file's path.
    let prefix = |case: &Case| format!("manifest {}: ", d.manifests.join(case.file).display());
    let messages = wait_until(Duration::from_secs(30), "an event per bad manifest", || {
        let events: Vec<String> = d
            .node_events()
            .into_iter()
            .filter(|e| e["reason"] == "FailedToLoadManifest")
            .filter_map(|e| e["message"].as_str().map(String::from))
            .collect();
        let found: Vec<Option<String>> = cases
            .iter()
            .map(|c| events.iter().find(|m| m.starts_with(&prefix(c))).cloned())
            .collect();
        found
            .iter()
            .all(Option::is_some)
            .then(|| found.into_iter().flatten().collect::<Vec<_>>())
    });
    core_pattern.assert_unchanged();
    let messages = messages.unwrap_or_else(|| {
        panic!(
            "not every bad manifest was reported; events: {:#?}\ndaemon log:\n{}",
            d.node_events(),
            d.daemon_log()
        )
    });
    let mut outcomes = Vec::new();
    let mut wrong = Vec::new();
    for (case, message) in cases.iter().zip(&messages) {
        for fragment in case.expect {
            if !message.contains(fragment) {
                wrong.push(format!(
                    "{} ({}): no {fragment:?} in {message:?}",
                    case.kind, case.file
                ));
            }
        }
        assert!(
            d.daemon_log().contains(&prefix(case)),
            "{}: the error is in the daemon log too",
            case.file
        );
        outcomes.push(Outcome {
            kind: case.kind,
            message: message.chars().take(200).collect(),
        });
    }
    print_outcomes("bad manifests", &outcomes);
    assert!(wrong.is_empty(), "unclear messages:\n{}", wrong.join("\n"));
    // A rescan later, still the same: nothing was started, nothing restarted.
    std::thread::sleep(Duration::from_secs(3));
    core_pattern.assert_unchanged();
    healthy.assert_undisturbed(&d, &["localhost/busybox:latest"]);
}
