//! What podhost does with every field a manifest sets, from the table in
//! [`super::fields`]: one [`FieldReport`] per top-most decided field. Computed on the
//! manifest as written, so API defaults never show up. The daemon turns the ignored
//! ones into `FieldNotHonoured` warnings and the rejected ones into errors; `podhost
//! validate` prints them all.

use serde_json::Value;

use super::fields::{Decision, FieldOrigin, FieldStatus, NOT_YET, decide_for};

/// One field the manifest sets and what podhost does with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldReport {
    /// The concrete JSON path (`spec.containers[1].livenessProbe`).
    pub path: String,
    /// Honoured, ignored or rejected, with the reason ([`NOT_YET`] for fields the
    /// table does not list).
    pub status: FieldStatus,
}

impl FieldReport {
    /// The warning the daemon reports for an ignored field (`None` otherwise), e.g.
    /// `spec.containers[0].livenessProbe is not honoured yet and is ignored`.
    pub fn warning(&self) -> Option<String> {
        match self.status {
            FieldStatus::Ignored(NOT_YET) => {
                Some(format!("{} is not honoured yet and is ignored", self.path))
            }
            FieldStatus::Ignored(why) => Some(format!("{} is ignored: {why}", self.path)),
            FieldStatus::Honoured
            | FieldStatus::Informational(_)
            | FieldStatus::Rejected(_)
            | FieldStatus::NotEnforced(_) => None,
        }
    }
}

/// Every non-empty field of `manifest`, at the level the table decides it, sorted by
/// path.
pub fn field_report(manifest: &Value) -> Vec<FieldReport> {
    field_report_for(manifest, FieldOrigin::Manifest)
}

/// [`field_report`] for a pod of `origin`.
pub fn field_report_for(manifest: &Value, origin: FieldOrigin) -> Vec<FieldReport> {
    let mut out = Vec::new();
    walk(manifest, "", "", origin, &mut out);
    super::read_only_mounts::mark_forced_read_only(manifest, &mut out);
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// One warning per top-most non-empty ignored field, sorted (see
/// [`FieldReport::warning`]).
pub fn unhonoured_fields(manifest: &Value) -> Vec<String> {
    unhonoured_fields_for(manifest, FieldOrigin::Manifest)
}

/// [`unhonoured_fields`] for a pod of `origin`.
pub fn unhonoured_fields_for(manifest: &Value, origin: FieldOrigin) -> Vec<String> {
    field_report_for(manifest, origin)
        .iter()
        .filter_map(FieldReport::warning)
        .collect()
}

fn walk(
    value: &Value,
    concrete: &str,
    pattern: &str,
    origin: FieldOrigin,
    out: &mut Vec<FieldReport>,
) {
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
                visit(child, &c, &p, origin, out);
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
                    origin,
                    out,
                );
            }
        }
        _ => {}
    }
}

fn visit(
    value: &Value,
    concrete: &str,
    pattern: &str,
    origin: FieldOrigin,
    out: &mut Vec<FieldReport>,
) {
    let status = match decide_for(pattern, origin) {
        Decision::Whole(status) => status,
        Decision::Partly if value.is_object() || value.is_array() => {
            return walk(value, concrete, pattern, origin, out);
        }
        Decision::Partly | Decision::Unlisted => FieldStatus::Ignored(NOT_YET),
    };
    out.push(FieldReport {
        path: concrete.to_string(),
        status,
    });
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
                    "resources": {}
                }]
            }
        });
        assert_eq!(unhonoured_fields(&v), Vec::<String>::new());
        let paths: Vec<(String, &str)> = field_report(&v)
            .into_iter()
            .map(|r| (r.path, r.status.as_str()))
            .collect();
        assert!(paths.contains(&("spec.containers[0].image".into(), "honoured")));
        assert!(paths.contains(&("metadata.labels".into(), "honoured")));
        let links = json!({"spec": {"enableServiceLinks": true}});
        let r = field_report(&links);
        assert_eq!(r[0].path, "spec.enableServiceLinks");
        assert_eq!(r[0].status.as_str(), "ignored");
        assert!(r[0].status.reason().contains("none standalone"));
        assert_eq!(
            unhonoured_fields(&links),
            Vec::<String>::new(),
            "no warning"
        );
    }

    #[test]
    fn service_links_are_honoured_for_api_pods_and_informational_in_manifests() {
        let links = json!({"spec": {"enableServiceLinks": false}});
        let api = field_report_for(&links, FieldOrigin::Api);
        assert_eq!(api[0].path, "spec.enableServiceLinks");
        assert_eq!(api[0].status, FieldStatus::Honoured);
        let manifest = field_report_for(&links, FieldOrigin::Manifest);
        assert!(matches!(manifest[0].status, FieldStatus::Informational(_)));
        assert!(manifest[0].status.reason().contains("cluster mode"));
    }

    #[test]
    fn readiness_gates_are_honoured_for_api_pods_and_ignored_in_manifests() {
        let gates = json!({"spec": {"readinessGates": [{"conditionType": "example.com/lb"}]}});
        let api = field_report_for(&gates, FieldOrigin::Api);
        assert_eq!(api[0].path, "spec.readinessGates");
        assert_eq!(api[0].status, FieldStatus::Honoured);
        let manifest = field_report_for(&gates, FieldOrigin::Manifest);
        assert!(matches!(manifest[0].status, FieldStatus::Ignored(_)));
        assert!(manifest[0].status.reason().contains("not for static pods"));
    }

    #[test]
    fn unhonoured_fields_are_reported_topmost() {
        let v = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "generateName": "x-"},
            "spec": {
                "volumes": [{"name": "v", "emptyDir": {}}, {"name": "n", "nfs": {"server": "s"}}],
                "containers": [
                    {"name": "a", "image": "i", "ports": [{"containerPort": 80}]},
                    {
                        "name": "c", "image": "nginx",
                        "livenessProbe": {"exec": {"command": ["true"]}},
                        "workingDir": "/w",
                        "env": [{"name": "A", "value": "1"},
                                {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}],
                        "lifecycle": {"postStart": {"exec": {"command": ["x"]}},
                                      "preStop": {"tcpSocket": {"port": 80}}}
                    }
                ]
            }
        });
        let w = unhonoured_fields(&v);
        assert_eq!(
            w,
            vec![
                "metadata.generateName is not honoured yet and is ignored",
                "spec.containers[1].lifecycle.preStop.tcpSocket is not honoured yet and is ignored",
                "spec.volumes[1].nfs is not honoured yet and is ignored",
            ]
        );
    }

    #[test]
    fn rejected_fields_are_reported_not_warned() {
        let v = json!({"spec": {"ephemeralContainers": [{"name": "d", "image": "x"}]}});
        let r = field_report(&v);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].path, "spec.ephemeralContainers");
        assert_eq!(r[0].status.as_str(), "rejected");
        assert_eq!(unhonoured_fields(&v), Vec::<String>::new());
    }

    #[test]
    fn false_and_zero_still_warn() {
        let v = json!({"spec": {
            "automountServiceAccountToken": false,
            "containers": [{"resources": {"limits": {"ephemeral-storage": 0}}}]
        }});
        assert_eq!(unhonoured_fields(&v).len(), 2);
    }
}
