//! Pod readiness gates (`spec.readinessGates`), as the kubelet's
//! `GeneratePodReadyCondition`: a pod whose containers are ready is Ready only when the
//! condition of every gate — written into the pod's status in the API server by someone
//! else, a load balancer controller for instance — is `True`. The node decides its
//! containers' readiness; the gates' conditions exist only in the API server, so this is
//! applied to the status the node writes there.

use k8s_openapi::api::core::v1::{PodCondition, PodReadinessGate, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The Ready condition's reason while a gate holds the pod back (the kubelet's).
pub const GATES_NOT_READY: &str = "ReadinessGatesNotReady";

const READY: &str = "Ready";

/// Why the gates hold the pod back, in the kubelet's words; `None` when every gate's
/// condition is `True`.
pub fn unready_message(gates: &[PodReadinessGate], conditions: &[PodCondition]) -> Option<String> {
    let unready: Vec<String> = gates
        .iter()
        .filter_map(|gate| {
            let kind = &gate.condition_type;
            match conditions.iter().find(|c| &c.type_ == kind) {
                None => Some(format!(
                    "corresponding condition of pod readiness gate {kind:?} does not exist."
                )),
                Some(c) if c.status != "True" => Some(format!(
                    "the status of pod readiness gate {kind:?} is not \"True\", but {}",
                    c.status
                )),
                Some(_) => None,
            }
        })
        .collect();
    (!unready.is_empty()).then(|| unready.join(", "))
}

/// `status`, the node's, with its Ready condition held `False` while a gate is not
/// `True` (`api_conditions`: the pod's conditions in the API server). A Ready that is
/// `False` for the containers' sake keeps the containers' reason. The condition's
/// `lastTransitionTime` is `now` when its status differs from the one `previous` (the
/// status last written) had, the previous time when it does not, and the node's own
/// on a first write the gates did not change: a gate moves the transition too.
pub fn apply(
    mut status: PodStatus,
    gates: &[PodReadinessGate],
    api_conditions: &[PodCondition],
    previous: Option<&PodStatus>,
    now: Time,
) -> PodStatus {
    if gates.is_empty() {
        return status;
    }
    let Some(ready) = status
        .conditions
        .iter_mut()
        .flatten()
        .find(|c| c.type_ == READY)
    else {
        return status;
    };
    let mut held = false;
    if ready.status == "True"
        && let Some(message) = unready_message(gates, api_conditions)
    {
        ready.status = "False".to_string();
        ready.reason = Some(GATES_NOT_READY.to_string());
        ready.message = Some(message);
        held = true;
    }
    let before = previous
        .and_then(|p| p.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == READY));
    match before {
        Some(b) if b.status == ready.status => {
            ready.last_transition_time = b.last_transition_time.clone();
        }
        Some(_) => ready.last_transition_time = Some(now),
        // First write: the node's own time, unless the gate changed the status.
        None if held => ready.last_transition_time = Some(now),
        None => {}
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(kind: &str) -> PodReadinessGate {
        PodReadinessGate {
            condition_type: kind.to_string(),
        }
    }

    fn condition(kind: &str, status: &str) -> PodCondition {
        PodCondition {
            type_: kind.to_string(),
            status: status.to_string(),
            ..Default::default()
        }
    }

    fn at(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).unwrap())
    }

    fn node_status(ready: &str, reason: Option<&str>, since: i64) -> PodStatus {
        PodStatus {
            conditions: Some(vec![
                condition("ContainersReady", ready),
                PodCondition {
                    reason: reason.map(str::to_string),
                    last_transition_time: Some(at(since)),
                    ..condition(READY, ready)
                },
            ]),
            ..Default::default()
        }
    }

    fn ready_of(status: &PodStatus) -> PodCondition {
        status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == READY)
            .cloned()
            .unwrap()
    }

    const GATE1: &str = "k8s.io/test-condition1";
    const GATE2: &str = "k8s.io/test-condition2";

    #[test]
    fn messages_name_each_gate_missing_or_not_true_in_the_kubelets_words() {
        let gates = [gate(GATE1), gate(GATE2)];
        assert_eq!(
            unready_message(&gates, &[condition(GATE2, "False")]).as_deref(),
            Some(
                "corresponding condition of pod readiness gate \"k8s.io/test-condition1\" does not exist., \
                 the status of pod readiness gate \"k8s.io/test-condition2\" is not \"True\", but False"
            )
        );
        assert_eq!(
            unready_message(
                &gates,
                &[condition(GATE1, "True"), condition(GATE2, "True")]
            ),
            None
        );
    }

    #[test]
    fn ready_containers_are_held_back_until_every_gate_is_true() {
        let gates = [gate(GATE1), gate(GATE2)];
        let node = node_status("True", None, 100);
        let held = apply(
            node.clone(),
            &gates,
            &[condition(GATE1, "True")],
            None,
            at(200),
        );
        let ready = ready_of(&held);
        assert_eq!(ready.status, "False");
        assert_eq!(ready.reason.as_deref(), Some(GATES_NOT_READY));
        assert_eq!(ready.last_transition_time, Some(at(200)));

        let both = [condition(GATE1, "True"), condition(GATE2, "True")];
        let released = apply(node.clone(), &gates, &both, Some(&held), at(300));
        assert_eq!(ready_of(&released).status, "True");
        assert_eq!(ready_of(&released).last_transition_time, Some(at(300)));

        // Unchanged since the last write: the transition time stays.
        let again = apply(node, &gates, &both, Some(&released), at(400));
        assert_eq!(ready_of(&again).last_transition_time, Some(at(300)));
    }

    #[test]
    fn unready_containers_keep_their_own_reason_and_no_gates_change_nothing() {
        let gates = [gate(GATE1)];
        let node = node_status("False", Some("ContainersNotReady"), 100);
        let out = apply(node.clone(), &gates, &[], None, at(200));
        assert_eq!(ready_of(&out).reason.as_deref(), Some("ContainersNotReady"));
        assert_eq!(ready_of(&out).last_transition_time, Some(at(100)));
        let ready_node = node_status("True", None, 100);
        assert_eq!(
            apply(ready_node.clone(), &[], &[], None, at(200)),
            ready_node
        );
    }
}
