//! The node's conditions, as the kubelet's `setters.go` writes them: one per pressure
//! signal from the eviction manager, and Ready. A condition's lastTransitionTime moves
//! only when its status changes; lastHeartbeatTime with every status post.

use k8s_openapi::api::core::v1::NodeCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::eviction::NodeCondition as PressureKind;

/// What the eviction manager and the daemon observe now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodePressure {
    pub memory: bool,
    pub disk: bool,
    pub pid: bool,
    /// Why the node is not ready (e.g. the runtime's health); empty: ready.
    pub not_ready: Vec<String>,
}

/// The conditions to post now, from the previous ones (the Node as last written) and
/// what is observed: MemoryPressure, DiskPressure, PIDPressure, Ready, in the kubelet's
/// order. Conditions of other types (set by other agents) are kept as they are.
pub fn next_conditions(
    previous: &[NodeCondition],
    observed: &NodePressure,
    now: &Time,
) -> Vec<NodeCondition> {
    let ready_message = if observed.not_ready.is_empty() {
        None
    } else {
        Some(observed.not_ready.join(", "))
    };
    let mut next = vec![
        pressure(previous, PressureKind::MemoryPressure, observed.memory, now),
        pressure(previous, PressureKind::DiskPressure, observed.disk, now),
        pressure(previous, PressureKind::PidPressure, observed.pid, now),
        condition(
            previous,
            "Ready",
            ready_message.is_none(),
            if ready_message.is_none() {
                "KubeletReady"
            } else {
                "KubeletNotReady"
            },
            ready_message.unwrap_or_else(|| "kubelet is posting ready status".to_string()),
            now,
        ),
    ];
    let ours = |t: &str| next.iter().any(|c| c.type_ == t);
    let others: Vec<NodeCondition> = previous
        .iter()
        .filter(|c| !ours(&c.type_))
        .cloned()
        .collect();
    next.extend(others);
    next
}

/// Whether two condition lists differ in anything but heartbeat times: a status post
/// is due at once then, and otherwise only at the report frequency.
pub fn conditions_changed(before: &[NodeCondition], after: &[NodeCondition]) -> bool {
    let key = |c: &NodeCondition| {
        (
            c.type_.clone(),
            c.status.clone(),
            c.reason.clone(),
            c.message.clone(),
        )
    };
    before.len() != after.len() || before.iter().zip(after).any(|(b, a)| key(b) != key(a))
}

fn pressure(previous: &[NodeCondition], kind: PressureKind, on: bool, now: &Time) -> NodeCondition {
    condition(
        previous,
        kind.name(),
        on,
        kind.condition_reason(on),
        kind.message(on).to_string(),
        now,
    )
}

fn condition(
    previous: &[NodeCondition],
    type_: &str,
    status: bool,
    reason: &str,
    message: String,
    now: &Time,
) -> NodeCondition {
    let status = if status { "True" } else { "False" }.to_string();
    let transition = previous
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| now.clone());
    NodeCondition {
        type_: type_.to_string(),
        status,
        reason: Some(reason.to_string()),
        message: Some(message),
        last_heartbeat_time: Some(now.clone()),
        last_transition_time: Some(transition),
    }
}

impl NodePressure {
    /// The pressure the eviction manager reports (its conditions in the status store).
    pub fn from_eviction(conditions: &[NodeCondition], not_ready: Vec<String>) -> Self {
        let on = |kind: PressureKind| {
            conditions
                .iter()
                .any(|c| c.type_ == kind.name() && c.status == "True")
        };
        Self {
            memory: on(PressureKind::MemoryPressure),
            disk: on(PressureKind::DiskPressure),
            pid: on(PressureKind::PidPressure),
            not_ready,
        }
    }
}
