//! podhost's `get` against Kubernetes' own kubectl, on the same pods: a podhost node of
//! a live control plane runs pods in two namespaces, and kubectl (asking the API
//! server) and podhost (asking its own socket) print them with the same options. The
//! outputs must be the same text — kubectl's is the expected answer, not a recording.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::Duration;

use crate::common_apiserver::{self, ControlPlane, Options, control_plane, eventually};
use crate::common_registry::require_root;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

const NODE: &str = "parity-node";
const NODES: &[&str] = &[NODE];
const WAIT: Duration = Duration::from_secs(90);

fn plane() -> &'static ControlPlane {
    control_plane(&Options::api_server(NODES))
}

fn pod(name: &str, team: &str, containers: &[&str]) -> Pod {
    let containers: Vec<serde_json::Value> = containers
        .iter()
        .map(|c| {
            json!({"name": c, "image": "localhost/busybox:latest", "imagePullPolicy": "Never",
                   "command": ["sleep", "3600"]})
        })
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"team": team}},
        "spec": {
            "nodeName": NODE,
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 1,
            "containers": containers
        }
    }))
    .unwrap()
}

fn stdout(out: std::process::Output, who: &str) -> String {
    assert!(
        out.status.success(),
        "{who}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn podhost_get_prints_what_kubectl_prints_for_the_same_pods() {
    require_root();
    let cp = plane();
    let admin = cp.admin().await;
    let d = cp.node_daemon(NODE, &[]);
    let mut apis = Vec::new();
    for (ns, pods) in [
        (
            "parity-a",
            vec![
                pod("dup", "a", &["main"]),
                pod("solo", "a", &["web", "log"]),
            ],
        ),
        ("parity-b", vec![pod("dup", "b", &["main"])]),
    ] {
        common_apiserver::namespace(&admin, ns).await;
        let api: Api<Pod> = Api::namespaced(admin.clone(), ns);
        for p in pods {
            api.create(&PostParams::default(), &p).await.unwrap();
        }
        apis.push(api);
    }
    eventually("every pod ready in the API server", WAIT, || async {
        for api in &apis {
            for p in api.list(&Default::default()).await.ok()?.items {
                let statuses = p.status?.container_statuses?;
                if statuses.is_empty() || !statuses.iter().all(|s| s.ready) {
                    return None;
                }
            }
        }
        Some(())
    })
    .await;
    let kubectl = |args: &[&str]| {
        stdout(
            Command::new(cp.kubectl())
                .arg("--kubeconfig")
                .arg(cp.admin_kubeconfig())
                .args(args)
                .output()
                .unwrap(),
            &format!("kubectl {args:?}"),
        )
    };
    let podhost = |args: &[&str]| stdout(d.cli(args), &format!("podhost {args:?}"));

    let same = [
        vec!["get", "pods", "-n", "parity-a", "-o", "name"],
        vec!["get", "pods", "-A", "-l", "team=b", "-o", "name"],
        vec![
            "get",
            "pods",
            "-n",
            "parity-a",
            "-l",
            "team in (a,c)",
            "-o",
            "name",
        ],
        vec![
            "get",
            "pods",
            "-A",
            "-o",
            "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {.spec.nodeName} {.spec.containers[*].name} {.metadata.labels.team}{\"\\n\"}{end}",
        ],
        vec![
            "get",
            "pods",
            "-A",
            "-o",
            "custom-columns=NS:.metadata.namespace,NAME:.metadata.name,CONTAINERS:.spec.containers[*].name,IMAGE:.spec.containers[0].image,GATES:.spec.readinessGates",
        ],
        vec![
            "get",
            "pods",
            "-n",
            "parity-b",
            "--no-headers",
            "-o",
            "custom-columns=N:.metadata.name",
        ],
        vec![
            "get",
            "pod",
            "dup",
            "-n",
            "parity-b",
            "-o",
            "jsonpath={.kind} {.metadata.labels}",
        ],
        vec![
            "get",
            "pods",
            "-n",
            "parity-a",
            "-o",
            "jsonpath={.items[?(@.metadata.name==\"solo\")].spec.containers[1].name}",
        ],
    ];
    // Both sides have every pod running (podhost's view may trail by a sync).
    eventually("podhost lists the three pods", WAIT, || async {
        (podhost(&["get", "pods", "-A", "-o", "name"])
            .lines()
            .count()
            == 3)
            .then_some(())
    })
    .await;
    for args in &same {
        assert_eq!(podhost(args), kubectl(args), "{args:?}");
    }

    // The tables: the same columns, and the same NAMESPACE NAME READY STATUS RESTARTS
    // cells (AGE may differ by the second between the two calls, and with it the
    // columns' widths).
    for args in [
        vec!["get", "pods", "-A"],
        vec!["get", "pods", "-A", "-o", "wide", "--show-labels"],
    ] {
        let (ours, theirs) = (podhost(&args), kubectl(&args));
        let header = |t: &str| -> Vec<String> {
            let line = t.lines().next().unwrap_or_default();
            line.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect()
        };
        assert_eq!(header(&ours), header(&theirs), "{args:?}");
        let cells = |t: &str| -> Vec<Vec<String>> {
            t.lines()
                .skip(1)
                .map(|l| l.split_whitespace().take(5).map(str::to_string).collect())
                .collect()
        };
        assert_eq!(cells(&ours), cells(&theirs), "{args:?}:\n{ours}\n{theirs}");
    }

    // describe: kubectl's describer against podhost's, on the same pod, down to its
    // events (which differ: kubectl shows the API server's, podhost its own). The
    // Annotations lines differ too: podhost shows the node's view of the pod, with the
    // `kubernetes.io/config.seen` and `config.source` annotations every pod gets on its
    // node (the kubelet's /pods shows them as well); they are left out of both.
    for args in [
        vec!["describe", "pod", "solo", "-n", "parity-a"],
        vec!["describe", "pod", "parity-b/dup"],
    ] {
        let theirs = if args[2].contains('/') {
            let (ns, name) = args[2].split_once('/').unwrap();
            kubectl(&["describe", "pod", name, "-n", ns])
        } else {
            kubectl(&args)
        };
        let ours = podhost(&args);
        let before_events = |t: &str| -> String {
            t.lines()
                .take_while(|l| !l.starts_with("Events:"))
                .filter(|l| !l.starts_with("Annotations:") && !l.contains("kubernetes.io/config."))
                .map(|l| format!("{l}\n"))
                .collect()
        };
        assert_eq!(before_events(&ours), before_events(&theirs), "{args:?}");
    }
    drop(d);
}
