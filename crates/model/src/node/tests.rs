use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::conditions::conditions_changed;
use super::object::{binary_si, millis};
use super::*;
use crate::eviction::parse_thresholds;

fn host() -> HostFacts {
    HostFacts {
        cpus: 2,
        memory_bytes: 8 << 30,
        ephemeral_storage_bytes: 100 << 30,
        machine_id: "m".into(),
        system_uuid: String::new(),
        boot_id: "b".into(),
        kernel_version: "6.1.0".into(),
        os_image: "Debian GNU/Linux 12 (bookworm)".into(),
        architecture: "amd64".into(),
        hostname: "Box-1".into(),
        internal_ips: vec!["10.0.0.5".into()],
    }
}

fn settings() -> NodeSettings {
    NodeSettings {
        name: "Box-1".into(),
        labels: parse_node_labels("tier=edge,node.kubernetes.io/role=x").unwrap(),
        taints: parse_taints("dedicated=edge:NoSchedule").unwrap(),
        kube_reserved: Reserved::parse("--kube-reserved", "cpu=100m,memory=256Mi").unwrap(),
        system_reserved: Reserved::parse("--system-reserved", "cpu=400m,ephemeral-storage=1Gi")
            .unwrap(),
        eviction_hard: parse_thresholds("memory.available<100Mi,nodefs.available<10%", "", "", "")
            .unwrap(),
        max_pods: 110,
        kubelet_port: 10250,
        kubelet_version: "v1.35.0".into(),
    }
}

fn at(s: &str) -> Time {
    Time(s.parse().unwrap())
}

#[test]
fn allocatable_holds_back_reserved_and_hard_eviction() {
    let a = allocatable(&host(), &settings());
    assert_eq!(a["cpu"].0, "1500m");
    // 8Gi − 256Mi − 100Mi
    assert_eq!(a["memory"].0, binary_si((8 << 30) - (356 << 20)));
    assert_eq!(a["memory"].0, "7836Mi");
    // 100Gi − 1Gi − 10Gi
    assert_eq!(a["ephemeral-storage"].0, "89Gi");
    assert_eq!(a["pods"].0, "110");
    let c = capacity(&host(), &settings());
    assert_eq!((c["cpu"].0.as_str(), c["memory"].0.as_str()), ("2", "8Gi"));
}

#[test]
fn allocatable_never_goes_negative() {
    let mut s = settings();
    s.kube_reserved = Reserved::parse("x", "cpu=3,memory=9Gi").unwrap();
    let a = allocatable(&host(), &s);
    assert_eq!((a["cpu"].0.as_str(), a["memory"].0.as_str()), ("0", "0"));
}

#[test]
fn node_object_has_the_kubelets_labels_taints_and_endpoint() {
    let node = node_object(&host(), &settings());
    let labels = node.metadata.labels.unwrap();
    assert_eq!(labels["kubernetes.io/hostname"], "box-1");
    assert_eq!(labels["kubernetes.io/arch"], "amd64");
    assert_eq!(labels["kubernetes.io/os"], "linux");
    assert_eq!(labels["tier"], "edge");
    let taints = node.spec.unwrap().taints.unwrap();
    assert_eq!(taints[0].key, "dedicated");
    assert_eq!(taints[0].value.as_deref(), Some("edge"));
    let status = node.status.unwrap();
    let port = status
        .daemon_endpoints
        .unwrap()
        .kubelet_endpoint
        .unwrap()
        .port;
    assert_eq!(port, 10250);
    let addresses = status.addresses.unwrap();
    assert_eq!(addresses[0].type_, "InternalIP");
    assert_eq!(addresses[1].address, "Box-1");
    let info = status.node_info.unwrap();
    assert!(info.container_runtime_version.starts_with("podhost://"));
}

#[test]
fn reserved_rejects_what_the_kubelet_rejects() {
    assert!(matches!(
        Reserved::parse("--kube-reserved", "gpu=1"),
        Err(ReservedError::UnknownResource { .. })
    ));
    assert!(matches!(
        Reserved::parse("--kube-reserved", "cpu"),
        Err(ReservedError::Syntax { .. })
    ));
    assert!(matches!(
        Reserved::parse("--kube-reserved", "memory=lots"),
        Err(ReservedError::Quantity { .. })
    ));
    let map = BTreeMap::from([("pid".to_string(), "1000".to_string())]);
    assert_eq!(Reserved::from_map("kubeReserved", &map).unwrap().pids, 1000);
}

#[test]
fn node_labels_in_reserved_namespaces_are_refused() {
    for bad in [
        "node-role.kubernetes.io/master=",
        "k8s.io/x=y",
        "node-restriction.kubernetes.io/a=b",
    ] {
        assert!(
            matches!(
                parse_node_labels(bad),
                Err(NodeLabelError::RestrictedLabel(_))
            ),
            "{bad}"
        );
    }
    for good in [
        "topology.kubernetes.io/zone=a",
        "kubelet.kubernetes.io/x=1",
        "example.com/k=v",
    ] {
        assert!(parse_node_labels(good).is_ok(), "{good}");
    }
    assert!(matches!(
        parse_node_labels("novalue"),
        Err(NodeLabelError::LabelSyntax(_))
    ));
}

#[test]
fn taints_need_a_known_effect() {
    let t = parse_taints("a:NoExecute,b=c:PreferNoSchedule").unwrap();
    assert_eq!(
        (t[0].value.clone(), t[1].value.as_deref()),
        (None, Some("c"))
    );
    assert!(matches!(
        parse_taints("a=b:Sometimes"),
        Err(NodeLabelError::TaintEffect { .. })
    ));
    assert!(matches!(
        parse_taints("a=b"),
        Err(NodeLabelError::TaintSyntax(_))
    ));
}

#[test]
fn conditions_keep_their_transition_time_until_the_status_changes() {
    let t0 = at("2026-01-01T00:00:00Z");
    let t1 = at("2026-01-01T00:00:10Z");
    let t2 = at("2026-01-01T00:00:20Z");
    let first = next_conditions(&[], &NodePressure::default(), &t0);
    let types: Vec<_> = first.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(
        types,
        ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
    );
    assert_eq!(first[3].reason.as_deref(), Some("KubeletReady"));

    let same = next_conditions(&first, &NodePressure::default(), &t1);
    assert!(!conditions_changed(&first, &same));
    assert_eq!(same[1].last_transition_time, Some(t0.clone()));
    assert_eq!(same[1].last_heartbeat_time, Some(t1));

    let disk = NodePressure {
        disk: true,
        ..NodePressure::default()
    };
    let pressured = next_conditions(&same, &disk, &t2);
    assert!(conditions_changed(&same, &pressured));
    assert_eq!(pressured[1].status, "True");
    assert_eq!(
        pressured[1].reason.as_deref(),
        Some("KubeletHasDiskPressure")
    );
    assert_eq!(pressured[1].last_transition_time, Some(t2));
    assert_eq!(pressured[0].last_transition_time, Some(t0));
}

#[test]
fn not_ready_names_the_reasons_and_foreign_conditions_stay() {
    let mut foreign = next_conditions(&[], &NodePressure::default(), &at("2026-01-01T00:00:00Z"));
    foreign.push(k8s_openapi::api::core::v1::NodeCondition {
        type_: "NetworkUnavailable".into(),
        status: "False".into(),
        ..Default::default()
    });
    let observed = NodePressure {
        not_ready: vec!["image store unreadable".into()],
        ..NodePressure::default()
    };
    let next = next_conditions(&foreign, &observed, &at("2026-01-01T00:01:00Z"));
    assert_eq!(next[3].status, "False");
    assert_eq!(next[3].message.as_deref(), Some("image store unreadable"));
    assert_eq!(next[4].type_, "NetworkUnavailable");
}

#[test]
fn quantities_are_canonical() {
    assert_eq!(binary_si(16 << 30), "16Gi");
    assert_eq!(binary_si(8_039_648 * 1024), "8039648Ki");
    assert_eq!(binary_si(1000), "1000");
    assert_eq!(binary_si(0), "0");
    assert_eq!(millis(2000), "2");
    assert_eq!(millis(1900), "1900m");
}
