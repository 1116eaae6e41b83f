//! A pod's status on the API server, as the kubelet's status manager writes it: a
//! strategic merge patch of `pods/<name>/status` carrying the pod's UID (a pod deleted
//! and recreated under the same name is never written with its predecessor's status:
//! the server refuses the patch), and, once a pod being deleted has fully terminated,
//! its deletion with grace 0 and the UID as precondition.
//!
//! The strategic merge keeps what others own: conditions merge by type (a readiness
//! gate's condition or the scheduler's stay), podIPs by ip.

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};

use super::ClusterError;
use super::register::FIELD_MANAGER;

/// The patch that sets `status` on the pod with `uid`.
pub fn status_patch(uid: &str, status: &PodStatus) -> serde_json::Value {
    let mut status = serde_json::to_value(status).unwrap_or_default();
    // A patch leaves out what it does not name: a reason or message the node no
    // longer has (or someone else wrote) is removed explicitly.
    if let Some(fields) = status.as_object_mut() {
        for key in CLEARED_WHEN_UNSET {
            fields.entry(key).or_insert(serde_json::Value::Null);
        }
        clear_unset_condition_fields(fields);
        delete_absent_conditions(fields);
    }
    serde_json::json!({
        "metadata": { "uid": uid },
        "status": status,
    })
}

/// Conditions only the node sets, which go away when done (an in-place resize's): a
/// strategic merge patch merges conditions by type, so one the node no longer shows is
/// deleted explicitly.
const DELETED_WHEN_ABSENT: [&str; 2] = [
    podhost_model::resize::PENDING,
    podhost_model::resize::IN_PROGRESS,
];

fn delete_absent_conditions(fields: &mut serde_json::Map<String, serde_json::Value>) {
    let Some(serde_json::Value::Array(conditions)) = fields.get_mut("conditions") else {
        return;
    };
    for kind in DELETED_WHEN_ABSENT {
        if !conditions.iter().any(|c| c["type"] == kind) {
            conditions.push(serde_json::json!({"type": kind, "$patch": "delete"}));
        }
    }
}

/// Status fields a patch sets to null when the node's status has none.
const CLEARED_WHEN_UNSET: [&str; 2] = ["reason", "message"];

/// A condition merges into the API's by type, field by field: a condition turning True
/// would keep the reason and message of its False past (`ContainersReady True
/// ContainersNotReady`). Each condition the node writes nulls the ones it has not.
fn clear_unset_condition_fields(fields: &mut serde_json::Map<String, serde_json::Value>) {
    let Some(serde_json::Value::Array(conditions)) = fields.get_mut("conditions") else {
        return;
    };
    for condition in conditions.iter_mut().filter_map(|c| c.as_object_mut()) {
        for key in CLEARED_WHEN_UNSET {
            condition.entry(key).or_insert(serde_json::Value::Null);
        }
    }
}

/// How a write about one pod ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodWrite {
    /// The API server took it.
    Done,
    /// The pod is gone, or the name now holds another pod (UID precondition failed):
    /// nothing more is to be written about this one.
    Gone,
}

/// Patches the status of the pod `namespace/name` with `uid`.
pub async fn patch_status(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    uid: &str,
    status: &PodStatus,
) -> Result<PodWrite, ClusterError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    let result = pods
        .patch_status(name, &params, &Patch::Strategic(status_patch(uid, status)))
        .await;
    settle(&pods, name, uid, result.map(|_| ()), || {
        format!("patching the status of pod {namespace}/{name}")
    })
    .await
}

/// Deletes the fully terminated pod `namespace/name` with `uid`: grace 0, UID
/// precondition, as the kubelet's status manager once the pod's containers and
/// volumes are gone.
pub async fn delete_terminated(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    uid: &str,
) -> Result<PodWrite, ClusterError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let result = pods.delete(name, &params).await;
    settle(&pods, name, uid, result.map(|_| ()), || {
        format!("deleting the terminated pod {namespace}/{name}")
    })
    .await
}

/// Not found, conflict (the delete's UID precondition) and a refused change of the
/// UID (see [`changes_the_uid`]) mean the pod this write was for is gone. Another
/// refusal (403) or invalid write (422) may mean the same: NodeRestriction refuses a
/// node's write about a pod bound to another node before the UID is looked at. One
/// read of the pod tells that from a refusal of this node's own pod, which stays an
/// error the caller retries. (The kubelet's status manager reads the pod before every write;
/// podhost reads it only when a write was refused.) Other errors are the caller's to
/// retry.
async fn settle(
    pods: &Api<Pod>,
    name: &str,
    uid: &str,
    result: Result<(), kube::Error>,
    what: impl FnOnce() -> String,
) -> Result<PodWrite, ClusterError> {
    match result {
        Ok(()) => Ok(PodWrite::Done),
        Err(kube::Error::Api(status))
            if status.code == 404 || status.code == 409 || changes_the_uid(&status) =>
        {
            Ok(PodWrite::Gone)
        }
        Err(kube::Error::Api(status)) if status.code == 403 || status.code == 422 => {
            match pod_now_holds_another(pods, name, uid).await {
                true => {
                    tracing::info!(pod = name, %uid, code = status.code, "the pod's name now holds another pod: its status is no longer written");
                    Ok(PodWrite::Gone)
                }
                false => Err(ClusterError::Api {
                    what: what(),
                    source: kube::Error::Api(status),
                }),
            }
        }
        Err(source) => Err(ClusterError::Api {
            what: what(),
            source,
        }),
    }
}

/// Whether the pod named `name` is gone or is now another pod than `uid`. A node may
/// read every pod bound to it, so a refused read means the name holds a pod bound
/// elsewhere (the node authorizer's AuthorizeNodeWithSelectors, which 1.36 applies; an
/// older server lets the node read it, and the UID tells). False when it cannot be told.
async fn pod_now_holds_another(pods: &Api<Pod>, name: &str, uid: &str) -> bool {
    match pods.get_opt(name).await {
        Ok(None) => true,
        Ok(Some(pod)) => pod.metadata.uid.as_deref() != Some(uid),
        Err(kube::Error::Api(status)) if status.code == 403 => true,
        Err(_) => false,
    }
}

/// Whether the server refused a write because it would change the pod's UID: a PATCH
/// has no preconditions (a DELETE's are checked, 409), so the UID in a status patch
/// for a pod since recreated under the same name is a change of the immutable
/// `metadata.uid`, refused as invalid (422). Without this the write would be retried
/// for as long as the old pod is known, every try refused.
fn changes_the_uid(status: &kube::core::Status) -> bool {
    status.code == 422
        && status
            .details
            .as_ref()
            .is_some_and(|d| d.causes.iter().any(|c| c.field == "metadata.uid"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_patch_carries_the_uid_precondition_and_the_status() {
        let status = PodStatus {
            phase: Some("Running".into()),
            ..PodStatus::default()
        };
        let patch = status_patch("u-1", &status);
        assert_eq!(patch["metadata"]["uid"], "u-1");
        assert_eq!(patch["status"]["phase"], "Running");
        // Unset reason and message are removed from the API's copy, not left there.
        assert!(patch["status"]["reason"].is_null());
        assert!(patch["status"].as_object().unwrap().contains_key("reason"));
        assert!(patch["status"].as_object().unwrap().contains_key("message"));
        let failed = PodStatus {
            reason: Some("Evicted".into()),
            ..status
        };
        assert_eq!(status_patch("u-1", &failed)["status"]["reason"], "Evicted");
    }

    #[test]
    fn a_resize_condition_the_node_no_longer_shows_is_deleted_by_the_patch() {
        let condition = |kind: &str| k8s_openapi::api::core::v1::PodCondition {
            type_: kind.into(),
            status: "True".into(),
            ..Default::default()
        };
        let status = PodStatus {
            conditions: Some(vec![condition("Ready"), condition("PodResizeInProgress")]),
            ..PodStatus::default()
        };
        let patch = status_patch("u-1", &status);
        assert_eq!(
            patch["status"]["conditions"],
            serde_json::json!([
                {"type": "Ready", "status": "True", "reason": null, "message": null},
                {"type": "PodResizeInProgress", "status": "True", "reason": null, "message": null},
                {"type": "PodResizePending", "$patch": "delete"}
            ])
        );
        // No conditions at all: nothing of them is patched.
        let patch = status_patch("u-1", &PodStatus::default());
        assert!(patch["status"].get("conditions").is_none());
    }

    #[test]
    fn only_a_refused_uid_change_is_taken_for_a_pod_gone_among_invalid_writes() {
        let refused = |field: &str| -> kube::core::Status {
            serde_json::from_value(serde_json::json!({
                "status": "Failure", "code": 422, "reason": "Invalid",
                "message": "Pod \"app\" is invalid",
                "details": {"name": "app", "kind": "Pod",
                    "causes": [{"reason": "FieldValueInvalid", "field": field}]}
            }))
            .unwrap()
        };
        assert!(changes_the_uid(&refused("metadata.uid")));
        assert!(!changes_the_uid(&refused("status.podIPs")));
    }
}
