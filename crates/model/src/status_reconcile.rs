//! Whether the API server's copy of a pod's status still says what the node last wrote,
//! as the kubelet's status manager asks every 10 s (`needsReconcile`): if someone else
//! changed it, the node writes its status again. Only what the status means is compared
//! — phase, reason, message, the IPs, start time, QoS class, the node's conditions and
//! each container's state — because an API server older than the node drops fields it
//! does not know (a 1.20 server keeps no `hostIPs`), which must not make the node write
//! the same status forever. Conditions others own (readiness gates) are theirs.

use k8s_openapi::api::core::v1::{ContainerState, ContainerStatus, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// A time as the API server keeps it: whole seconds (`metav1.Time` is serialized so).
fn secs(t: Option<&Time>) -> Option<i64> {
    t.map(|t| t.0.as_second())
}

/// Whether `api` (the API server's copy) agrees with `ours` (as last written).
pub fn agrees(ours: &PodStatus, api: &PodStatus) -> bool {
    ours.phase == api.phase
        && ours.reason == api.reason
        && ours.message == api.message
        && ours.host_ip == api.host_ip
        && ours.pod_ip == api.pod_ip
        && ips(ours) == ips(api)
        && secs(ours.start_time.as_ref()) == secs(api.start_time.as_ref())
        && ours.qos_class == api.qos_class
        && conditions_agree(ours.conditions.as_deref(), api.conditions.as_deref())
        && containers_agree(
            ours.container_statuses.as_deref(),
            api.container_statuses.as_deref(),
        )
        && containers_agree(
            ours.init_container_statuses.as_deref(),
            api.init_container_statuses.as_deref(),
        )
}

fn ips(status: &PodStatus) -> Vec<&str> {
    status
        .pod_ips
        .iter()
        .flatten()
        .map(|ip| ip.ip.as_str())
        .collect()
}

/// Each of our conditions is in the API's copy with the same status and reason.
fn conditions_agree(ours: Option<&[PodCondition]>, api: Option<&[PodCondition]>) -> bool {
    let api = api.unwrap_or_default();
    ours.unwrap_or_default().iter().all(|c| {
        api.iter()
            .any(|a| a.type_ == c.type_ && a.status == c.status && a.reason == c.reason)
    })
}

/// The same containers, each in the same state (kind, reason, exit code), readiness
/// and restart count.
fn containers_agree(ours: Option<&[ContainerStatus]>, api: Option<&[ContainerStatus]>) -> bool {
    let (ours, api) = (ours.unwrap_or_default(), api.unwrap_or_default());
    ours.len() == api.len()
        && ours.iter().all(|c| {
            api.iter().any(|a| {
                a.name == c.name
                    && a.ready == c.ready
                    && a.restart_count == c.restart_count
                    && a.started == c.started
                    && state_key(a.state.as_ref()) == state_key(c.state.as_ref())
            })
        })
}

/// A state as what it means: running since, waiting why, terminated how.
fn state_key(state: Option<&ContainerState>) -> (u8, Option<String>, Option<i64>) {
    let Some(state) = state else {
        return (0, None, None);
    };
    if let Some(t) = &state.terminated {
        (3, t.reason.clone(), Some(i64::from(t.exit_code)))
    } else if let Some(r) = &state.running {
        (2, None, secs(r.started_at.as_ref()))
    } else if let Some(w) = &state.waiting {
        (1, w.reason.clone(), None)
    } else {
        (0, None, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running() -> PodStatus {
        serde_json::from_value(serde_json::json!({
            "phase": "Running", "podIP": "10.1.0.5", "podIPs": [{"ip": "10.1.0.5"}],
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0,
                "image": "busybox", "imageID": "",
                "state": {"running": {"startedAt": "2026-11-24T19:26:15Z"}}}]
        }))
        .unwrap()
    }

    #[test]
    fn someone_elses_change_is_a_disagreement() {
        let ours = running();
        assert!(agrees(&ours, &ours.clone()));
        let mut phase = ours.clone();
        phase.phase = Some("Failed".into());
        assert!(!agrees(&ours, &phase));
        let mut ready = ours.clone();
        ready.conditions.as_mut().unwrap()[0].status = "False".into();
        assert!(!agrees(&ours, &ready));
        let mut restarted = ours.clone();
        restarted.container_statuses.as_mut().unwrap()[0].restart_count = 1;
        assert!(!agrees(&ours, &restarted));
        let mut no_ip = ours.clone();
        no_ip.pod_ip = None;
        assert!(!agrees(&ours, &no_ip));
    }

    #[test]
    fn times_agree_to_the_second_the_server_keeps() {
        let mut ours = running();
        let precise = crate::k8s_time::to_k8s(
            chrono::DateTime::from_timestamp(1_764_012_375, 987_654_321).unwrap(),
        );
        ours.start_time = Some(precise.clone());
        ours.container_statuses.as_mut().unwrap()[0]
            .state
            .as_mut()
            .unwrap()
            .running
            .as_mut()
            .unwrap()
            .started_at = Some(precise);
        // What the node sent, as the server stores and returns it.
        let wire = serde_json::to_value(&ours).unwrap();
        let api: PodStatus = serde_json::from_value(wire).unwrap();
        assert!(agrees(&ours, &api));
        let mut later = api.clone();
        later.start_time = Some(crate::k8s_time::to_k8s(
            chrono::DateTime::from_timestamp(1_764_012_376, 0).unwrap(),
        ));
        assert!(!agrees(&ours, &later));
    }

    #[test]
    fn conditions_others_own_are_theirs() {
        let ours = running();
        let mut gated = ours.clone();
        gated.conditions.as_mut().unwrap().push(PodCondition {
            type_: "example.com/gate".into(),
            status: "True".into(),
            ..PodCondition::default()
        });
        assert!(agrees(&ours, &gated));
    }
}
