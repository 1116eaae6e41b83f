//! `--node-labels` and `--register-with-taints`, checked as the kubelet checks them at
//! start: a label in the `kubernetes.io`/`k8s.io` namespaces is refused unless it is one
//! the kubelet may set on its own Node (the NodeRestriction admission plugin would
//! reject the whole registration otherwise), a taint needs a known effect.

use std::collections::BTreeMap;

pub use k8s_openapi::api::core::v1::Taint;

/// A node label or taint that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NodeLabelError {
    /// Not `key=value`.
    #[error("--node-labels: `{0}` is not KEY=VALUE")]
    LabelSyntax(String),
    /// A key in a namespace reserved for the control plane.
    #[error(
        "--node-labels: `{0}` is in the kubernetes.io/k8s.io namespace, which a node may not set \
         on itself (allowed there: kubelet.kubernetes.io/*, node.kubernetes.io/*, and the \
         well-known topology, os, arch and instance-type labels); use another prefix"
    )]
    RestrictedLabel(String),
    /// Not `key[=value]:Effect`.
    #[error("--register-with-taints: `{0}` is not KEY[=VALUE]:EFFECT")]
    TaintSyntax(String),
    /// An effect other than the three the API knows.
    #[error(
        "--register-with-taints: `{effect}` in `{taint}` is not an effect (NoSchedule, \
         PreferNoSchedule or NoExecute)"
    )]
    TaintEffect { taint: String, effect: String },
}

/// The labels a kubelet may set on its own Node although they are in a reserved
/// namespace (the kubelet's `kubeletapis.KubeletLabels`).
const ALLOWED_RESERVED_LABELS: &[&str] = &[
    "kubernetes.io/hostname",
    "kubernetes.io/instance-type",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/instance-type",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "node.kubernetes.io/instance-type",
];

/// Prefixes inside the reserved namespaces that belong to the kubelet.
const ALLOWED_RESERVED_PREFIXES: &[&str] = &["kubelet.kubernetes.io", "node.kubernetes.io"];

fn in_reserved_namespace(key: &str) -> bool {
    let Some((prefix, _)) = key.split_once('/') else {
        return false;
    };
    let reserved = |ns: &str| prefix == ns || prefix.ends_with(&format!(".{ns}"));
    reserved("kubernetes.io") || reserved("k8s.io")
}

fn allowed_label(key: &str) -> bool {
    if !in_reserved_namespace(key) || ALLOWED_RESERVED_LABELS.contains(&key) {
        return true;
    }
    let prefix = key.split_once('/').map_or("", |(p, _)| p);
    ALLOWED_RESERVED_PREFIXES
        .iter()
        .any(|allowed| prefix == *allowed || prefix.ends_with(&format!(".{allowed}")))
}

/// Parses `k1=v1,k2=v2` (empty: none).
pub fn parse_node_labels(text: &str) -> Result<BTreeMap<String, String>, NodeLabelError> {
    let mut labels = BTreeMap::new();
    for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (key, value) = item
            .split_once('=')
            .filter(|(k, _)| !k.trim().is_empty())
            .ok_or_else(|| NodeLabelError::LabelSyntax(item.to_string()))?;
        let key = key.trim();
        if !allowed_label(key) {
            return Err(NodeLabelError::RestrictedLabel(key.to_string()));
        }
        labels.insert(key.to_string(), value.trim().to_string());
    }
    Ok(labels)
}

/// Parses `key[=value]:Effect,…` (empty: none).
pub fn parse_taints(text: &str) -> Result<Vec<Taint>, NodeLabelError> {
    let mut taints = Vec::new();
    for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (key_value, effect) = item
            .rsplit_once(':')
            .ok_or_else(|| NodeLabelError::TaintSyntax(item.to_string()))?;
        if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
            return Err(NodeLabelError::TaintEffect {
                taint: item.to_string(),
                effect: effect.to_string(),
            });
        }
        let (key, value) = match key_value.split_once('=') {
            Some((k, v)) => (k, Some(v.to_string())),
            None => (key_value, None),
        };
        if key.is_empty() {
            return Err(NodeLabelError::TaintSyntax(item.to_string()));
        }
        taints.push(Taint {
            key: key.to_string(),
            value,
            effect: effect.to_string(),
            time_added: None,
        });
    }
    Ok(taints)
}
