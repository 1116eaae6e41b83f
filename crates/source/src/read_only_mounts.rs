//! `readOnly: false` on a mount of a configMap, secret, downwardAPI or projected volume
//! is not applied (such volumes are always mounted read-only, see
//! [`podhost_model::volume_confinement`]): its field is reported as ignored, so that
//! `podhost validate` says so and the daemon warns, instead of the table's "honoured".

use std::collections::HashSet;

use serde_json::Value;

use super::field_report::FieldReport;
use super::fields::FieldStatus;
use podhost_model::volume_confinement::{ALWAYS_READ_ONLY_KINDS, READ_ONLY_REASON};

/// Marks each `…volumeMounts[j].readOnly` of `report` that asks a content volume for
/// `false` as ignored, with the reason.
pub(super) fn mark_forced_read_only(manifest: &Value, report: &mut [FieldReport]) {
    let Some(spec) = manifest.get("spec") else {
        return;
    };
    let content: HashSet<&str> = spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| {
            ALWAYS_READ_ONLY_KINDS
                .iter()
                .any(|k| v.get(*k).is_some_and(|s| !s.is_null()))
        })
        .filter_map(|v| v.get("name")?.as_str())
        .collect();
    if content.is_empty() {
        return;
    }
    for list in ["initContainers", "containers"] {
        let containers = spec.get(list).and_then(Value::as_array);
        for (i, c) in containers.into_iter().flatten().enumerate() {
            let mounts = c.get("volumeMounts").and_then(Value::as_array);
            for (j, m) in mounts.into_iter().flatten().enumerate() {
                let asks_write = m.get("readOnly") == Some(&Value::Bool(false));
                let name = m.get("name").and_then(Value::as_str).unwrap_or_default();
                if !asks_write || !content.contains(name) {
                    continue;
                }
                let path = format!("spec.{list}[{i}].volumeMounts[{j}].readOnly");
                if let Some(r) = report
                    .iter_mut()
                    .find(|r| r.path == path && r.status == FieldStatus::Honoured)
                {
                    r.status = FieldStatus::Ignored(READ_ONLY_REASON);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::field_report::{field_report, unhonoured_fields};
    use super::*;

    #[test]
    fn read_only_false_on_a_content_volume_is_ignored_and_warned() {
        let v = json!({"spec": {
            "volumes": [
                {"name": "cm", "configMap": {"name": "x"}},
                {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}},
                {"name": "data", "emptyDir": {}}
            ],
            "initContainers": [{"name": "i", "volumeMounts": [
                {"name": "token", "mountPath": "/t", "readOnly": false}
            ]}],
            "containers": [{"name": "c", "volumeMounts": [
                {"name": "data", "mountPath": "/data", "readOnly": false},
                {"name": "cm", "mountPath": "/cm", "readOnly": false},
                {"name": "cm", "mountPath": "/cm2", "readOnly": true},
                {"name": "cm", "mountPath": "/cm3"}
            ]}]
        }});
        let status = |path: &str| {
            field_report(&v)
                .into_iter()
                .find(|r| r.path == path)
                .unwrap_or_else(|| panic!("{path}"))
                .status
        };
        assert_eq!(
            status("spec.containers[0].volumeMounts[1].readOnly"),
            FieldStatus::Ignored(READ_ONLY_REASON)
        );
        assert_eq!(
            status("spec.initContainers[0].volumeMounts[0].readOnly"),
            FieldStatus::Ignored(READ_ONLY_REASON)
        );
        assert_eq!(
            status("spec.containers[0].volumeMounts[0].readOnly"),
            FieldStatus::Honoured
        );
        assert_eq!(
            status("spec.containers[0].volumeMounts[2].readOnly"),
            FieldStatus::Honoured
        );
        assert_eq!(
            unhonoured_fields(&v),
            [
                format!(
                    "spec.containers[0].volumeMounts[1].readOnly is ignored: {READ_ONLY_REASON}"
                ),
                format!(
                    "spec.initContainers[0].volumeMounts[0].readOnly is ignored: {READ_ONLY_REASON}"
                ),
            ]
        );
    }
}
