//! A pod network that something outside podhost broke while the pod ran (its host veth
//! deleted, podhost's nftables table deleted): `check` names what is gone and a
//! repeated `setup` makes it again with the same addresses. And two bridge networks
//! (two daemons' root dirs) in one host namespace: the second refuses the first's
//! bridge and overlapping CIDRs, and on its own bridge touches nothing of the first.
//! Each test makes its own namespaces (see tests/network_bridge.rs).

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common_bridge;

use std::collections::HashSet;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common_bridge::*;
use podhost::model::host_ports::{HostPort, Protocol};
use podhost::network::bridge::{BridgeConfig, BridgeError, BridgeNetwork};
use podhost::network::{NetworkHealth, PodNetRequest};

fn request(uid: &str, pod: &NetNs, host_port: Option<u16>) -> PodNetRequest {
    PodNetRequest {
        uid: uid.into(),
        namespace: "default".into(),
        name: format!("pod-{uid}"),
        netns: pod.path(),
        host_ports: host_port
            .map(|p| HostPort {
                host_ip: None,
                host_port: p,
                container_port: 80,
                protocol: Protocol::Tcp,
                container_index: 0,
            })
            .into_iter()
            .collect(),
    }
}

/// A root dir of its own: (its guard, its bridge state dir).
fn root() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("network/bridge");
    (dir, path)
}

fn config(state_dir: &Path, bridge: &str, cidrs: &str) -> BridgeConfig {
    BridgeConfig {
        bridge: bridge.into(),
        cidrs: BridgeConfig::parse_cidrs(cidrs).unwrap(),
        cluster_cidrs: Vec::new(),
        state_dir: state_dir.to_path_buf(),
    }
}

fn default_config(state_dir: &Path) -> BridgeConfig {
    BridgeConfig::with_defaults(state_dir.to_path_buf())
}

/// The pod's global addresses on eth0, sorted as the status gives them (IPv4 first).
fn pod_addresses(pod: &NetNs) -> Vec<IpAddr> {
    let mut ips = pod.addresses("eth0");
    ips.sort_by_key(|ip| !ip.is_ipv4());
    ips
}

#[test]
fn a_deleted_host_veth_is_reported_missing_and_setup_makes_it_again_with_the_same_addresses() {
    require_root();
    let host = Arc::new(NetNs::with_role("host"));
    let pod = Arc::new(NetNs::with_role("pod"));
    let (_keep, state_dir) = root();
    let req = request("veth-gone", &pod, Some(8080));
    tcp_who_am_i(&pod, "[::]:80");
    let h = host.clone();
    let p = pod.clone();
    host.block_on(move || async move {
        let net = BridgeNetwork::new(default_config(&state_dir))
            .await
            .unwrap();
        let status = net.setup(&req).await.unwrap();
        assert_eq!(
            net.check(&req, &status.ips).await.unwrap(),
            NetworkHealth::Attached
        );
        assert_eq!(
            tcp_ask(&h, "127.0.0.1:8080".parse().unwrap()),
            Ok("10.86.0.1".into())
        );

        let veth = net.host_veth(&req.uid);
        h.ip(&["link", "del", &veth]);
        assert!(
            !p.links().contains(&"eth0".to_string()),
            "the pair went with it"
        );
        assert_eq!(
            net.check(&req, &status.ips).await.unwrap(),
            NetworkHealth::Missing(format!("veth {veth}"))
        );
        assert!(tcp_ask(&h, "127.0.0.1:8080".parse().unwrap()).is_err());

        let again = net.setup(&req).await.unwrap();
        assert_eq!(again.ips, status.ips, "the same addresses after the repair");
        assert_eq!(pod_addresses(&p), status.ips);
        assert_eq!(
            net.check(&req, &status.ips).await.unwrap(),
            NetworkHealth::Attached
        );
        assert_eq!(
            tcp_ask(&h, "127.0.0.1:8080".parse().unwrap()),
            Ok("10.86.0.1".into()),
            "the hostPort answers again"
        );

        // An address removed inside the pod is named, and comes back the same way.
        let v4 = status.ips[0].to_string();
        p.ip(&["addr", "del", &format!("{v4}/16"), "dev", "eth0"]);
        assert_eq!(
            net.check(&req, &status.ips).await.unwrap(),
            NetworkHealth::Missing(format!("address {v4} on eth0"))
        );
        net.setup(&req).await.unwrap();
        assert_eq!(
            net.check(&req, &status.ips).await.unwrap(),
            NetworkHealth::Attached
        );
        net.teardown(&req.uid).await.unwrap();
    });
}

#[test]
fn a_deleted_nftables_table_is_reported_missing_and_setup_applies_it_again() {
    require_root();
    let host = Arc::new(NetNs::with_role("host"));
    let pod = Arc::new(NetNs::with_role("pod"));
    let quiet = Arc::new(NetNs::with_role("pod"));
    let (_keep, state_dir) = root();
    let req = request("table-gone", &pod, Some(8081));
    // A pod without hostPorts also repairs the table: its masquerade lives there.
    let quiet_req = request("quiet", &quiet, None);
    tcp_who_am_i(&pod, "[::]:80");
    let h = host.clone();
    host.block_on(move || async move {
        let net = BridgeNetwork::new(default_config(&state_dir))
            .await
            .unwrap();
        assert_eq!(net.nft_table(), "podhost");
        let status = net.setup(&req).await.unwrap();
        let quiet_status = net.setup(&quiet_req).await.unwrap();
        h.exec("nft", &["delete", "table", "inet", "podhost"]);
        for (r, s) in [(&req, &status), (&quiet_req, &quiet_status)] {
            assert_eq!(
                net.check(r, &s.ips).await.unwrap(),
                NetworkHealth::Missing("nftables table inet podhost".into())
            );
        }
        assert!(tcp_ask(&h, "127.0.0.1:8080".parse().unwrap()).is_err());

        let again = net.setup(&quiet_req).await.unwrap();
        assert_eq!(again.ips, quiet_status.ips);
        for (r, s) in [(&req, &status), (&quiet_req, &quiet_status)] {
            assert_eq!(net.check(r, &s.ips).await.unwrap(), NetworkHealth::Attached);
        }
        let table = h.exec("nft", &["list", "table", "inet", "podhost"]);
        assert!(table.contains("dport 8081"), "{table}");
        assert_eq!(
            tcp_ask(&h, "127.0.0.1:8081".parse().unwrap()),
            Ok("10.86.0.1".into())
        );
    });
}

#[test]
fn a_second_network_refuses_a_live_owners_bridge_and_overlapping_cidrs_and_touches_nothing_of_it() {
    require_root();
    let host = Arc::new(NetNs::with_role("host"));
    let pod = Arc::new(NetNs::with_role("pod"));
    let other_pod = Arc::new(NetNs::with_role("pod"));
    let (root_a, state_a) = root();
    let (_root_b, state_b) = root();
    let root_a = root_a.path().canonicalize().unwrap();
    let req = request("a-pod", &pod, Some(8082));
    let other_req = request("b-pod", &other_pod, Some(8083));
    tcp_who_am_i(&pod, "[::]:80");
    let h = host.clone();
    host.block_on(move || async move {
        let a = BridgeNetwork::new(default_config(&state_a)).await.unwrap();
        let a_status = a.setup(&req).await.unwrap();
        let a_veth = a.host_veth(&req.uid);

        // The same bridge: refused, naming A's root and the flags.
        let err = BridgeNetwork::new(default_config(&state_b))
            .await
            .unwrap_err();
        assert!(matches!(err, BridgeError::BridgeOwned { .. }), "{err}");
        let text = err.to_string();
        assert!(text.contains(&root_a.display().to_string()), "{text}");
        assert!(
            text.contains("--bridge-name") && text.contains("--pod-cidr"),
            "{text}"
        );
        // Another bridge with A's CIDR: refused, naming A's bridge and root.
        let err = BridgeNetwork::new(config(&state_b, "podhost1", "10.86.0.0/16"))
            .await
            .unwrap_err();
        assert!(matches!(err, BridgeError::CidrInUse { .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.contains("podhost0") && text.contains(&root_a.display().to_string()),
            "{text}"
        );
        assert!(
            !h.links().contains(&"podhost1".to_string()),
            "nothing made when refused"
        );

        // Its own bridge and CIDR: it runs beside A, and its reconcile (no live pod)
        // and its table leave A's veth and rules alone.
        let b = BridgeNetwork::new(config(
            &state_b,
            "podhost1",
            "10.87.0.0/16,fd70:6f64:6801::/64",
        ))
        .await
        .unwrap();
        assert_eq!(b.nft_table(), "podhost-podhost1");
        let b_status = b.setup(&other_req).await.unwrap();
        assert!(b_status.ips[0].to_string().starts_with("10.87."));
        assert!(b.reconcile(&HashSet::new()).await.is_empty());
        assert!(h.links().contains(&a_veth), "B deleted A's veth");
        assert_eq!(
            a.check(&req, &a_status.ips).await.unwrap(),
            NetworkHealth::Attached
        );
        assert_eq!(
            tcp_ask(&h, "127.0.0.1:8082".parse().unwrap()),
            Ok("10.86.0.1".into())
        );
        let a_table = h.exec("nft", &["list", "table", "inet", "podhost"]);
        assert!(a_table.contains("dport 8082"), "{a_table}");
        b.teardown(&other_req.uid).await.unwrap();
        drop(b);

        // Once A's network is gone (its lock released), its bridge may be taken over.
        drop(a);
        let b = BridgeNetwork::new(default_config(&state_b)).await.unwrap();
        // A's veth carries A's mark: B's reconcile leaves it.
        assert!(b.reconcile(&HashSet::new()).await.is_empty());
        assert!(h.links().contains(&a_veth));
    });
}

#[test]
fn an_unmarked_bridge_is_adopted_only_when_no_link_on_it_is_someone_elses() {
    require_root();
    let host = Arc::new(NetNs::with_role("host"));
    let (_keep, state_dir) = root();
    // An older podhost's bridge (no mark) with a pod's veth this root never made.
    host.ip(&["link", "add", "podhost0", "type", "bridge"]);
    host.ip(&[
        "link", "add", "vethold1", "type", "veth", "peer", "name", "vethold2",
    ]);
    host.ip(&["link", "set", "vethold1", "master", "podhost0"]);
    let h = host.clone();
    host.block_on(move || async move {
        let err = BridgeNetwork::new(default_config(&state_dir))
            .await
            .unwrap_err();
        assert!(matches!(err, BridgeError::BridgeInUse { .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.contains("vethold1") && text.contains("--bridge-name"),
            "{text}"
        );
        assert!(h.links().contains(&"vethold1".to_string()), "left alone");

        h.ip(&["link", "del", "vethold1"]);
        let net = BridgeNetwork::new(default_config(&state_dir))
            .await
            .unwrap();
        let shown = h.ip(&["-d", "link", "show", "podhost0"]);
        let mark = format!("alias podhost:{}:", net.owner().id());
        assert!(shown.contains(&mark), "{shown}");
    });
}
