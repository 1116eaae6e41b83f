use super::*;
use crate::node::parse_taints;

fn pod(yaml: &str) -> Pod {
    serde_yaml_ng::from_str(yaml).unwrap()
}

fn node() -> NodeView {
    NodeView {
        name: "box".into(),
        labels: [("disk".to_string(), "ssd".to_string())].into(),
        taints: parse_taints("maintenance:NoExecute,gpu:NoSchedule").unwrap(),
        allocatable: Resources {
            cpu_millis: 1000,
            memory_bytes: 1 << 30,
            ephemeral_storage_bytes: 1 << 30,
            ..Resources::default()
        },
        max_pods: 10,
    }
}

fn check(p: &Pod, used: &Usage) -> Vec<Unfit> {
    general_predicates(p, &pod_requests(p), &node(), used)
}

const TOLERATES_MAINTENANCE: &str = "  tolerations: [{key: maintenance, operator: Exists}]\n";

#[test]
fn a_fitting_tolerating_matching_pod_is_admitted() {
    let p = pod(&format!(
        "spec:\n  nodeName: box\n  nodeSelector: {{disk: ssd}}\n{TOLERATES_MAINTENANCE}  containers:\n  - name: a\n    resources: {{requests: {{cpu: 500m, memory: 512Mi}}}}\n"
    ));
    let mut used = Usage::default();
    used.add_pod(&Resources {
        cpu_millis: 500,
        memory_bytes: 512 << 20,
        ..Resources::default()
    });
    assert_eq!(check(&p, &used), []);
}

#[test]
fn failures_come_in_the_kubelets_order_with_its_messages() {
    let p = pod(
        "spec:\n  nodeName: other\n  nodeSelector: {disk: hdd}\n  containers:\n  - name: a\n    resources: {requests: {memory: 2Gi}}\n",
    );
    let unfit = check(&p, &Usage::default());
    let shown: Vec<(String, String)> = unfit
        .iter()
        .map(|u| (u.reason().into_owned(), u.to_string()))
        .collect();
    let expected = [
        (
            "OutOfmemory",
            "Node didn't have enough resource: memory, requested: 2147483648, used: 0, capacity: 1073741824",
        ),
        (
            "NodeAffinity",
            "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
        ),
        (
            "NodeName",
            "Predicate NodeName failed: node(s) didn't match the requested node name",
        ),
        (
            "TaintToleration",
            "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate",
        ),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(r, m)| (r.to_string(), m.to_string()))
        .collect();
    assert_eq!(shown, expected);
    assert!(unfit[3].comes_after_host_ports());
    assert!(!unfit[0].comes_after_host_ports());
}

#[test]
fn a_no_schedule_taint_is_the_schedulers_business_not_the_nodes() {
    let p = pod(&format!("spec:\n{TOLERATES_MAINTENANCE}  containers: []\n"));
    assert_eq!(check(&p, &Usage::default()), []);
}

#[test]
fn an_unset_node_name_is_not_checked() {
    let p = pod(&format!("spec:\n{TOLERATES_MAINTENANCE}  containers: []\n"));
    assert!(!check(&p, &Usage::default()).contains(&NODE_NAME));
}

#[test]
fn the_source_annotation_tells_static_pods() {
    let with = |source: &str| {
        pod(&format!(
            "metadata: {{annotations: {{kubernetes.io/config.source: {source}}}}}\nspec: {{containers: []}}"
        ))
    };
    assert!(is_static(&with("file")));
    assert!(is_static(&with("http")));
    assert!(!is_static(&with("api")));
    assert!(is_static(&pod("spec: {containers: []}")));
}

#[test]
fn os_checks_have_their_own_reasons() {
    let labelled = pod("metadata: {labels: {kubernetes.io/os: windows}}\nspec: {containers: []}");
    let unfit = os_mismatch(&labelled).unwrap();
    assert_eq!(unfit.reason(), "PodOSSelectorNodeLabelDoesNotMatch");
    assert_eq!(
        unfit.to_string(),
        "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"
    );
    let field = pod("spec: {os: {name: windows}, containers: []}");
    assert_eq!(os_mismatch(&field).unwrap().reason(), "PodOSNotSupported");
    let linux = pod(
        "metadata: {labels: {kubernetes.io/os: linux}}\nspec: {os: {name: linux}, containers: []}",
    );
    assert_eq!(os_mismatch(&linux), None);
}

#[test]
fn admission_reasons_are_recognised() {
    for reason in [
        "OutOfcpu",
        "OutOfpods",
        "OutOfexample.com/gpu",
        "NodeAffinity",
        "NodeName",
        "TaintToleration",
        "PodOSNotSupported",
        "PodOSSelectorNodeLabelDoesNotMatch",
    ] {
        assert!(is_admission_reason(reason), "{reason}");
    }
    assert!(!is_admission_reason("NodePorts"));
    assert!(!is_admission_reason("Evicted"));
}

#[test]
fn a_pod_rejected_before_a_restart_stays_rejected_and_nothing_else_does() {
    let rejected = |phase, reason, message| prior_rejection(phase, reason, message);
    // (phase, reason, message) -> prior rejection
    assert_eq!(
        rejected(
            Some("Failed"),
            Some("OutOfcpu"),
            Some("Pod was rejected: Node didn't have enough resource: cpu")
        ),
        Some((
            "OutOfcpu".into(),
            "Node didn't have enough resource: cpu".into()
        ))
    );
    assert_eq!(
        rejected(Some("Failed"), Some(HOST_PORTS_REASON), None),
        Some(("NodePorts".into(), String::new()))
    );
    assert_eq!(
        rejected(Some("Failed"), Some("NodeAffinity"), Some("no prefix")),
        Some(("NodeAffinity".into(), "no prefix".into()))
    );
    // Failed for another reason (its containers failed, it was evicted): admitted again.
    assert_eq!(rejected(Some("Failed"), Some("Evicted"), Some("x")), None);
    assert_eq!(rejected(Some("Failed"), None, None), None);
    // Not Failed: never a rejection.
    assert_eq!(rejected(Some("Running"), Some("OutOfcpu"), None), None);
    assert_eq!(rejected(None, Some("NodePorts"), None), None);
}
