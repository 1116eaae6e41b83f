//! The kubelet's node-side admission of a pod bound to it: the checks of
//! `pkg/kubelet/lifecycle/predicate.go` (`predicateAdmitHandler.Admit` and its
//! `generalFilter`, which runs the scheduler's `AdmissionCheck`), pure: the node,
//! the pod and what the node's active pods hold in, the failures out, with the
//! kubelet's reasons and messages.
//!
//! In the kubelet's order: the pod's `kubernetes.io/os` label and `spec.os` against
//! the node's OS (alone, before the rest); then every resource that does not fit,
//! required node affinity/nodeSelector, `spec.nodeName`, (host ports, checked by the
//! worker's port ledger), and untolerated `NoExecute` taints. The kubelet reports the
//! first failure only.

pub mod affinity;
pub mod fit;
pub mod node;
pub mod requests;
pub mod taints;

use std::borrow::Cow;

use k8s_openapi::api::core::v1::Pod;

pub use fit::Usage;
pub use node::NodeView;
pub use requests::{Resources, pod_requests};

/// The annotation naming where a pod came from (`file`, `http`, `api`).
pub const CONFIG_SOURCE_ANNOTATION: &str = "kubernetes.io/config.source";

/// Why the node does not admit a pod: the kubelet's `PredicateFailureReason`s and its
/// OS checks. `Display` is the kubelet's message, [`Unfit::reason`] its reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unfit {
    /// The node's allocatable, less what its active pods request, is short of the
    /// pod's request (cpu in millicores, the others in whole units).
    #[error(
        "Node didn't have enough resource: {resource}, requested: {requested}, used: {used}, \
         capacity: {capacity}"
    )]
    InsufficientResource {
        resource: String,
        requested: i64,
        used: i64,
        capacity: i64,
    },
    /// A scheduler predicate that does not hold: its plugin's name and reason.
    #[error("Predicate {predicate} failed: {description}")]
    Predicate {
        predicate: &'static str,
        description: &'static str,
    },
    /// The pod's `kubernetes.io/os` label names another OS.
    #[error("Failed to admit pod as the `kubernetes.io/os` label doesn't match node label")]
    OsLabel,
    /// The pod's `spec.os.name` is another OS.
    #[error("Failed to admit pod as the OS field doesn't match node OS")]
    OsField,
}

/// The node affinity predicate (`nodeaffinity.Name`, `ErrReasonPod`).
pub const NODE_AFFINITY: Unfit = Unfit::Predicate {
    predicate: "NodeAffinity",
    description: "node(s) didn't match Pod's node affinity/selector",
};

/// The node name predicate (`nodename.Name`, `ErrReason`).
pub const NODE_NAME: Unfit = Unfit::Predicate {
    predicate: "NodeName",
    description: "node(s) didn't match the requested node name",
};

/// The taint predicate (`tainttoleration.Name`, `ErrReasonNotMatch`).
pub const TAINT_TOLERATION: Unfit = Unfit::Predicate {
    predicate: "TaintToleration",
    description: "node(s) had taints that the pod didn't tolerate",
};

impl Unfit {
    /// The pod's `status.reason`: `OutOf<resource>` (`OutOfcpu`, `OutOfpods`, …), the
    /// predicate's name, or the OS check's constant.
    pub fn reason(&self) -> Cow<'static, str> {
        match self {
            Self::InsufficientResource { resource, .. } => format!("OutOf{resource}").into(),
            Self::Predicate { predicate, .. } => Cow::Borrowed(predicate),
            Self::OsLabel => "PodOSSelectorNodeLabelDoesNotMatch".into(),
            Self::OsField => "PodOSNotSupported".into(),
        }
    }

    /// Whether the kubelet checks this after host ports (only the taint check is).
    pub fn comes_after_host_ports(&self) -> bool {
        *self == TAINT_TOLERATION
    }
}

/// Whether a status reason is one this admission gives (so that a pod rejected with
/// it before a daemon restart stays rejected, whatever the order of re-admission).
pub fn is_admission_reason(reason: &str) -> bool {
    reason.starts_with("OutOf")
        || [
            NODE_AFFINITY,
            NODE_NAME,
            TAINT_TOLERATION,
            Unfit::OsLabel,
            Unfit::OsField,
        ]
        .iter()
        .any(|u| u.reason() == reason)
}

/// The reason of a pod rejected for a host port another pod holds (the kubelet's
/// `NodePorts` predicate, checked by the worker's port ledger).
pub const HOST_PORTS_REASON: &str = "NodePorts";

/// The kubelet's prefix of a rejected pod's `status.message`.
pub const REJECTED_PREFIX: &str = "Pod was rejected: ";

/// A pod a previous daemon rejected stays rejected, with its reason and message, as the
/// kubelet's rejected pods stay Failed even once what they lacked is freed (and so that
/// re-admission in another order after a restart cannot swap two pods). From the pod's
/// last published phase, reason and message; `None` when it was not rejected.
pub fn prior_rejection(
    phase: Option<&str>,
    reason: Option<&str>,
    message: Option<&str>,
) -> Option<(String, String)> {
    let reason = reason.filter(|r| *r == HOST_PORTS_REASON || is_admission_reason(r))?;
    if phase != Some("Failed") {
        return None;
    }
    let message = message.unwrap_or_default();
    let message = message.strip_prefix(REJECTED_PREFIX).unwrap_or(message);
    Some((reason.to_string(), message.to_string()))
}

/// A static pod (`kubernetes.io/config.source` other than `api`, as the kubelet's
/// `IsStaticPod`): from the manifest directory or URL.
pub fn is_static(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CONFIG_SOURCE_ANNOTATION))
        .is_none_or(|source| source != "api")
}

/// The OS checks the kubelet runs first, for every pod (static ones too): the node is
/// Linux.
pub fn os_mismatch(pod: &Pod) -> Option<Unfit> {
    let label = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("kubernetes.io/os"));
    if label.is_some_and(|os| os != "linux") {
        return Some(Unfit::OsLabel);
    }
    let field = pod.spec.as_ref().and_then(|s| s.os.as_ref());
    field
        .filter(|os| os.name != "linux")
        .map(|_| Unfit::OsField)
}

/// Every general predicate the pod fails on `node` whose active pods hold `used`,
/// in the kubelet's order (host ports excepted). `request` is [`pod_requests`] of the
/// pod.
pub fn general_predicates(
    pod: &Pod,
    request: &Resources,
    node: &NodeView,
    used: &Usage,
) -> Vec<Unfit> {
    let request = fit::without_missing_extended(request, node);
    let mut unfit = fit::insufficient_resources(&request, node, used);
    if !affinity::matches_required_affinity(pod, node) {
        unfit.push(NODE_AFFINITY);
    }
    let spec = pod.spec.as_ref();
    let node_name = spec
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default();
    if !node_name.is_empty() && node_name != node.name {
        unfit.push(NODE_NAME);
    }
    let tolerations = spec
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default();
    if taints::untolerated_no_execute(&node.taints, tolerations).is_some() {
        unfit.push(TAINT_TOLERATION);
    }
    unfit
}

#[cfg(test)]
mod tests;
