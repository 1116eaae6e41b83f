use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};

use super::*;
use podhost_model::downward::NodeCapacity;

#[derive(Default)]
struct Objects {
    config_maps: BTreeMap<String, ConfigMap>,
    secrets: BTreeMap<String, Secret>,
}

impl ConfigLookup for Objects {
    fn config_map(&self, namespace: &str, name: &str) -> Option<&ConfigMap> {
        (namespace == "default")
            .then(|| self.config_maps.get(name))
            .flatten()
    }
    fn secret(&self, namespace: &str, name: &str) -> Option<&Secret> {
        (namespace == "default")
            .then(|| self.secrets.get(name))
            .flatten()
    }
}

fn objects() -> Objects {
    let mut o = Objects::default();
    o.config_maps.insert(
        "app".into(),
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "app"},
            "data": {"app.conf": "mode=prod\n", "other": "x"},
            "binaryData": {"logo.bin": "AAH/"}
        }))
        .unwrap(),
    );
    o.secrets.insert(
        "tls".into(),
        Secret {
            data: Some(BTreeMap::from([(
                "tls.key".to_string(),
                ByteString(b"KEY".to_vec()),
            )])),
            ..Default::default()
        },
    );
    o
}

fn pod() -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "u", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "main", "resources": {"limits": {"cpu": "500m"}}}]}
    }))
    .unwrap()
}

fn files(volume_yaml: &str) -> Result<FileSet, ContentError> {
    let volume: Volume = serde_yaml_ng::from_str(volume_yaml).unwrap();
    let inputs = DownwardInputs {
        capacity: NodeCapacity {
            cpu_millis: 2000,
            ..Default::default()
        },
        ..Default::default()
    };
    volume_files(&volume, &pod(), &objects(), &inputs)
}

fn file(set: &FileSet, path: &str) -> (String, u32) {
    let f = &set[path];
    (String::from_utf8_lossy(&f.data).into_owned(), f.mode)
}

#[test]
fn a_config_map_gives_every_key_or_its_items() {
    let all = files("name: cfg\nconfigMap: {name: app}\n").unwrap();
    assert_eq!(
        all.keys().collect::<Vec<_>>(),
        ["app.conf", "logo.bin", "other"]
    );
    assert_eq!(file(&all, "app.conf"), ("mode=prod\n".into(), 0o644));
    assert_eq!(all["logo.bin"].data, vec![0, 1, 0xff]);
    let some = files(
        "name: cfg\nconfigMap:\n  name: app\n  defaultMode: 0o400\n  items:\n  - {key: app.conf, path: etc/app.conf}\n  - {key: other, path: o, mode: 0o600}\n",
    )
    .unwrap();
    assert_eq!(some.keys().collect::<Vec<_>>(), ["etc/app.conf", "o"]);
    assert_eq!(file(&some, "etc/app.conf").1, 0o400);
    assert_eq!(file(&some, "o").1, 0o600);
}

#[test]
fn missing_objects_and_keys_fail_naming_them_unless_optional() {
    let err = files("name: cfg\nconfigMap: {name: nope}\n").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("volume \"cfg\": configmap \"nope\" not found"),
        "{err}"
    );
    let err = files("name: s\nsecret: {secretName: nope}\n").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("volume \"s\": secret \"nope\" not found"),
        "{err}"
    );
    let err = files("name: cfg\nconfigMap: {name: app, items: [{key: y, path: y}]}\n").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("volume \"cfg\": configmap default/app has no key \"y\""),
        "{err}"
    );
    assert!(
        files("name: cfg\nconfigMap: {name: nope, optional: true}\n")
            .unwrap()
            .is_empty()
    );
    let some = files("name: cfg\nconfigMap: {name: app, optional: true, items: [{key: y, path: y}, {key: other, path: o}]}\n").unwrap();
    assert_eq!(some.keys().collect::<Vec<_>>(), ["o"]);
}

#[test]
fn a_secret_volume_has_its_bytes_and_the_default_mode() {
    let set = files("name: s\nsecret: {secretName: tls}\n").unwrap();
    assert_eq!(file(&set, "tls.key"), ("KEY".into(), 0o644));
    assert_eq!(
        format!("{:?}", set["tls.key"]),
        "ProjectedFile(3 bytes, 644)",
        "secrets never printed"
    );
}

#[test]
fn downward_api_and_projected_volumes_combine_sources() {
    let set = files(
        "name: info
projected:
  defaultMode: 0o440
  sources:
  - configMap: {name: app, items: [{key: other, path: other}]}
  - secret: {name: tls}
  - downwardAPI:
      items:
      - {path: labels, fieldRef: {fieldPath: metadata.labels}}
      - {path: cpu, resourceFieldRef: {containerName: main, resource: limits.cpu, divisor: 1m}, mode: 0o444}
",
    )
    .unwrap();
    assert_eq!(
        set.keys().collect::<Vec<_>>(),
        ["cpu", "labels", "other", "tls.key"]
    );
    assert_eq!(file(&set, "labels"), ("app=\"web\"".into(), 0o440));
    assert_eq!(file(&set, "cpu"), ("500".into(), 0o444));
    let dw = files(
        "name: d\ndownwardAPI:\n  items:\n  - {path: name, fieldRef: {fieldPath: metadata.name}}\n",
    )
    .unwrap();
    assert_eq!(file(&dw, "name").0, "web");
}

#[test]
fn unavailable_sources_bad_paths_and_conflicts_are_errors() {
    let err = files("name: t\nprojected:\n  sources:\n  - serviceAccountToken: {path: token}\n")
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("serviceAccountToken projection is not available without a cluster"),
        "{err}"
    );
    let err = files(
        "name: d\ndownwardAPI:\n  items:\n  - {path: ../x, fieldRef: {fieldPath: metadata.name}}\n",
    )
    .unwrap_err();
    assert!(matches!(err, ContentError::BadPath { .. }), "{err}");
    let err = files(
        "name: d\ndownwardAPI:\n  items:\n  - {path: n, fieldRef: {fieldPath: status.podIP}}\n",
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("unsupported fieldPath: status.podIP"),
        "{err}"
    );
    let err = files(
        "name: p\nprojected:\n  sources:\n  - configMap: {name: app}\n  - configMap: {name: app}\n",
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("conflicting duplicate paths"),
        "{err}"
    );
    let err = files("name: cfg\nconfigMap: {name: app, defaultMode: 4096}\n").unwrap_err();
    assert!(matches!(err, ContentError::BadMode { .. }), "{err}");
    assert!(matches!(
        files("name: e\nemptyDir: {}\n").unwrap_err(),
        ContentError::NotContent { .. }
    ));
}
