//! The plan's API-server checks and the mounts it gives each container (no root).

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::*;

const VOLS: &str = "/r/pods/u1/volumes";
/// The node's allocatable memory the plans are made for.
const NODE_MEMORY: u64 = 3 << 30;

fn pod(spec: serde_json::Value) -> Pod {
    serde_json::from_value(
        json!({"metadata": {"name": "web-node", "namespace": "default"}, "spec": spec}),
    )
    .unwrap()
}

fn plan(spec: serde_json::Value) -> Result<PodVolumePlan, PlanError> {
    plan_pod(&pod(spec), Path::new(VOLS), NODE_MEMORY)
}

fn with_mounts(mounts: serde_json::Value) -> serde_json::Value {
    json!({
        "volumes": [
            {"name": "data", "emptyDir": {}},
            {"name": "etcd", "hostPath": {"path": "/var/lib/etcd", "type": "DirectoryOrCreate"}}
        ],
        "containers": [{"name": "c", "volumeMounts": mounts}]
    })
}

#[test]
fn every_kind_gets_its_place_and_each_container_its_mounts() {
    let p = plan(json!({
        "volumes": [
            {"name": "data", "emptyDir": {}},
            {"name": "mem", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
            {"name": "etcd", "hostPath": {"path": "/var/lib/etcd", "type": "DirectoryOrCreate"}},
            {"name": "cfg", "configMap": {"name": "x"}},
            {"name": "pvc", "persistentVolumeClaim": {"claimName": "x"}}
        ],
        "initContainers": [{"name": "init", "volumeMounts": [{"name": "data", "mountPath": "/work"}]}],
        "containers": [{"name": "c", "volumeMounts": [
            {"name": "data", "mountPath": "/data", "readOnly": true},
            {"name": "etcd", "mountPath": "/var/lib/etcd", "mountPropagation": "HostToContainer"},
            {"name": "cfg", "mountPath": "/etc/cfg", "subPath": "a/b"}
        ]}]
    }))
    .unwrap();
    let vol = |n: &str| p.volume(n).unwrap().clone();
    assert_eq!(
        vol("data").host_path,
        PathBuf::from(format!("{VOLS}/empty-dir/data"))
    );
    assert_eq!(
        vol("mem").source,
        VolumeSource::EmptyDir {
            memory: true,
            size_limit: Some(64 << 20),
            tmpfs_size: Some(64 << 20)
        }
    );
    assert_eq!(vol("etcd").host_path, PathBuf::from("/var/lib/etcd"));
    assert_eq!(
        vol("cfg").host_path,
        PathBuf::from(format!("{VOLS}/content/cfg"))
    );
    assert_eq!(
        vol("cfg").source,
        VolumeSource::Content {
            kind: ContentKind::ConfigMap,
            tmpfs_size: Some(NODE_MEMORY)
        }
    );
    assert_eq!(
        vol("pvc").source,
        VolumeSource::Unsupported {
            kind: "persistentVolumeClaim".into()
        }
    );
    assert_eq!(p.containers["init"].len(), 1);
    let c = &p.containers["c"];
    assert!(c[0].read_only && c[0].sub_path.is_empty());
    assert_eq!(c[0].propagation, Propagation::Private);
    assert_eq!(c[1].propagation, Propagation::HostToContainer);
    assert_eq!(c[1].volume_path, PathBuf::from("/var/lib/etcd"));
    assert_eq!(c[2].sub_path, "a/b");
    assert!(
        c[2].read_only,
        "a configMap mount is read-only, subPath or not"
    );
    assert!(!c[1].read_only && !p.containers["init"][0].read_only);
}

#[test]
fn unknown_volume_names_pod_container_and_field() {
    let e = plan(with_mounts(json!([{"name": "nope", "mountPath": "/x"}]))).unwrap_err();
    assert_eq!(
        e.to_string(),
        "pod web-node: spec.containers[0].volumeMounts[0].name: Not found: \"nope\": container c mounts a volume the pod does not declare in spec.volumes"
    );
}

#[test]
fn duplicate_volume_names_are_refused() {
    let e = plan(json!({
        "volumes": [{"name": "a", "emptyDir": {}}, {"name": "a", "emptyDir": {}}],
        "containers": [{"name": "c"}]
    }))
    .unwrap_err();
    assert!(
        matches!(e, PlanError::DuplicateVolume { index: 1, .. }),
        "{e}"
    );
}

#[test]
fn mount_paths_absolute_and_unique() {
    let e = plan(with_mounts(json!([{"name": "data", "mountPath": "rel"}]))).unwrap_err();
    assert!(matches!(e, PlanError::RelativeMountPath { .. }), "{e}");
    let e = plan(with_mounts(json!([
        {"name": "data", "mountPath": "/x"},
        {"name": "etcd", "mountPath": "/x/"}
    ])))
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("spec.containers[0].volumeMounts[1].mountPath"),
        "{e}"
    );
    assert!(matches!(e, PlanError::DuplicateMountPath { .. }), "{e}");
}

#[test]
fn sub_paths_relative_without_dot_dot() {
    for bad in ["/abs", "../up", "a/../../b", "a/.."] {
        let e = plan(with_mounts(
            json!([{"name": "data", "mountPath": "/x", "subPath": bad}]),
        ))
        .unwrap_err();
        assert!(matches!(e, PlanError::BadSubPath { .. }), "{bad}: {e}");
        assert!(e.to_string().contains("volumeMounts[0].subPath"), "{e}");
    }
    for good in ["a", "a/b", "./a", "a..b"] {
        plan(with_mounts(
            json!([{"name": "data", "mountPath": "/x", "subPath": good}]),
        ))
        .unwrap();
    }
    let e = plan(with_mounts(json!([
        {"name": "data", "mountPath": "/x", "subPath": "a", "subPathExpr": "b"}
    ])))
    .unwrap_err();
    assert!(matches!(e, PlanError::SubPathAndExpr { .. }), "{e}");
}

#[test]
fn a_containers_unplannable_mount_leaves_the_pods_volumes_plannable() {
    // The volumes are set up for the pod; the mount fails only its container's start.
    let spec = json!({
        "volumes": [{"name": "logs", "emptyDir": {}}],
        "containers": [{"name": "c",
            "env": [{"name": "A", "valueFrom": {"fieldRef":
                {"fieldPath": "metadata.annotations['missing']"}}}],
            "volumeMounts": [{"name": "logs", "mountPath": "/a", "subPathExpr": "$(A)/x"}]
        }]
    });
    let e = plan(spec.clone()).unwrap_err();
    assert!(matches!(e, PlanError::MissingSubPathVar { .. }), "{e}");
    let volumes = plan_pod_volumes(&pod(spec), Path::new(VOLS), NODE_MEMORY).unwrap();
    let names: Vec<&str> = volumes.volumes.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["logs"]);
    assert!(volumes.containers.is_empty());
}

#[test]
fn sub_path_expr_from_env_and_field_refs() {
    let p = plan(json!({
        "volumes": [{"name": "logs", "emptyDir": {}}],
        "containers": [{"name": "c",
            "env": [
                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "SUB", "value": "s"}
            ],
            "volumeMounts": [{"name": "logs", "mountPath": "/logs", "subPathExpr": "$(POD)/$(SUB)"}]
        }]
    }))
    .unwrap();
    assert_eq!(p.containers["c"][0].sub_path, "web-node/s");

    let e = plan(json!({
        "volumes": [{"name": "logs", "emptyDir": {}}],
        "containers": [{"name": "c",
            "env": [{"name": "UP", "value": ".."}],
            "volumeMounts": [
                {"name": "logs", "mountPath": "/a", "subPathExpr": "$(UNSET)"},
            ]
        }]
    }))
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "pod web-node: spec.containers[0].volumeMounts[0].subPathExpr: container c: missing value for UNSET"
    );
    let e = plan(json!({
        "volumes": [{"name": "logs", "emptyDir": {}}],
        "containers": [{"name": "c",
            "env": [{"name": "UP", "value": ".."}],
            "volumeMounts": [{"name": "logs", "mountPath": "/a", "subPathExpr": "$(UP)/x"}]
        }]
    }))
    .unwrap_err();
    assert!(matches!(e, PlanError::BadSubPath { .. }), "{e}");
}

#[test]
fn bidirectional_only_for_privileged() {
    let spec = |privileged: bool| {
        json!({
            "volumes": [{"name": "m", "hostPath": {"path": "/mnt"}}],
            "containers": [{"name": "c",
                "securityContext": {"privileged": privileged},
                "volumeMounts": [{"name": "m", "mountPath": "/mnt", "mountPropagation": "Bidirectional"}]
            }]
        })
    };
    let e = plan(spec(false)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "pod web-node: spec.containers[0].volumeMounts[0].mountPropagation: Forbidden: container c: Bidirectional mount propagation is available only to privileged containers"
    );
    let p = plan(spec(true)).unwrap();
    assert_eq!(p.containers["c"][0].propagation, Propagation::Bidirectional);
    let e = plan(with_mounts(
        json!([{"name": "data", "mountPath": "/x", "mountPropagation": "Sideways"}]),
    ))
    .unwrap_err();
    assert!(matches!(e, PlanError::BadPropagation { .. }), "{e}");
}

#[test]
fn host_path_type_and_path_checked() {
    let e = plan(json!({
        "volumes": [{"name": "h", "hostPath": {"path": "/x", "type": "Dir"}}],
        "containers": [{"name": "c"}]
    }))
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("spec.volumes[0].hostPath.type: Unsupported value: \"Dir\""),
        "{e}"
    );
    let e = plan(json!({
        "volumes": [{"name": "h", "hostPath": {"path": "x"}}],
        "containers": [{"name": "c"}]
    }))
    .unwrap_err();
    assert!(matches!(e, PlanError::RelativeHostPath { .. }), "{e}");
}

#[test]
fn memory_tmpfs_sized_by_limit_or_pod_memory() {
    let mem = |size: Option<&str>, limits: &[Option<&str>]| {
        let containers: Vec<_> = limits
            .iter()
            .enumerate()
            .map(|(i, l)| match l {
                Some(l) => json!({"name": format!("c{i}"), "resources": {"limits": {"memory": l}}}),
                None => json!({"name": format!("c{i}")}),
            })
            .collect();
        let mut ed = json!({"medium": "Memory"});
        if let Some(s) = size {
            ed["sizeLimit"] = json!(s);
        }
        let p = plan(json!({"volumes": [{"name": "m", "emptyDir": ed}], "containers": containers}))
            .unwrap();
        match &p.volumes[0].source {
            VolumeSource::EmptyDir { tmpfs_size, .. } => *tmpfs_size,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(mem(Some("1Mi"), &[None]), Some(1 << 20));
    assert_eq!(mem(None, &[Some("64Mi"), Some("32Mi")]), Some(96 << 20));
    assert_eq!(mem(Some("1Gi"), &[Some("64Mi")]), Some(64 << 20));
    // Not every container limited, no sizeLimit: the node's allocatable memory.
    assert_eq!(mem(None, &[Some("64Mi"), None]), Some(NODE_MEMORY));
    assert_eq!(mem(None, &[None]), Some(NODE_MEMORY));
    // A bound above the node's memory does not raise it.
    assert_eq!(mem(Some("8Gi"), &[None]), Some(NODE_MEMORY));
    let e = plan(json!({
        "volumes": [{"name": "m", "emptyDir": {"sizeLimit": "lots"}}],
        "containers": [{"name": "c"}]
    }))
    .unwrap_err();
    assert!(matches!(e, PlanError::BadSizeLimit { .. }), "{e}");
}

#[test]
fn fs_group_and_its_policy() {
    let p = plan(json!({
        "securityContext": {"fsGroup": 2000, "fsGroupChangePolicy": "OnRootMismatch"},
        "containers": [{"name": "c"}]
    }))
    .unwrap();
    assert_eq!(p.fs_group, Some(2000));
    assert!(p.fs_group_on_root_mismatch);
    let e = plan(json!({
        "securityContext": {"fsGroup": 2000, "fsGroupChangePolicy": "Sometimes"},
        "containers": [{"name": "c"}]
    }))
    .unwrap_err();
    assert!(matches!(e, PlanError::BadFsGroupPolicy { .. }), "{e}");
}

#[test]
fn content_volumes_are_read_only_whatever_read_only_says() {
    let p = plan(json!({
        "volumes": [
            {"name": "cm", "configMap": {"name": "x"}},
            {"name": "sec", "secret": {"secretName": "x"}},
            {"name": "down", "downwardAPI": {"items": [
                {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}
            ]}},
            {"name": "proj", "projected": {"sources": [{"configMap": {"name": "x"}}]}},
            {"name": "token", "projected": {"sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}
            ]}},
            {"name": "data", "emptyDir": {}}
        ],
        "initContainers": [{"name": "init", "volumeMounts": [
            {"name": "cm", "mountPath": "/cm", "readOnly": false}
        ]}],
        "containers": [{"name": "c", "volumeMounts": [
            {"name": "cm", "mountPath": "/cm", "readOnly": false},
            {"name": "sec", "mountPath": "/sec"},
            {"name": "down", "mountPath": "/down", "readOnly": false},
            {"name": "proj", "mountPath": "/proj", "subPath": "x"},
            {"name": "token", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": false},
            {"name": "cm", "mountPath": "/cm-ro", "readOnly": true},
            {"name": "data", "mountPath": "/data", "readOnly": false}
        ]}]
    }))
    .unwrap();
    let read_only = |c: &str| -> Vec<(String, bool)> {
        p.containers[c]
            .iter()
            .map(|m| (m.destination.clone(), m.read_only))
            .collect()
    };
    assert_eq!(read_only("init"), [("/cm".to_string(), true)]);
    assert_eq!(
        read_only("c"),
        [
            ("/cm".to_string(), true),
            ("/sec".into(), true),
            ("/down".into(), true),
            ("/proj".into(), true),
            ("/var/run/secrets/kubernetes.io/serviceaccount".into(), true),
            ("/cm-ro".into(), true),
            ("/data".into(), false),
        ]
    );
}

#[test]
fn content_tmpfs_sized_by_the_pod_limit_or_the_node() {
    let size = |containers: serde_json::Value| {
        let p = plan(json!({
            "volumes": [
                {"name": "sec", "secret": {"secretName": "x"}},
                {"name": "mem", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}}
            ],
            "containers": containers
        }))
        .unwrap();
        let sizes: Vec<Option<u64>> = p
            .volumes
            .iter()
            .map(|v| match &v.source {
                VolumeSource::Content { tmpfs_size, .. }
                | VolumeSource::EmptyDir { tmpfs_size, .. } => *tmpfs_size,
                other => panic!("{other:?}"),
            })
            .collect();
        sizes
    };
    let limited = |m: &str| json!({"name": "c", "resources": {"limits": {"memory": m}}});
    // The sizeLimit under the pod's limit; the content volume has none: the pod's limit.
    assert_eq!(
        size(json!([limited("64Mi")])),
        [Some(64 << 20), Some(16 << 20)]
    );
    // The pod's limit under the sizeLimit bounds both.
    assert_eq!(
        size(json!([limited("8Mi")])),
        [Some(8 << 20), Some(8 << 20)]
    );
    // No memory limits: the content volume gets the node's allocatable memory.
    assert_eq!(
        size(json!([{"name": "c"}])),
        [Some(NODE_MEMORY), Some(16 << 20)]
    );
    // A node whose memory is unknown: the kernel's default (half of RAM), never 0.
    let p = plan_pod(
        &pod(json!({"volumes": [{"name": "sec", "secret": {"secretName": "x"}}], "containers": [{"name": "c"}]})),
        Path::new(VOLS),
        0,
    )
    .unwrap();
    assert_eq!(
        p.volumes[0].source,
        VolumeSource::Content {
            kind: ContentKind::Secret,
            tmpfs_size: None
        }
    );
}
