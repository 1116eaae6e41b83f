//! `describe pod` against kubectl's layout: the expected text (golden/describe-pod.txt)
//! was written from kubectl's describer — its sections, order and tabwriter columns
//! (padding 2, a column aligned over the lines that share it) — not from this output.

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;

use super::render_describe;
use crate::status::{Event, EventKind};

fn at(text: &str) -> DateTime<Utc> {
    text.parse().unwrap()
}

fn pod() -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": "web-n1", "namespace": "team-a", "uid": "1234",
            "labels": {"tier": "front", "app": "web"},
            "annotations": {"kubernetes.io/config.source": "file"}
        },
        "spec": {
            "nodeName": "n1",
            "priority": 2000001000,
            "priorityClassName": "system-node-critical",
            "initContainers": [{"name": "setup", "image": "busybox", "command": ["sh", "-c", "echo hi"]}],
            "containers": [{
                "name": "nginx", "image": "nginx:1.27",
                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "250m", "memory": "64Mi"}},
                "readinessProbe": {"httpGet": {"path": "/healthz", "port": 80}, "periodSeconds": 5},
                "env": [
                    {"name": "MODE", "value": "prod"},
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
                ],
                "volumeMounts": [
                    {"name": "conf", "mountPath": "/etc/nginx/conf.d", "readOnly": true},
                    {"name": "data", "mountPath": "/data"}
                ]
            }],
            "volumes": [
                {"name": "data", "emptyDir": {}},
                {"name": "conf", "hostPath": {"path": "/srv/conf", "type": "Directory"}}
            ],
            "tolerations": [{"operator": "Exists", "effect": "NoExecute"}]
        },
        "status": {
            "phase": "Running", "hostIP": "192.168.1.10", "podIP": "10.88.0.5",
            "podIPs": [{"ip": "10.88.0.5"}], "startTime": "2026-11-30T10:00:00Z", "qosClass": "Burstable",
            "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}],
            "initContainerStatuses": [{
                "name": "setup", "ready": true, "restartCount": 0, "image": "busybox",
                "imageID": "sha256:aaa", "containerID": "podhost://c1",
                "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                    "startedAt": "2026-11-30T10:00:01Z", "finishedAt": "2026-11-30T10:00:02Z"}}
            }],
            "containerStatuses": [{
                "name": "nginx", "ready": true, "restartCount": 1, "image": "nginx:1.27",
                "imageID": "sha256:bbb", "containerID": "podhost://c2",
                "state": {"running": {"startedAt": "2026-11-30T10:00:03Z"}},
                "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                    "startedAt": "2026-11-30T09:59:00Z", "finishedAt": "2026-11-30T09:59:30Z"}}
            }]
        }
    }))
    .unwrap()
}

#[test]
fn describe_pod_prints_kubectls_sections_in_its_layout() {
    let events = [Event {
        time: at("2026-11-30T10:00:03Z"),
        kind: EventKind::Normal,
        reason: "Started".into(),
        object: "pod/web-n1/nginx".into(),
        message: "Started container nginx".into(),
        namespace: Some("team-a".into()),
    }];
    let text = render_describe(&pod(), &events, at("2026-11-30T10:05:03Z"));
    let golden = include_str!("../golden/describe-pod.txt");
    for (i, (got, want)) in text.lines().zip(golden.lines()).enumerate() {
        assert_eq!(got, want, "line {}", i + 1);
    }
    assert_eq!(text, golden);
}

#[test]
fn a_pod_without_status_volumes_or_events_says_none_where_kubectl_does() {
    let bare: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}
    }))
    .unwrap();
    let text = render_describe(&bare, &[], at("2026-11-30T10:05:03Z"));
    assert_eq!(
        text,
        "Name:         p\n\
         Namespace:    default\n\
         Node:         <none>\n\
         Labels:       <none>\n\
         Annotations:  <none>\n\
         Status:       \n\
         IP:           \n\
         IPs:          <none>\n\
         Containers:\n  \
         c:\n    \
         Image:        busybox\n    \
         Port:         <none>\n    \
         Host Port:    <none>\n    \
         Environment:  <none>\n    \
         Mounts:       <none>\n\
         Volumes:          <none>\n\
         QoS Class:        BestEffort\n\
         Node-Selectors:   <none>\n\
         Tolerations:      <none>\n\
         Events:           <none>\n"
    );
}

#[test]
fn describe_node_prints_kubectls_sections_pods_and_totals_in_its_layout() {
    let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": "n1", "creationTimestamp": "2026-11-30T09:00:00Z",
            "labels": {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": "n1"},
            "annotations": {"podhost.io/pod-network": "bridge"}
        },
        "spec": {},
        "status": {
            "conditions": [{
                "type": "MemoryPressure", "status": "False",
                "lastHeartbeatTime": "2026-11-30T10:04:00Z", "lastTransitionTime": "2026-11-30T09:00:00Z",
                "reason": "KubeletHasSufficientMemory", "message": "kubelet has sufficient memory available"
            }],
            "addresses": [{"type": "InternalIP", "address": "192.168.1.10"}, {"type": "Hostname", "address": "n1"}],
            "capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"},
            "allocatable": {"cpu": "2", "memory": "3840Mi", "pods": "110"},
            "nodeInfo": {
                "machineID": "m", "systemUUID": "u", "bootID": "b", "kernelVersion": "6.1.0",
                "osImage": "Debian GNU/Linux 12 (bookworm)", "operatingSystem": "linux",
                "architecture": "amd64", "containerRuntimeVersion": "podhost://0.1.0",
                "kubeletVersion": "v1.33.0", "kubeProxyVersion": ""
            }
        }
    }))
    .unwrap();
    let pod =
        |ns: &str, name: &str, created: &str, phase: &str, resources: serde_json::Value| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": ns, "creationTimestamp": created},
                "spec": {"containers": [{"name": "c", "image": "busybox", "resources": resources}]},
                "status": {"phase": phase}
            }))
            .unwrap()
        };
    let pods = [
        pod(
            "default",
            "web",
            "2026-11-30T10:00:00Z",
            "Running",
            serde_json::json!({"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "128Mi"}}),
        ),
        pod(
            "default",
            "done",
            "2026-11-30T08:00:00Z",
            "Succeeded",
            serde_json::json!({"requests": {"cpu": "1"}}),
        ),
        pod(
            "kube-system",
            "etcd",
            "2026-11-30T09:00:00Z",
            "Running",
            serde_json::json!({}),
        ),
    ];
    let events = [Event {
        time: at("2026-11-30T09:00:00Z"),
        kind: EventKind::Normal,
        reason: "Starting".into(),
        object: "node/n1".into(),
        message: "Starting podhost".into(),
        namespace: None,
    }];
    let text = super::render_node(&node, &pods, &events, at("2026-11-30T10:05:00Z"));
    let golden = include_str!("../golden/describe-node.txt");
    for (i, (got, want)) in text.lines().zip(golden.lines()).enumerate() {
        assert_eq!(got, want, "line {}", i + 1);
    }
    assert_eq!(text, golden);
}
