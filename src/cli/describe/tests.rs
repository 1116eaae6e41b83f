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
