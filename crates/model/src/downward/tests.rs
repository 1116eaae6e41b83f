use super::*;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

fn pod() -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": "web-node1", "namespace": "prod", "uid": "u-1",
            "labels": {"app": "web", "tier": "front\"end"},
            "annotations": {"example.com/Note": "a\nb\u{1}é", "z": ""}
        },
        "spec": {
            "nodeName": "node1",
            "serviceAccountName": "sa",
            "containers": [
                {"name": "main", "resources": {"limits": {"cpu": "1500m", "memory": "100Mi"}}},
                {"name": "side", "resources": {"requests": {"cpu": "250m", "memory": "1Mi"}}}
            ],
            "initContainers": [{"name": "init"}]
        }
    }))
    .unwrap()
}

fn inputs() -> DownwardInputs {
    DownwardInputs::for_pod(
        "fallback",
        true,
        &["10.0.0.5".into(), "fd00::5".into()],
        NodeCapacity {
            cpu_millis: 2000,
            memory_bytes: 4 << 30,
            ephemeral_storage_bytes: 50_000_000_000,
        },
    )
}

fn field(path: &str, scope: FieldScope) -> Result<String, DownwardError> {
    let sel = ObjectFieldSelector {
        field_path: path.into(),
        api_version: None,
    };
    field_value(&sel, &pod(), &inputs(), scope)
}

fn res(
    resource: &str,
    container: Option<&str>,
    divisor: Option<&str>,
) -> Result<String, DownwardError> {
    let sel = ResourceFieldSelector {
        container_name: None,
        resource: resource.into(),
        divisor: divisor.map(|d| Quantity(d.into())),
    };
    resource_value(&sel, &pod(), container.or(Some("main")), &inputs())
}

#[test]
fn metadata_fields_resolve_in_env_and_volumes() {
    for scope in [FieldScope::Env, FieldScope::Volume] {
        assert_eq!(field("metadata.name", scope).unwrap(), "web-node1");
        assert_eq!(field("metadata.namespace", scope).unwrap(), "prod");
        assert_eq!(field("metadata.uid", scope).unwrap(), "u-1");
        assert_eq!(field("metadata.labels['app']", scope).unwrap(), "web");
        assert_eq!(field("metadata.labels['missing']", scope).unwrap(), "");
    }
}

#[test]
fn label_and_annotation_maps_are_sorted_go_quoted_lines() {
    assert_eq!(
        field("metadata.labels", FieldScope::Volume).unwrap(),
        "app=\"web\"\ntier=\"front\\\"end\""
    );
    assert_eq!(
        field("metadata.annotations", FieldScope::Volume).unwrap(),
        "example.com/Note=\"a\\nb\\x01é\"\nz=\"\""
    );
    // Capitals in an annotation key's subscript are accepted (the kubelet lowercases
    // before checking), and the value is looked up as written.
    assert_eq!(
        field("metadata.annotations['example.com/Note']", FieldScope::Env).unwrap(),
        "a\nb\u{1}é"
    );
}

#[test]
fn go_quote_matches_strconv_quote() {
    assert_eq!(go_quote("plain"), "\"plain\"");
    assert_eq!(go_quote("tab\there\\"), "\"tab\\there\\\\\"");
    assert_eq!(go_quote("\u{7f}\u{0}"), "\"\\x7f\\x00\"");
    assert_eq!(
        go_quote("\u{85}\u{a0}\u{feff}"),
        "\"\\u0085\\u00a0\\ufeff\""
    );
    assert_eq!(go_quote("日本\u{1F600}"), "\"日本\u{1F600}\"");
    assert_eq!(go_quote("\u{F0000}"), "\"\\U000f0000\"");
}

#[test]
fn env_only_fields_are_refused_in_volumes() {
    assert_eq!(field("spec.nodeName", FieldScope::Env).unwrap(), "node1");
    assert_eq!(
        field("spec.serviceAccountName", FieldScope::Env).unwrap(),
        "sa"
    );
    assert_eq!(field("status.hostIP", FieldScope::Env).unwrap(), "10.0.0.5");
    assert_eq!(
        field("status.hostIPs", FieldScope::Env).unwrap(),
        "10.0.0.5,fd00::5"
    );
    assert_eq!(field("status.podIP", FieldScope::Env).unwrap(), "10.0.0.5");
    assert_eq!(
        field("status.podIPs", FieldScope::Env).unwrap(),
        "10.0.0.5,fd00::5"
    );
    for path in ["spec.nodeName", "status.podIP"] {
        assert_eq!(
            field(path, FieldScope::Volume).unwrap_err(),
            DownwardError::UnsupportedField { path: path.into() }
        );
    }
}

#[test]
fn a_pod_without_a_network_has_no_pod_ip_but_a_host_ip() {
    let inputs = DownwardInputs::for_pod("n", false, &["10.0.0.5".into()], NodeCapacity::default());
    let sel = |p: &str| ObjectFieldSelector {
        field_path: p.into(),
        api_version: None,
    };
    assert_eq!(
        field_value(&sel("status.podIP"), &pod(), &inputs, FieldScope::Env).unwrap(),
        ""
    );
    assert_eq!(
        field_value(&sel("status.hostIP"), &pod(), &inputs, FieldScope::Env).unwrap(),
        "10.0.0.5"
    );
}

#[test]
fn bad_paths_and_subscripts_are_errors() {
    assert!(matches!(
        field("metadata.labels['bad key']", FieldScope::Env),
        Err(DownwardError::BadSubscript { .. })
    ));
    assert!(matches!(
        field("metadata.name['x']", FieldScope::Env),
        Err(DownwardError::UnsupportedField { .. })
    ));
    let err = field("spec.hostname", FieldScope::Env).unwrap_err();
    assert_eq!(err.to_string(), "unsupported fieldPath: spec.hostname");
}

#[test]
fn resources_round_up_by_divisor_and_default_to_the_node() {
    assert_eq!(
        res("limits.cpu", None, None).unwrap(),
        "2",
        "1500m rounds up to 2 cores"
    );
    assert_eq!(res("limits.cpu", None, Some("1m")).unwrap(), "1500");
    assert_eq!(res("limits.memory", None, Some("1Mi")).unwrap(), "100");
    assert_eq!(
        res("limits.memory", None, None).unwrap(),
        (100u64 << 20).to_string()
    );
    // Requests default to the limits the manifest sets (API defaulting).
    assert_eq!(res("requests.cpu", None, Some("1m")).unwrap(), "1500");
    // Unset limits are the node's capacity; unset requests are 0.
    assert_eq!(res("limits.cpu", Some("side"), Some("1m")).unwrap(), "2000");
    assert_eq!(
        res("limits.memory", Some("side"), Some("1Gi")).unwrap(),
        "4"
    );
    assert_eq!(
        res("limits.ephemeral-storage", Some("side"), Some("1G")).unwrap(),
        "50"
    );
    assert_eq!(res("requests.cpu", Some("side"), None).unwrap(), "1");
    assert_eq!(res("requests.memory", Some("init"), None).unwrap(), "0");
    assert_eq!(
        res("requests.memory", Some("side"), Some("1k")).unwrap(),
        "1049"
    );
}

#[test]
fn bad_resource_references_are_errors() {
    assert!(matches!(
        res("limits.gpu", None, None),
        Err(DownwardError::UnsupportedResource { .. })
    ));
    assert!(matches!(
        res("cpu", None, None),
        Err(DownwardError::UnsupportedResource { .. })
    ));
    assert!(matches!(
        res("limits.cpu", Some("nope"), None),
        Err(DownwardError::NoSuchContainer { .. })
    ));
    assert!(matches!(
        res("limits.cpu", None, Some("-1")),
        Err(DownwardError::BadDivisor { .. })
    ));
}
