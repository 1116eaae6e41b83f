//! The kubelet's confinement of content volumes: which mounts are forced read-only,
//! the pod's memory limit, and the memory-backed tmpfs sizes.

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::*;

const MI: u64 = 1 << 20;

fn pod(spec: serde_json::Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
}

fn limited(name: &str, memory: Option<&str>) -> serde_json::Value {
    match memory {
        Some(m) => json!({"name": name, "resources": {"limits": {"memory": m}}}),
        None => json!({"name": name}),
    }
}

#[test]
fn the_pod_limit_is_the_kubelets_with_sidecars_and_only_when_every_container_has_one() {
    let limit = |init: Vec<serde_json::Value>, app: Vec<serde_json::Value>| {
        pod_memory_limit(&pod(json!({"initContainers": init, "containers": app})))
    };
    assert_eq!(
        limit(
            vec![],
            vec![limited("a", Some("64Mi")), limited("b", Some("32Mi"))]
        ),
        Some(96 * MI)
    );
    // A regular init container runs alone: the pod's limit is the larger of the two.
    assert_eq!(
        limit(
            vec![limited("i", Some("200Mi"))],
            vec![limited("a", Some("64Mi"))]
        ),
        Some(200 * MI)
    );
    // A sidecar runs beside the app containers and beside later init containers.
    let mut sidecar = limited("s", Some("16Mi"));
    sidecar["restartPolicy"] = json!("Always");
    assert_eq!(
        limit(
            vec![sidecar.clone(), limited("i", Some("100Mi"))],
            vec![limited("a", Some("64Mi"))]
        ),
        Some(116 * MI)
    );
    assert_eq!(
        limit(vec![sidecar], vec![limited("a", Some("64Mi"))]),
        Some(80 * MI)
    );
    // One container without a limit (or with a zero one), init or app: no pod limit.
    assert_eq!(
        limit(vec![], vec![limited("a", Some("64Mi")), limited("b", None)]),
        None
    );
    assert_eq!(
        limit(vec![limited("i", None)], vec![limited("a", Some("64Mi"))]),
        None
    );
    assert_eq!(limit(vec![], vec![limited("a", Some("0"))]), None);
}

#[test]
fn memory_volume_size_takes_the_smallest_bound_that_is_set() {
    const NODE: u64 = 4096 * MI;
    let size = |limit: Option<&str>, size_limit: Option<u64>, node: u64| {
        memory_volume_size(
            &pod(json!({"containers": [limited("a", limit)]})),
            size_limit,
            node,
        )
    };
    let is = |bytes: u64, bound: TmpfsBound| Some(TmpfsSize { bytes, bound });
    assert_eq!(
        size(None, None, NODE),
        is(NODE, TmpfsBound::NodeAllocatable)
    );
    assert_eq!(
        size(Some("64Mi"), None, NODE),
        is(64 * MI, TmpfsBound::PodMemoryLimit)
    );
    assert_eq!(
        size(Some("64Mi"), Some(8 * MI), NODE),
        is(8 * MI, TmpfsBound::SizeLimit)
    );
    assert_eq!(
        size(Some("64Mi"), Some(128 * MI), NODE),
        is(64 * MI, TmpfsBound::PodMemoryLimit)
    );
    assert_eq!(
        size(None, Some(8 * MI), NODE),
        is(8 * MI, TmpfsBound::SizeLimit)
    );
    // Bounds above the node's memory do not raise it.
    assert_eq!(
        size(Some("8Gi"), Some(16 << 30), NODE),
        is(NODE, TmpfsBound::NodeAllocatable)
    );
    assert_eq!(
        size(None, Some(0), NODE),
        is(NODE, TmpfsBound::NodeAllocatable)
    );
    // An unknown node (validate): the pod's own bounds, or None for the node's.
    assert_eq!(size(None, None, 0), None);
    assert_eq!(
        size(Some("64Mi"), Some(128 * MI), 0),
        is(64 * MI, TmpfsBound::PodMemoryLimit)
    );
}

#[test]
fn every_content_kind_is_forced_read_only_unless_the_mount_says_so_itself() {
    let p = pod(json!({
        "volumes": [
            {"name": "cm", "configMap": {"name": "x"}},
            {"name": "sec", "secret": {"secretName": "x"}},
            {"name": "down", "downwardAPI": {"items": []}},
            {"name": "token", "projected": {"sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}
            ]}},
            {"name": "data", "emptyDir": {}},
            {"name": "host", "hostPath": {"path": "/srv"}}
        ],
        "initContainers": [{"name": "i", "volumeMounts": [{"name": "cm", "mountPath": "/cm"}]}],
        "containers": [{"name": "c", "volumeMounts": [
            {"name": "cm", "mountPath": "/cm", "readOnly": false},
            {"name": "sec", "mountPath": "/sec"},
            {"name": "down", "mountPath": "/down", "readOnly": true},
            {"name": "token", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"},
            {"name": "data", "mountPath": "/data", "readOnly": false},
            {"name": "host", "mountPath": "/host"}
        ]}]
    }));
    let forced: Vec<(String, &str, bool)> = forced_read_only_mounts(&p)
        .into_iter()
        .map(|f| (f.field, f.kind, f.asked_read_write))
        .collect();
    assert_eq!(
        forced,
        [
            (
                "spec.initContainers[0].volumeMounts[0]".into(),
                "configMap",
                false
            ),
            (
                "spec.containers[0].volumeMounts[0]".into(),
                "configMap",
                true
            ),
            ("spec.containers[0].volumeMounts[1]".into(), "secret", false),
            (
                "spec.containers[0].volumeMounts[3]".into(),
                "projected",
                false
            ),
        ]
    );
    let note = forced_read_only_mounts(&p)[1].note();
    assert_eq!(
        note,
        format!(
            "mounted read-only although readOnly is false: \"cm\" is a configMap volume; {READ_ONLY_REASON}"
        )
    );
}

#[test]
fn memory_volumes_are_the_memory_emptydirs_and_the_content_volumes() {
    let p = pod(json!({
        "volumes": [
            {"name": "disk", "emptyDir": {}},
            {"name": "mem", "emptyDir": {"medium": "Memory", "sizeLimit": "8Mi"}},
            {"name": "cm", "configMap": {"name": "x"}},
            {"name": "host", "hostPath": {"path": "/srv"}}
        ],
        "containers": [limited("a", Some("64Mi"))]
    }));
    let v = memory_volumes(&p, 0);
    let fields: Vec<&str> = v.iter().map(|m| m.field.as_str()).collect();
    assert_eq!(
        fields,
        ["spec.volumes[1].emptyDir", "spec.volumes[2].configMap"]
    );
    assert_eq!(
        v[0].note(),
        "a tmpfs of at most 8Mi (its sizeLimit; the node's allocatable memory if that is smaller)"
    );
    assert_eq!(
        v[1].note(),
        "a tmpfs of at most 64Mi (the pod's memory limit; the node's allocatable memory if that is smaller)"
    );
    let unlimited = pod(json!({
        "volumes": [{"name": "cm", "secret": {"secretName": "x"}}],
        "containers": [limited("a", None)]
    }));
    let v = memory_volumes(&unlimited, 0);
    assert_eq!(v[0].size, None);
    assert!(
        v[0].note()
            .starts_with("a tmpfs of at most the node's allocatable memory")
    );
    assert_eq!(
        memory_volumes(&unlimited, 2048 * MI)[0].note(),
        "a tmpfs of at most 2Gi (the node's allocatable memory)"
    );
}
