//! The built-in bridge network on the real kernel, as root: every test makes its own
//! network namespaces — one standing in for the host (the BridgeNetwork runs on a
//! thread inside it), one per pod, and an "outside" machine veth'd to the host — so
//! tests never touch the real host's network and run in parallel.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common_bridge;

use std::collections::{BTreeSet, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use common_bridge::*;
use podhost::model::host_ports::{HostPort, Protocol};
use podhost::network::PodNetRequest;
use podhost::network::bridge::{BridgeConfig, BridgeError, BridgeNetwork, SetupStep, TeardownStep};

fn config(state_dir: &Path) -> BridgeConfig {
    BridgeConfig::with_defaults(state_dir.to_path_buf())
}

fn request(uid: &str, pod: &NetNs, host_ports: Vec<HostPort>) -> PodNetRequest {
    PodNetRequest {
        uid: uid.into(),
        namespace: "default".into(),
        name: format!("pod-{uid}"),
        netns: pod.path(),
        host_ports,
    }
}

fn port(
    host_ip: Option<&str>,
    host_port: u16,
    container_port: u16,
    protocol: Protocol,
) -> HostPort {
    HostPort {
        host_ip: host_ip.map(|i| i.parse().unwrap()),
        host_port,
        container_port,
        protocol,
        container_index: 0,
    }
}

fn at(ip: IpAddr, port: u16) -> SocketAddr {
    SocketAddr::new(ip, port)
}

fn v4(ips: &[IpAddr]) -> IpAddr {
    *ips.iter().find(|i| i.is_ipv4()).expect("an IPv4 address")
}

fn v6(ips: &[IpAddr]) -> IpAddr {
    *ips.iter().find(|i| i.is_ipv6()).expect("an IPv6 address")
}

fn state() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("network/bridge");
    (dir, path)
}

#[test]
fn two_pods_reach_each_other_over_tcp_and_udp_on_ipv4_and_ipv6() {
    require_root();
    let host = NetNs::with_role("host");
    let (a, b) = (
        Arc::new(NetNs::with_role("a")),
        Arc::new(NetNs::with_role("b")),
    );
    let (_keep, state_dir) = state();
    let (ra, rb) = (request("pod-a", &a, vec![]), request("pod-b", &b, vec![]));
    let (sa, sb) = host.block_on(move || async move {
        let net = BridgeNetwork::new(config(&state_dir)).await.unwrap();
        assert!(net.nft_problem().is_none(), "{:?}", net.nft_problem());
        let sa = net.setup(&ra).await.unwrap();
        let sb = net.setup(&rb).await.unwrap();
        (sa, sb)
    });
    assert_eq!(sa.interface, "eth0");
    assert_eq!(sa.ips.len(), 2, "{sa:?}");
    assert!(
        sa.ips[0].is_ipv4() && sa.ips[1].is_ipv6(),
        "IPv4 first: {sa:?}"
    );
    assert_ne!(sa.ips, sb.ips);
    assert!(sa.ips[0].to_string().starts_with("10.86."), "{sa:?}");

    tcp_who_am_i(&b, "[::]:7000");
    udp_who_am_i(&b, "[::]:7001");
    for (from_ip, to_ip) in [(v4(&sa.ips), v4(&sb.ips)), (v6(&sa.ips), v6(&sb.ips))] {
        // The peer sees the pod's own address: no NAT between pods.
        assert_eq!(tcp_ask(&a, at(to_ip, 7000)), Ok(from_ip.to_string()));
        assert_eq!(udp_ask(&a, at(to_ip, 7001)), Ok(from_ip.to_string()));
    }
}

#[test]
fn a_pod_reaches_an_outside_server_through_the_masquerade() {
    require_root();
    let host = NetNs::with_role("host");
    let outside = outside_of(&host);
    let pod = Arc::new(NetNs::with_role("pod"));
    let (_keep, state_dir) = state();
    let req = request("pod-out", &pod, vec![]);
    host.block_on(move || async move {
        let net = BridgeNetwork::new(config(&state_dir)).await.unwrap();
        net.setup(&req).await.unwrap();
    });
    tcp_who_am_i(&outside, "[::]:7100");
    udp_who_am_i(&outside, "0.0.0.0:7101");
    // The outside has no route to the pod CIDR: only the host's address can answer.
    assert_eq!(
        tcp_ask(&pod, "192.0.2.2:7100".parse().unwrap()),
        Ok("192.0.2.1".into())
    );
    assert_eq!(
        tcp_ask(&pod, "[2001:db8:1::2]:7100".parse().unwrap()),
        Ok("2001:db8:1::1".into())
    );
    assert_eq!(
        udp_ask(&pod, "192.0.2.2:7101".parse().unwrap()),
        Ok("192.0.2.1".into())
    );
}

#[test]
fn host_ports_reach_the_pod_from_the_host_its_loopback_the_outside_and_the_pod_itself() {
    require_root();
    let host = Arc::new(NetNs::with_role("host"));
    let outside = outside_of(&host);
    let pod = Arc::new(NetNs::with_role("pod"));
    let (_keep, state_dir) = state();
    let ports = vec![
        port(None, 8080, 80, Protocol::Tcp),
        port(None, 8053, 53, Protocol::Udp),
        port(Some("127.0.0.1"), 9090, 80, Protocol::Tcp),
    ];
    let req = request("pod-hp", &pod, ports);
    let status = host.block_on(move || async move {
        let net = BridgeNetwork::new(config(&state_dir)).await.unwrap();
        net.setup(&req).await.unwrap()
    });
    tcp_who_am_i(&pod, "[::]:80");
    udp_who_am_i(&pod, "0.0.0.0:53");
    let gateway = "10.86.0.1";
    // From the host itself: its address (source kept), IPv6, and 127.0.0.1 (masqueraded
    // to the bridge's address, since 127.0.0.1 cannot leave the host).
    assert_eq!(
        tcp_ask(&host, "192.0.2.1:8080".parse().unwrap()),
        Ok("192.0.2.1".into())
    );
    assert_eq!(
        tcp_ask(&host, "[2001:db8:1::1]:8080".parse().unwrap()),
        Ok("2001:db8:1::1".into())
    );
    assert_eq!(
        tcp_ask(&host, "127.0.0.1:8080".parse().unwrap()),
        Ok(gateway.into())
    );
    assert_eq!(
        tcp_ask(&host, "127.0.0.1:9090".parse().unwrap()),
        Ok(gateway.into())
    );
    // hostIP 127.0.0.1 publishes there only.
    let refused = tcp_ask(&host, "192.0.2.1:9090".parse().unwrap());
    assert!(
        refused.is_err(),
        "9090 is published on 127.0.0.1 only: {refused:?}"
    );
    // From another machine: the client's own address reaches the pod.
    assert_eq!(
        tcp_ask(&outside, "192.0.2.1:8080".parse().unwrap()),
        Ok("192.0.2.2".into())
    );
    assert_eq!(
        tcp_ask(&outside, "[2001:db8:1::1]:8080".parse().unwrap()),
        Ok("2001:db8:1::2".into())
    );
    assert_eq!(
        udp_ask(&outside, "192.0.2.1:8053".parse().unwrap()),
        Ok("192.0.2.2".into())
    );
    // Hairpin: the pod reaches its own hostPort through the host's address.
    assert_eq!(
        tcp_ask(&pod, "192.0.2.1:8080".parse().unwrap()),
        Ok(gateway.into())
    );
    assert!(v4(&status.ips).to_string().starts_with("10.86."));
}

#[test]
fn another_tables_dnat_back_into_the_bridge_keeps_the_client_pods_address() {
    require_root();
    let host = Arc::new(NetNs::with_role("host"));
    let _outside = outside_of(&host);
    let (a, b) = (
        Arc::new(NetNs::with_role("a")),
        Arc::new(NetNs::with_role("b")),
    );
    let (_keep, state_dir) = state();
    let (ra, rb) = (
        request("pod-sa", &a, vec![]),
        request("pod-sb", &b, vec![port(None, 8080, 7000, Protocol::Tcp)]),
    );
    let (sa, sb) = host.block_on(move || async move {
        let net = BridgeNetwork::new(config(&state_dir)).await.unwrap();
        (net.setup(&ra).await.unwrap(), net.setup(&rb).await.unwrap())
    });
    // Bridged replies pass conntrack, as kube-proxy requires of a node (kubeadm checks
    // it): the namespace's own switch, set here rather than assumed.
    let _ = std::process::Command::new("modprobe")
        .arg("br_netfilter")
        .status();
    host.exec(
        "sh",
        &[
            "-c",
            "echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables && \
             echo 1 > /proc/sys/net/bridge/bridge-nf-call-ip6tables",
        ],
    );
    // A Service the way kube-proxy makes one: a table of its own DNATs a virtual
    // address to pod b.
    let rules = format!(
        "table inet svc-test {{\n\tchain pre {{\n\t\ttype nat hook prerouting priority dstnat; policy accept;\n\t\tip daddr 10.99.0.1 tcp dport 80 dnat ip to {}:7000\n\t\tip6 daddr fd99::1 tcp dport 80 dnat ip6 to [{}]:7000\n\t}}\n}}\n",
        v4(&sb.ips),
        v6(&sb.ips)
    );
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), rules).unwrap();
    host.exec("nft", &["-f", file.path().to_str().unwrap()]);
    tcp_who_am_i(&b, "[::]:7000");
    // The Service's target sees the client pod's own address, not the bridge's.
    assert_eq!(
        tcp_ask(&a, "10.99.0.1:80".parse().unwrap()),
        Ok(v4(&sa.ips).to_string())
    );
    assert_eq!(
        tcp_ask(&a, "[fd99::1]:80".parse().unwrap()),
        Ok(v6(&sa.ips).to_string())
    );
    // podhost's own hostPort DNAT back into the bridge is still masqueraded, so the
    // reply returns through the host whether or not bridged traffic is filtered.
    assert_eq!(
        tcp_ask(&a, "192.0.2.1:8080".parse().unwrap()),
        Ok("10.86.0.1".into())
    );
}

/// The pod CIDRs of the two "nodes" of [`cross_node_sources`], slices of one cluster
/// range (as kube-controller-manager hands out /24s of its --cluster-cidr), used by no
/// other test here.
const NODE1_CIDRS: &str = "10.91.1.0/24,fd91:0:0:1::/64";
const NODE2_CIDRS: &str = "10.91.2.0/24,fd91:0:0:2::/64";
const CLUSTER_CIDRS: &str = "10.91.0.0/16,fd91::/48";

/// What the pods of two nodes see of each other: two bridge networks in one host
/// namespace, each its own daemon (bridge, state dir, pod CIDR), as two nodes whose
/// pod CIDRs are routed to each other (here by the host, which holds both gateways).
/// Node 1 has `node1_cluster` as its --cluster-cidr, node 2 the whole cluster range.
/// A pod on each; returns the two pods' addresses and the source addresses the pod on
/// node 2 saw of the pod on node 1, and the pod on node 1 of the pod on node 2
/// (IPv4, IPv6 each). Everything lives in the test's namespaces, which are deleted
/// (bridges, veths and nft tables with them) when they drop, on failure too.
fn cross_node_sources(node1_cluster: &str) -> CrossNode {
    let host = NetNs::with_role("host");
    let (p1, p2) = (
        Arc::new(NetNs::with_role("node1-pod")),
        Arc::new(NetNs::with_role("node2-pod")),
    );
    let (_keep1, state1) = state();
    let (_keep2, state2) = state();
    let node = |bridge: &str, cidrs: &str, cluster: &str, state_dir: PathBuf| BridgeConfig {
        bridge: bridge.into(),
        cidrs: BridgeConfig::parse_cidrs(cidrs).unwrap(),
        cluster_cidrs: BridgeConfig::parse_cluster_cidrs(cluster).unwrap(),
        state_dir,
    };
    let (cfg1, cfg2) = (
        node("phnode1", NODE1_CIDRS, node1_cluster, state1),
        node("phnode2", NODE2_CIDRS, CLUSTER_CIDRS, state2),
    );
    let (r1, r2) = (
        request("node1-pod", &p1, vec![]),
        request("node2-pod", &p2, vec![]),
    );
    let (s1, s2) = host.block_on(move || async move {
        let n1 = BridgeNetwork::new(cfg1).await.unwrap();
        let n2 = BridgeNetwork::new(cfg2).await.unwrap();
        assert!(n1.nft_problem().is_none(), "{:?}", n1.nft_problem());
        assert!(n2.nft_problem().is_none(), "{:?}", n2.nft_problem());
        (n1.setup(&r1).await.unwrap(), n2.setup(&r2).await.unwrap())
    });
    tcp_who_am_i(&p1, "[::]:7300");
    tcp_who_am_i(&p2, "[::]:7300");
    let ask = |from: &NetNs, to: IpAddr| tcp_ask(from, at(to, 7300));
    CrossNode {
        node2_saw: [ask(&p1, v4(&s2.ips)), ask(&p1, v6(&s2.ips))],
        node1_saw: [ask(&p2, v4(&s1.ips)), ask(&p2, v6(&s1.ips))],
        pod1: [v4(&s1.ips), v6(&s1.ips)],
        pod2: [v4(&s2.ips), v6(&s2.ips)],
    }
}

struct CrossNode {
    pod1: [IpAddr; 2],
    pod2: [IpAddr; 2],
    /// The source the pod on node 2 saw of the pod on node 1 (IPv4, IPv6).
    node2_saw: [Result<String, String>; 2],
    /// The source the pod on node 1 saw of the pod on node 2.
    node1_saw: [Result<String, String>; 2],
}

#[test]
fn pods_on_other_nodes_see_the_client_pods_address_with_a_cluster_cidr_and_the_nodes_without() {
    require_root();
    let with = cross_node_sources(CLUSTER_CIDRS);
    assert!(
        with.pod1[0].to_string().starts_with("10.91.1.")
            && with.pod2[0].to_string().starts_with("10.91.2."),
        "each node's pod is in its node's pod CIDR: {:?} {:?}",
        with.pod1,
        with.pod2
    );
    let own = |ips: &[IpAddr; 2]| ips.map(|ip| Ok::<_, String>(ip.to_string()));
    assert_eq!(
        with.node2_saw,
        own(&with.pod1),
        "with --cluster-cidr {CLUSTER_CIDRS}, node 1's pod reaches node 2's pod unmasqueraded"
    );
    assert_eq!(with.node1_saw, own(&with.pod2), "and the other way");

    // Node 1 without a cluster CIDR: only its own pod CIDR is exempt, so its pod's
    // traffic to node 2's pod is masqueraded to the host's address on the way out
    // (node 2's bridge here, each node's uplink on real machines); node 2's is not.
    let without = cross_node_sources("");
    assert_eq!(
        without.node2_saw,
        [Ok("10.91.2.1".to_string()), Ok("fd91:0:0:2::1".to_string())],
        "without --cluster-cidr, node 1 masquerades its pod's traffic to other nodes' pods"
    );
    assert_eq!(without.node1_saw, own(&without.pod2));
}

#[test]
fn teardown_leaves_no_veth_address_route_rule_or_ipam_file_and_can_repeat() {
    require_root();
    let host = Arc::new(NetNs::with_role("host"));
    let pod = Arc::new(NetNs::with_role("pod"));
    let (_keep, state_dir) = state();
    let req = request("pod-td", &pod, vec![port(None, 8080, 80, Protocol::Tcp)]);
    let (h, sd) = (host.clone(), state_dir.clone());
    host.block_on(move || async move {
        let net = BridgeNetwork::new(config(&sd)).await.unwrap();
        let first = net.setup(&req).await.unwrap();
        // A second setup (a restarted daemon) gives the same addresses back.
        assert_eq!(net.setup(&req).await.unwrap(), first);
        assert_eq!(
            leftovers(&h, "podhost0", &sd).len(),
            1 + 2 + 2 + 1,
            "veth, 2 rules, 2 IPAM files, record"
        );
        net.teardown("pod-td").await.unwrap();
        net.teardown("pod-td").await.unwrap();
    });
    assert_eq!(
        leftovers(&host, "podhost0", &state_dir),
        Vec::<String>::new()
    );
    let links = pod.ip(&["-o", "link", "show"]);
    assert!(
        !links.contains("eth0"),
        "the pod's eth0 went with the pair: {links}"
    );
    let addrs = host.ip(&["-o", "addr", "show"]);
    assert!(!addrs.contains("10.86.0.2"), "{addrs}");
}

#[test]
fn a_setup_or_teardown_cut_short_is_finished_by_reconcile_in_the_next_daemon() {
    require_root();
    let host = Arc::new(NetNs::with_role("host"));
    let setup_steps = [
        SetupStep::Record,
        SetupStep::Ipam,
        SetupStep::HostVeth,
        SetupStep::PodInterface,
        SetupStep::HostPorts,
    ];
    let teardown_steps = [
        TeardownStep::Link,
        TeardownStep::HostPorts,
        TeardownStep::Ipam,
    ];
    let cut_pods: Vec<Arc<NetNs>> = (0..setup_steps.len() + teardown_steps.len())
        .map(|_| Arc::new(NetNs::with_role("cut")))
        .collect();
    let live_pod = Arc::new(NetNs::with_role("live"));
    let (_keep, state_dir) = state();
    let (h, sd) = (host.clone(), state_dir.clone());
    let hp = || vec![port(None, 8080, 80, Protocol::Tcp)];
    let live_req = request("live", &live_pod, vec![port(None, 9000, 80, Protocol::Tcp)]);
    let reqs: Vec<PodNetRequest> = cut_pods
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut r = request(&format!("cut-{i}"), p, hp());
            r.host_ports[0].host_port = 8080 + u16::try_from(i).unwrap();
            r
        })
        .collect();
    host.block_on(move || async move {
        let net = BridgeNetwork::new(config(&sd)).await.unwrap();
        let live_ips = net.setup(&live_req).await.unwrap();
        for (req, step) in reqs.iter().zip(setup_steps) {
            net.setup_interrupted(req, step).await.unwrap();
        }
        for (req, step) in reqs[setup_steps.len()..].iter().zip(teardown_steps) {
            net.setup(req).await.unwrap();
            net.teardown_interrupted(&req.uid, step).await.unwrap();
        }
        assert!(
            leftovers(&h, "podhost0", &sd).len() > 6,
            "the cut-short pods left something"
        );
        drop(net); // the daemon is killed …

        // … and the next one knows only the live pod.
        let net = BridgeNetwork::new(config(&sd)).await.unwrap();
        let errors = net.reconcile(&HashSet::from(["live".to_string()])).await;
        assert!(errors.is_empty(), "{errors:?}");
        let left = leftovers(&h, "podhost0", &sd);
        let veth = net.host_veth("live");
        assert_eq!(left.len(), 1 + 2 + 2 + 1, "only the live pod's: {left:#?}");
        assert!(
            left.iter()
                .all(|l| !l.contains("cut-") && (!l.starts_with("link") || l.contains(&veth))),
            "{left:#?}"
        );
        // The live pod keeps its addresses in the new daemon.
        assert_eq!(net.setup(&live_req).await.unwrap(), live_ips);
        net.teardown("live").await.unwrap();
    });
    assert_eq!(
        leftovers(&host, "podhost0", &state_dir),
        Vec::<String>::new()
    );
}

#[test]
fn a_hundred_pods_get_a_hundred_distinct_addresses_and_release_them() {
    require_root();
    const PODS: usize = 100;
    let host = Arc::new(NetNs::with_role("host"));
    let pods: Vec<NetNs> = (0..PODS).map(|_| NetNs::with_role("many")).collect();
    let reqs: Vec<PodNetRequest> = pods
        .iter()
        .enumerate()
        .map(|(i, p)| request(&format!("many-{i}"), p, vec![]))
        .collect();
    let (_keep, state_dir) = state();
    let (h, sd) = (host.clone(), state_dir.clone());
    let (per_setup, per_teardown) = host.block_on(move || async move {
        let net = BridgeNetwork::new(config(&sd)).await.unwrap();
        let started = Instant::now();
        let mut statuses = Vec::new();
        for req in &reqs {
            statuses.push(net.setup(req).await.unwrap());
        }
        let per_setup = started.elapsed() / u32::try_from(PODS).unwrap();
        let v4s: BTreeSet<IpAddr> = statuses.iter().map(|s| v4(&s.ips)).collect();
        let v6s: BTreeSet<IpAddr> = statuses.iter().map(|s| v6(&s.ips)).collect();
        assert_eq!((v4s.len(), v6s.len()), (PODS, PODS));
        assert_eq!(
            leftovers(&h, "podhost0", &sd).len(),
            PODS * 4,
            "veth, 2 IPAM files and a record each"
        );
        let started = Instant::now();
        for req in &reqs {
            net.teardown(&req.uid).await.unwrap();
        }
        (per_setup, started.elapsed() / u32::try_from(PODS).unwrap())
    });
    println!(
        "bridge network, {PODS} pods without hostPorts: setup {per_setup:?} per pod, teardown {per_teardown:?} per pod"
    );
    assert_eq!(
        leftovers(&host, "podhost0", &state_dir),
        Vec::<String>::new()
    );
}

#[test]
fn without_nft_pods_still_get_addresses_and_host_ports_fail_naming_the_package() {
    require_root();
    let host = NetNs::with_role("host");
    let (a, b) = (
        Arc::new(NetNs::with_role("a")),
        Arc::new(NetNs::with_role("b")),
    );
    let (_keep, state_dir) = state();
    let (ra, rb) = (
        request("plain-a", &a, vec![]),
        request("ports-b", &b, vec![port(None, 8080, 80, Protocol::Tcp)]),
    );
    let (sa, problem, ports_error) = host.block_on(move || async move {
        let net =
            BridgeNetwork::with_nft_program(config(&state_dir), Path::new("/nonexistent/nft"))
                .await
                .unwrap();
        let problem = net.nft_problem().map(ToString::to_string);
        let sa = net.setup(&ra).await.unwrap();
        let err = net.setup(&rb).await.unwrap_err();
        assert!(matches!(err, BridgeError::NftMissing { .. }), "{err}");
        net.teardown("ports-b").await.unwrap();
        (sa, problem, err.to_string())
    });
    let problem = problem.expect("a missing nft is reported");
    assert!(problem.contains("apt-get install nftables"), "{problem}");
    assert!(
        ports_error.contains("apt-get install nftables"),
        "{ports_error}"
    );
    tcp_who_am_i(&a, "[::]:7200");
    assert_eq!(
        tcp_ask(&a, at(v4(&sa.ips), 7200)),
        Ok(v4(&sa.ips).to_string())
    );
}

/// Not a test: the time of a setup and a teardown per pod, with and without a hostPort
/// (`cargo test --test integration network_bridge:: -- --ignored --nocapture`). Prints medians.
#[test]
#[ignore]
fn bench_setup_and_teardown_per_pod() {
    require_root();
    const PODS: usize = 40;
    let host = NetNs::with_role("host");
    let pods: Vec<NetNs> = (0..PODS).map(|_| NetNs::with_role("bench")).collect();
    let reqs: Vec<PodNetRequest> = pods
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let ports = if i % 2 == 0 {
                vec![]
            } else {
                vec![port(
                    None,
                    20000 + u16::try_from(i).unwrap(),
                    80,
                    Protocol::Tcp,
                )]
            };
            request(&format!("bench-{i}"), p, ports)
        })
        .collect();
    let (_keep, state_dir) = state();
    let lines = host.block_on(move || async move {
        let net = BridgeNetwork::new(config(&state_dir)).await.unwrap();
        let (mut setup, mut teardown) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
        for (i, req) in reqs.iter().enumerate() {
            let t = Instant::now();
            net.setup(req).await.unwrap();
            setup[i % 2].push(t.elapsed());
        }
        for (i, req) in reqs.iter().enumerate() {
            let t = Instant::now();
            net.teardown(&req.uid).await.unwrap();
            teardown[i % 2].push(t.elapsed());
        }
        let median = |v: &mut Vec<std::time::Duration>| {
            v.sort();
            v[v.len() / 2]
        };
        ["without a hostPort", "with a hostPort"]
            .iter()
            .enumerate()
            .map(|(k, what)| {
                format!(
                    "{what}: setup {:?}, teardown {:?} (median of {})",
                    median(&mut setup[k]),
                    median(&mut teardown[k]),
                    PODS / 2
                )
            })
            .collect::<Vec<_>>()
    });
    for line in lines {
        println!("bridge network per pod, {line}");
    }
}
