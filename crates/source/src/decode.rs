//! Manifest bytes → one `v1.Pod`: size-limited read, YAML (or JSON) → JSON value, kind
//! and apiVersion check, typed decode, and strict unknown-field detection (as
//! `kubectl --validate=strict`).

use std::fs::File;
use std::io::Read;
use std::path::Path;

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, EphemeralContainer, Pod, PodSpec, PodStatus, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::error::{MAX_MANIFEST_BYTES, ManifestError};

/// Reads at most [`MAX_MANIFEST_BYTES`] of a regular file.
pub(crate) fn read_manifest(path: &Path) -> Result<Vec<u8>, ManifestError> {
    let read_err = |source| ManifestError::Read {
        path: path.to_path_buf(),
        source,
    };
    // Follows symlinks, as the kubelet's os.Stat. A FIFO must not be opened: it blocks.
    let meta = std::fs::metadata(path).map_err(read_err)?;
    if meta.is_dir() {
        return Err(ManifestError::Subdirectory {
            path: path.to_path_buf(),
        });
    }
    if !meta.is_file() {
        return Err(ManifestError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    let file = File::open(path).map_err(read_err)?;
    let mut buf = Vec::new();
    file.take(MAX_MANIFEST_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(read_err)?;
    if buf.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(ManifestError::TooLarge {
            path: path.to_path_buf(),
            size: meta.len().max(buf.len() as u64),
            limit: MAX_MANIFEST_BYTES,
        });
    }
    Ok(buf)
}

/// File modes written as YAML 1.1 octal (`defaultMode: 0400`), which kubectl's YAML
/// reads as 256 but a YAML 1.2 parser keeps as the string "0400": turned into numbers,
/// so that real manifests decode.
fn octal_file_modes(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                if let ("defaultMode" | "mode", Value::String(text)) = (key.as_str(), &*value)
                    && let Some(digits) = text.strip_prefix('0')
                    && !digits.is_empty()
                    && let Ok(mode) = u32::from_str_radix(digits, 8)
                {
                    *value = Value::from(mode);
                } else {
                    octal_file_modes(value);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(octal_file_modes),
        _ => {}
    }
}

#[cfg(test)]
mod octal_tests {
    use super::*;

    #[test]
    fn yaml_1_1_octal_modes_become_numbers() {
        let doc = "spec:\n  volumes:\n  - name: s\n    secret:\n      defaultMode: 0400\n      items:\n      - {key: k, path: p, mode: 0644}\n  - name: c\n    configMap: {defaultMode: 420}\n";
        let v = parse_document(Path::new("x.yaml"), doc.as_bytes()).unwrap();
        assert_eq!(
            v.pointer("/spec/volumes/0/secret/defaultMode"),
            Some(&Value::from(256))
        );
        assert_eq!(
            v.pointer("/spec/volumes/0/secret/items/0/mode"),
            Some(&Value::from(420))
        );
        assert_eq!(
            v.pointer("/spec/volumes/1/configMap/defaultMode"),
            Some(&Value::from(420))
        );
    }
}

/// Parses the single YAML (or JSON) document of a manifest into a JSON value. Anchors
/// and merge keys (`<<:`) are resolved. Empty documents (only `---` or comments) are
/// ignored; zero or several remaining documents are an error.
pub(crate) fn parse_document(path: &Path, bytes: &[u8]) -> Result<Value, ManifestError> {
    let yaml_err = |source| ManifestError::Yaml {
        path: path.to_path_buf(),
        source,
    };
    let mut docs = Vec::new();
    for de in serde_yaml_ng::Deserializer::from_slice(bytes) {
        let mut doc = serde_yaml_ng::Value::deserialize(de).map_err(yaml_err)?;
        if doc.is_null() {
            continue;
        }
        doc.apply_merge().map_err(yaml_err)?;
        docs.push(doc);
    }
    match docs.len() {
        0 => Err(ManifestError::Empty {
            path: path.to_path_buf(),
        }),
        1 => {
            let mut doc: Value = serde_yaml_ng::from_value(docs.remove(0)).map_err(yaml_err)?;
            octal_file_modes(&mut doc);
            Ok(doc)
        }
        count => Err(ManifestError::MultipleDocuments {
            path: path.to_path_buf(),
            count,
        }),
    }
}

/// Checks `kind: Pod` and `apiVersion: v1`.
pub(crate) fn check_kind(path: &Path, doc: &Value) -> Result<(), ManifestError> {
    let wrong_kind = |found: String| ManifestError::WrongKind {
        path: path.to_path_buf(),
        found,
    };
    let Some(obj) = doc.as_object() else {
        return Err(wrong_kind(format!("a YAML {}", json_type(doc))));
    };
    match obj.get("kind") {
        Some(Value::String(k)) if k == "Pod" => {}
        Some(Value::String(k)) if !k.is_empty() => return Err(wrong_kind(format!("kind {k}"))),
        Some(Value::String(_)) | Some(Value::Null) | None => {
            return Err(wrong_kind("no kind".to_string()));
        }
        Some(other) => return Err(wrong_kind(format!("kind {other}"))),
    }
    match obj.get("apiVersion") {
        Some(Value::String(v)) if v == "v1" => Ok(()),
        None | Some(Value::Null) => Err(ManifestError::WrongApiVersion {
            path: path.to_path_buf(),
            found: "nothing".to_string(),
        }),
        Some(other) => Err(ManifestError::WrongApiVersion {
            path: path.to_path_buf(),
            found: other.to_string(),
        }),
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "mapping",
    }
}

/// Decodes the JSON value into a `Pod`, rejecting fields the v1 Pod API does not have.
pub(crate) fn decode_pod(path: &Path, doc: &Value) -> Result<Pod, ManifestError> {
    let pod: Pod = serde_json::from_value(doc.clone()).map_err(|source| {
        let (field, source) = locate_decode_error(doc).unwrap_or((String::new(), source));
        ManifestError::Decode {
            path: path.to_path_buf(),
            field: if field.is_empty() {
                "(pod)".to_string()
            } else {
                field
            },
            source,
        }
    })?;
    // Serializing a k8s-openapi type cannot fail (plain values, string-keyed maps).
    let round_trip = serde_json::to_value(&pod).unwrap_or(Value::Null);
    let mut fields = Vec::new();
    unknown_fields(doc, &round_trip, "", &mut fields);
    if !fields.is_empty() {
        return Err(ManifestError::UnknownFields {
            path: path.to_path_buf(),
            fields,
        });
    }
    Ok(pod)
}

/// Finds the smallest well-known object that fails to decode, to name it in the error.
fn locate_decode_error(doc: &Value) -> Option<(String, serde_json::Error)> {
    fn try_as<T: DeserializeOwned>(v: &Value, at: String) -> Option<(String, serde_json::Error)> {
        serde_json::from_value::<T>(v.clone())
            .err()
            .map(|e| (at, e))
    }
    fn list<T: DeserializeOwned>(
        v: Option<&Value>,
        at: &str,
        inner: impl Fn(&Value, &str) -> Option<(String, serde_json::Error)>,
    ) -> Option<(String, serde_json::Error)> {
        let items = v?.as_array()?;
        items.iter().enumerate().find_map(|(i, item)| {
            let at = format!("{at}[{i}]");
            inner(item, &at).or_else(|| try_as::<T>(item, at))
        })
    }
    fn container(c: &Value, at: &str) -> Option<(String, serde_json::Error)> {
        list::<EnvVar>(c.get("env"), &format!("{at}.env"), |_, _| None)
            .or_else(|| list::<ContainerPort>(c.get("ports"), &format!("{at}.ports"), |_, _| None))
    }

    if let Some(meta) = doc.get("metadata")
        && let Some(e) = try_as::<ObjectMeta>(meta, "metadata".into())
    {
        return Some(e);
    }
    if let Some(status) = doc.get("status")
        && let Some(e) = try_as::<PodStatus>(status, "status".into())
    {
        return Some(e);
    }
    let spec = doc.get("spec")?;
    list::<Container>(spec.get("containers"), "spec.containers", container)
        .or_else(|| list::<Container>(spec.get("initContainers"), "spec.initContainers", container))
        .or_else(|| {
            list::<EphemeralContainer>(
                spec.get("ephemeralContainers"),
                "spec.ephemeralContainers",
                container,
            )
        })
        .or_else(|| list::<Volume>(spec.get("volumes"), "spec.volumes", |_, _| None))
        .or_else(|| try_as::<PodSpec>(spec, "spec".into()))
}

/// Collects the JSON paths of keys present (non-null) in `input` but absent from the
/// decoded-and-re-encoded `output`: fields the type does not know.
fn unknown_fields(input: &Value, output: &Value, at: &str, out: &mut Vec<String>) {
    match (input, output) {
        (Value::Object(i), Value::Object(o)) => {
            for (key, value) in i {
                if value.is_null() {
                    continue;
                }
                let path = if at.is_empty() {
                    key.clone()
                } else {
                    format!("{at}.{key}")
                };
                match o.get(key) {
                    Some(o_value) => unknown_fields(value, o_value, &path, out),
                    None => out.push(path),
                }
            }
        }
        (Value::Array(i), Value::Array(o)) => {
            for (idx, (value, o_value)) in i.iter().zip(o).enumerate() {
                unknown_fields(value, o_value, &format!("{at}[{idx}]"), out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> &'static Path {
        Path::new("/m/web.yaml")
    }

    #[test]
    fn multi_doc_is_rejected() {
        let y = b"apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b}\n";
        let e = parse_document(p(), y).unwrap_err();
        assert!(
            matches!(e, ManifestError::MultipleDocuments { count: 2, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("expected kind Pod"), "{e}");
        assert!(e.to_string().contains("/m/web.yaml"), "{e}");
    }

    #[test]
    fn leading_separator_and_comments_are_one_doc() {
        let y = b"# comment\n---\napiVersion: v1\nkind: Pod\n---\n# trailing\n";
        let v = parse_document(p(), y).unwrap();
        assert_eq!(v["kind"], "Pod");
    }

    #[test]
    fn empty_and_invalid() {
        assert!(matches!(
            parse_document(p(), b"").unwrap_err(),
            ManifestError::Empty { .. }
        ));
        assert!(matches!(
            parse_document(p(), b"# nothing\n").unwrap_err(),
            ManifestError::Empty { .. }
        ));
        let e = parse_document(p(), b"kind: Pod\n  bad: [indent\n").unwrap_err();
        assert!(matches!(e, ManifestError::Yaml { .. }), "{e}");
        assert!(
            e.to_string()
                .starts_with("manifest /m/web.yaml: invalid YAML"),
            "{e}"
        );
    }

    #[test]
    fn merge_keys_are_resolved() {
        let y = b"apiVersion: v1\nkind: Pod\nx: &a {k: 1}\ny:\n  <<: *a\n  j: 2\n";
        let v = parse_document(p(), y).unwrap();
        assert_eq!(v["y"]["k"], 1);
        assert_eq!(v["y"]["j"], 2);
    }

    #[test]
    fn kind_and_version() {
        let v = |s: &str| parse_document(p(), s.as_bytes()).unwrap();
        assert!(check_kind(p(), &v("apiVersion: v1\nkind: Pod")).is_ok());
        let e = check_kind(p(), &v("apiVersion: v1\nkind: PodList\nitems: []")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "manifest /m/web.yaml: expected kind Pod, found kind PodList; a static-pod manifest holds exactly one `kind: Pod`"
        );
        let e = check_kind(p(), &v("apiVersion: v1\nmetadata: {}")).unwrap_err();
        assert!(e.to_string().contains("found no kind"), "{e}");
        let e = check_kind(p(), &v("- a\n- b")).unwrap_err();
        assert!(e.to_string().contains("found a YAML list"), "{e}");
        let e = check_kind(p(), &v("apiVersion: apps/v1\nkind: Pod")).unwrap_err();
        assert!(matches!(e, ManifestError::WrongApiVersion { .. }), "{e}");
        assert!(e.to_string().contains("\"apps/v1\""), "{e}");
    }

    #[test]
    fn unknown_field_in_container_is_reported_with_its_path() {
        let y = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  creationTimestamp: null\nspec:\n  containers:\n  - name: c\n    image: nginx\n    comand: [sh]\n  - name: d\n    image: x\n    resources: {limits: {cpu: 1, memory: 64Mi}}\n  restartPolcy: Never\n";
        let v = parse_document(p(), y.as_bytes()).unwrap();
        let e = decode_pod(p(), &v).unwrap_err();
        match &e {
            ManifestError::UnknownFields { fields, .. } => assert_eq!(
                fields,
                &vec![
                    "spec.containers[0].comand".to_string(),
                    "spec.restartPolcy".to_string()
                ]
            ),
            other => panic!("{other}"),
        }
        assert!(
            e.to_string().starts_with(
                "manifest /m/web.yaml: spec.containers[0].comand: unknown field (did you mean \"command\"?), spec.restartPolcy: unknown field (did you mean \"restartPolicy\"?); check the spelling"
            ),
            "{e}"
        );
    }

    #[test]
    fn well_formed_pod_round_trips_without_unknown_fields() {
        let y = r#"
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}, annotations: {a: "1"}}
spec:
  securityContext: {}
  volumes: [{name: v, emptyDir: {sizeLimit: 1Gi}}]
  containers:
  - name: c
    image: nginx:1.27
    args: []
    env: [{name: A, value: "1"}, {name: B, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]
    ports: [{containerPort: 80, protocol: TCP}]
    livenessProbe: {httpGet: {port: http, path: /}, periodSeconds: 5}
    resources: {requests: {cpu: 100m}, limits: {memory: 128Mi}}
"#;
        let v = parse_document(p(), y.as_bytes()).unwrap();
        let pod = decode_pod(p(), &v).unwrap();
        assert_eq!(pod.spec.unwrap().containers[0].name, "c");
    }

    #[test]
    fn type_errors_name_the_field() {
        let y = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - name: c\n    image: i\n    env:\n    - name: PORT\n      value: 8080\n";
        let v = parse_document(p(), y.as_bytes()).unwrap();
        let e = decode_pod(p(), &v).unwrap_err();
        assert!(matches!(e, ManifestError::Decode { .. }), "{e}");
        assert!(
            e.to_string()
                .starts_with("manifest /m/web.yaml: spec.containers[0].env[0]: invalid type"),
            "{e}"
        );
    }
}
