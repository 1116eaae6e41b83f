//! `nodeSelector` and required node affinity against the node's labels and name, as
//! `component-helpers/scheduling/corev1/nodeaffinity` (`GetRequiredNodeAffinity`,
//! `Match`) evaluates them: the selector's every label must be equal, and one of the
//! `nodeSelectorTerms` must match.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, Pod};

use super::node::NodeView;

/// Whether the pod's `nodeSelector` and its
/// `requiredDuringSchedulingIgnoredDuringExecution` node affinity both match.
pub fn matches_required_affinity(pod: &Pod, node: &NodeView) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return true;
    };
    let selector_matches = spec
        .node_selector
        .iter()
        .flatten()
        .all(|(key, value)| node.labels.get(key) == Some(value));
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    selector_matches
        && required.is_none_or(|r| {
            r.node_selector_terms
                .iter()
                .any(|term| term_matches(term, node))
        })
}

/// One term: all its label expressions and all its field expressions. A term with
/// neither matches nothing, and so does one that cannot be parsed (the helper skips
/// terms with errors).
fn term_matches(term: &NodeSelectorTerm, node: &NodeView) -> bool {
    let labels = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if labels.is_empty() && fields.is_empty() {
        return false;
    }
    let labels_match = labels
        .iter()
        .map(|r| label_requirement(r, &node.labels))
        .try_fold(true, |all, one| one.map(|m| all && m));
    let fields_match = fields
        .iter()
        .map(|r| field_requirement(r, &node.name))
        .try_fold(true, |all, one| one.map(|m| all && m));
    matches!((labels_match, fields_match), (Some(true), Some(true)))
}

/// A label expression, `None` when it is malformed (`labels.NewRequirement`'s
/// refusals: In/NotIn without values, Exists/DoesNotExist with values, Gt/Lt without
/// exactly one integer, an unknown operator).
fn label_requirement(
    r: &NodeSelectorRequirement,
    labels: &BTreeMap<String, String>,
) -> Option<bool> {
    let values = r.values.as_deref().unwrap_or_default();
    let label = labels.get(&r.key);
    match r.operator.as_str() {
        "In" if !values.is_empty() => Some(label.is_some_and(|l| values.contains(l))),
        "NotIn" if !values.is_empty() => Some(label.is_none_or(|l| !values.contains(l))),
        "Exists" if values.is_empty() => Some(label.is_some()),
        "DoesNotExist" if values.is_empty() => Some(label.is_none()),
        op @ ("Gt" | "Lt") if values.len() == 1 => {
            let bound: i64 = values[0].parse().ok()?;
            let value = label.and_then(|l| l.parse::<i64>().ok());
            Some(value.is_some_and(|v| if op == "Gt" { v > bound } else { v < bound }))
        }
        _ => None,
    }
}

/// A field expression: only `metadata.name`, with In or NotIn and exactly one value
/// (`nodeSelectorRequirementsAsFieldSelector`); `None` otherwise.
fn field_requirement(r: &NodeSelectorRequirement, node_name: &str) -> Option<bool> {
    let values = r.values.as_deref().unwrap_or_default();
    if r.key != "metadata.name" || values.len() != 1 {
        return None;
    }
    match r.operator.as_str() {
        "In" => Some(values[0] == node_name),
        "NotIn" => Some(values[0] != node_name),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> NodeView {
        NodeView {
            name: "box".into(),
            labels: [("disk", "ssd"), ("zone", "a"), ("cores", "8")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..NodeView::default()
        }
    }

    fn pod(spec: &str) -> Pod {
        serde_yaml_ng::from_str(&format!("spec:\n{spec}\n  containers: []")).unwrap()
    }

    fn with_terms(terms: &str) -> Pod {
        pod(&format!(
            "  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms: {terms}"
        ))
    }

    #[test]
    fn node_selector_needs_every_label_equal() {
        assert!(matches_required_affinity(
            &pod("  nodeSelector: {disk: ssd, zone: a}"),
            &node()
        ));
        assert!(!matches_required_affinity(
            &pod("  nodeSelector: {disk: hdd}"),
            &node()
        ));
        assert!(!matches_required_affinity(
            &pod("  nodeSelector: {gpu: \"yes\"}"),
            &node()
        ));
        assert!(matches_required_affinity(
            &pod("  hostNetwork: false"),
            &node()
        ));
    }

    #[test]
    fn each_operator_of_match_expressions() {
        let cases = [
            ("{key: disk, operator: In, values: [hdd, ssd]}", true),
            ("{key: disk, operator: In, values: [hdd]}", false),
            ("{key: gpu, operator: In, values: [x]}", false),
            ("{key: disk, operator: NotIn, values: [hdd]}", true),
            ("{key: gpu, operator: NotIn, values: [x]}", true),
            ("{key: disk, operator: NotIn, values: [ssd]}", false),
            ("{key: zone, operator: Exists}", true),
            ("{key: gpu, operator: Exists}", false),
            ("{key: gpu, operator: DoesNotExist}", true),
            ("{key: zone, operator: DoesNotExist}", false),
            ("{key: cores, operator: Gt, values: [\"4\"]}", true),
            ("{key: cores, operator: Gt, values: [\"8\"]}", false),
            ("{key: cores, operator: Lt, values: [\"16\"]}", true),
            ("{key: zone, operator: Lt, values: [\"16\"]}", false),
            // Malformed: the term matches nothing.
            ("{key: disk, operator: In, values: []}", false),
            ("{key: zone, operator: Exists, values: [a]}", false),
            ("{key: cores, operator: Gt, values: [\"4\", \"5\"]}", false),
            ("{key: cores, operator: Gt, values: [four]}", false),
            ("{key: disk, operator: Like, values: [ssd]}", false),
        ];
        for (expr, want) in cases {
            let p = with_terms(&format!("[{{matchExpressions: [{expr}]}}]"));
            assert_eq!(matches_required_affinity(&p, &node()), want, "{expr}");
        }
    }

    #[test]
    fn match_fields_know_only_the_nodes_name() {
        let cases = [
            ("{key: metadata.name, operator: In, values: [box]}", true),
            ("{key: metadata.name, operator: In, values: [other]}", false),
            (
                "{key: metadata.name, operator: NotIn, values: [other]}",
                true,
            ),
            (
                "{key: metadata.name, operator: In, values: [box, other]}",
                false,
            ),
            ("{key: metadata.uid, operator: In, values: [box]}", false),
            ("{key: metadata.name, operator: Exists}", false),
        ];
        for (expr, want) in cases {
            let p = with_terms(&format!("[{{matchFields: [{expr}]}}]"));
            assert_eq!(matches_required_affinity(&p, &node()), want, "{expr}");
        }
    }

    #[test]
    fn terms_are_ored_their_expressions_anded() {
        let both = "[{matchExpressions: [{key: disk, operator: In, values: [ssd]}], \
                    matchFields: [{key: metadata.name, operator: In, values: [other]}]}]";
        assert!(!matches_required_affinity(&with_terms(both), &node()));
        let either = "[{matchExpressions: [{key: disk, operator: In, values: [hdd]}]}, \
                      {matchExpressions: [{key: zone, operator: In, values: [a]}]}]";
        assert!(matches_required_affinity(&with_terms(either), &node()));
        assert!(!matches_required_affinity(&with_terms("[{}]"), &node()));
        assert!(!matches_required_affinity(&with_terms("[]"), &node()));
    }

    #[test]
    fn selector_and_affinity_must_both_match() {
        let p = pod(
            "  nodeSelector: {disk: hdd}\n  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: Exists}]}]",
        );
        assert!(!matches_required_affinity(&p, &node()));
    }
}
