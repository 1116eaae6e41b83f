//! Warnings for fields a manifest sets that podhost does not honour yet (see
//! [`super::fields::HONOURED_FIELDS`]). Computed on the manifest as written, so API
//! defaults never cause warnings.

use serde_json::Value;

use super::fields::{Honour, honour};

/// One warning per top-most non-empty field outside the honoured list, sorted, e.g.
/// `spec.containers[0].livenessProbe is not honoured yet and is ignored`.
pub fn unhonoured_fields(manifest: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(manifest, "", "", &mut out);
    out.sort();
    out
}

fn walk(value: &Value, concrete: &str, pattern: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                if is_empty(child) {
                    continue;
                }
                let (c, p) = if concrete.is_empty() {
                    (key.clone(), key.clone())
                } else {
                    (format!("{concrete}.{key}"), format!("{pattern}.{key}"))
                };
                visit(child, &c, &p, out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                if is_empty(child) {
                    continue;
                }
                visit(
                    child,
                    &format!("{concrete}[{i}]"),
                    &format!("{pattern}[*]"),
                    out,
                );
            }
        }
        _ => {}
    }
}

fn visit(value: &Value, concrete: &str, pattern: &str, out: &mut Vec<String>) {
    match honour(pattern) {
        Honour::Whole => {}
        Honour::Partly if value.is_object() || value.is_array() => {
            walk(value, concrete, pattern, out)
        }
        Honour::Partly | Honour::Not => {
            out.push(format!("{concrete} is not honoured yet and is ignored"))
        }
    }
}

/// Null, "", [] and {} (recursively) ask for nothing.
fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.iter().all(is_empty),
        Value::Object(m) => m.values().all(is_empty),
        Value::Bool(_) | Value::Number(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn honoured_manifest_has_no_warnings() {
        let v = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "labels": {"a": "b"}, "creationTimestamp": null},
            "spec": {
                "restartPolicy": "Always",
                "hostNetwork": true,
                "containers": [{
                    "name": "c", "image": "nginx", "args": ["-x"],
                    "env": [{"name": "A", "value": "1"}],
                    "lifecycle": {"preStop": {"exec": {"command": ["sleep", "1"]}}},
                    "ports": [{"containerPort": 80}],
                    "resources": {}
                }]
            }
        });
        assert_eq!(unhonoured_fields(&v), Vec::<String>::new());
    }

    #[test]
    fn unhonoured_fields_are_reported_topmost() {
        let v = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "generateName": "x-"},
            "spec": {
                "volumes": [{"name": "v", "emptyDir": {}}],
                "containers": [
                    {"name": "a", "image": "i"},
                    {
                        "name": "c", "image": "nginx",
                        "livenessProbe": {"exec": {"command": ["true"]}},
                        "env": [{"name": "A", "value": "1"},
                                {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}],
                        "lifecycle": {"postStart": {"exec": {"command": ["x"]}},
                                      "preStop": {"httpGet": {"port": 80}}}
                    }
                ]
            }
        });
        let w = unhonoured_fields(&v);
        assert_eq!(
            w,
            vec![
                "metadata.generateName is not honoured yet and is ignored",
                "spec.containers[1].env[1].valueFrom is not honoured yet and is ignored",
                "spec.containers[1].lifecycle.postStart is not honoured yet and is ignored",
                "spec.containers[1].lifecycle.preStop.httpGet is not honoured yet and is ignored",
                "spec.containers[1].livenessProbe is not honoured yet and is ignored",
                "spec.volumes is not honoured yet and is ignored",
            ]
        );
    }

    #[test]
    fn false_and_zero_still_warn() {
        let v = json!({"spec": {"setHostnameAsFQDN": false, "activeDeadlineSeconds": 0}});
        assert_eq!(unhonoured_fields(&v).len(), 2);
    }
}
