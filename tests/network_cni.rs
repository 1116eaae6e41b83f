//! The CNI backend with Debian's standard plugins (loopback, bridge, host-local,
//! portmap, firewall), as root. Each test has its own network namespace standing in for
//! the host (the plugins run on a thread inside it, so the real host's network is never
//! touched), its own pod namespaces, bridge, IPAM dir and records, all removed on drop.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common_cni;

use std::collections::HashSet;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use common_cni::*;
use podhost::model::host_ports::{HostPort, Protocol};
use podhost::network::cni::{CniConfig, CniError, CniNetwork, has_config};
use podhost::network::{PodNetRequest, PodNetStatus};

const V4: &str = "10.99.0.0/24";
const V6: &str = "fd00:99::/64";

/// One test's "host": a namespace, and a temp dir with the conf dir, IPAM dir, records.
struct Lab {
    host: Netns,
    _tmp: tempfile::TempDir,
    conf_dir: PathBuf,
    ipam_dir: PathBuf,
    state_dir: PathBuf,
}

impl Lab {
    fn new() -> Self {
        Self::with_config(|ipam| conflist("cni-t0", ipam, V4, V6))
    }

    fn with_config(config: impl FnOnce(&Path) -> serde_json::Value) -> Self {
        require_root();
        let tmp = tempfile::tempdir().unwrap();
        let conf_dir = tmp.path().join("net.d");
        let ipam_dir = tmp.path().join("ipam");
        std::fs::create_dir_all(&conf_dir).unwrap();
        let list = config(&ipam_dir);
        std::fs::write(
            conf_dir.join("10-test.conflist"),
            serde_json::to_vec_pretty(&list).unwrap(),
        )
        .unwrap();
        Self {
            host: Netns::with_role("host"),
            state_dir: tmp.path().join("state"),
            conf_dir,
            ipam_dir,
            _tmp: tmp,
        }
    }

    fn cfg(&self) -> CniConfig {
        CniConfig {
            conf_dir: self.conf_dir.clone(),
            bin_dirs: vec![PathBuf::from("/nonexistent/cni/bin"), DEBIAN_CNI_BIN.into()],
            state_dir: self.state_dir.clone(),
        }
    }

    /// Runs the async body inside the host namespace (on a current-thread runtime, so
    /// every plugin it execs starts there).
    fn block_on<F: Future>(&self, body: impl FnOnce() -> F + Send) -> F::Output
    where
        F::Output: Send,
    {
        self.host.run(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(body())
        })
    }

    fn network(&self) -> CniNetwork {
        let cfg = self.cfg();
        self.block_on(|| CniNetwork::new(cfg)).unwrap()
    }

    fn setup(&self, net: &CniNetwork, req: &PodNetRequest) -> Result<PodNetStatus, CniError> {
        self.block_on(|| net.setup(req))
    }

    fn teardown(&self, net: &CniNetwork, uid: &str) -> Result<(), CniError> {
        self.block_on(|| net.teardown(uid))
    }

    fn record(&self, uid: &str) -> PathBuf {
        self.state_dir.join("pods").join(format!("{uid}.json"))
    }

    /// The veths on the host side.
    fn host_veths(&self) -> Vec<String> {
        let v: serde_json::Value =
            serde_json::from_str(&self.host.ip(&["-j", "-d", "link", "show"])).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .filter(|l| l["linkinfo"]["info_kind"] == "veth")
            .map(|l| l["ifname"].as_str().unwrap().to_string())
            .collect()
    }
}

/// A pod: its own network namespace and the request for it.
fn pod(tag: &str, host_ports: Vec<HostPort>) -> (Netns, PodNetRequest) {
    let ns = Netns::with_role(tag);
    let req = PodNetRequest {
        uid: format!("uid-{}", ns.name),
        namespace: "default".into(),
        name: tag.into(),
        netns: ns.path(),
        host_ports,
    };
    (ns, req)
}

fn tcp_port(host_port: u16, container_port: u16) -> HostPort {
    HostPort {
        host_ip: None,
        host_port,
        container_port,
        protocol: Protocol::Tcp,
        container_index: 0,
    }
}

fn v4(s: &PodNetStatus) -> IpAddr {
    *s.ips.iter().find(|i| i.is_ipv4()).expect("an IPv4 address")
}

fn v6(s: &PodNetStatus) -> IpAddr {
    *s.ips.iter().find(|i| i.is_ipv6()).expect("an IPv6 address")
}

/// What the pod left behind in `lab`: rules naming it or its addresses, and its IPAM
/// entries.
fn leftovers(lab: &Lab, uid: &str, ips: &[IpAddr]) -> Vec<String> {
    let rules = lab.host.rules();
    let mut left: Vec<String> = rules
        .lines()
        .filter(|l| l.contains(uid) || ips.iter().any(|ip| l.contains(&ip.to_string())))
        .map(|l| format!("rule: {l}"))
        .collect();
    let ip_texts: Vec<String> = ips.iter().map(ToString::to_string).collect();
    left.extend(
        ipam_entries(&lab.ipam_dir)
            .into_iter()
            .filter(|e| ip_texts.contains(e))
            .map(|e| format!("IPAM entry: {e}")),
    );
    left
}

#[test]
fn add_gives_eth0_both_addresses_and_two_pods_reach_each_other_over_tcp_and_udp() {
    let lab = Lab::new();
    let net = lab.network();
    let (ns_a, a) = pod("a", vec![]);
    let (ns_b, b) = pod("b", vec![]);
    let sa = lab.setup(&net, &a).unwrap();
    let sb = lab.setup(&net, &b).unwrap();

    assert_eq!(sa.interface, "eth0");
    assert_eq!(sa.ips.len(), 2, "dual stack: {:?}", sa.ips);
    assert!(
        sa.ips[0].is_ipv4() && sa.ips[1].is_ipv6(),
        "IPv4 first: {:?}",
        sa.ips
    );
    assert_ne!(sa.ips, sb.ips);
    let mut in_pod = ns_a.addresses("eth0");
    in_pod.sort();
    let mut reported = sa.ips.clone();
    reported.sort();
    assert_eq!(
        in_pod, reported,
        "eth0 in the pod has the reported addresses"
    );
    assert!(ns_a.links().contains(&"lo".to_string()));

    for (ip, port) in [(v4(&sa), 7001), (v6(&sa), 7002)] {
        let any: SocketAddr = if ip.is_ipv4() {
            format!("0.0.0.0:{port}")
        } else {
            format!("[::]:{port}")
        }
        .parse()
        .unwrap();
        let server = serve_once(tcp_listener(&ns_a.path(), any));
        let answer = tcp_ping(&ns_b.path(), SocketAddr::new(ip, port));
        let peer = server.join().unwrap();
        assert!(
            sb.ips.contains(&peer.ip()),
            "pod a saw pod b's own address, got {peer}"
        );
        assert_eq!(answer, format!("pong {}", peer.ip()));

        let udp = udp_echo_once(&ns_a.path(), any);
        assert_eq!(udp_ping(&ns_b.path(), SocketAddr::new(ip, port)), "pong");
        udp.join().unwrap();
    }

    lab.teardown(&net, &a.uid).unwrap();
    lab.teardown(&net, &b.uid).unwrap();
}

#[test]
fn a_host_port_reaches_the_pod_from_the_host_and_from_outside_and_the_pod_reaches_outside() {
    let lab = Lab::new();
    // The "outside": another host on a link of the host's.
    let outside = Netns::with_role("out");
    lab.host.ip(&[
        "link",
        "add",
        "to-out",
        "type",
        "veth",
        "peer",
        "name",
        "eth0",
        "netns",
        &outside.name,
    ]);
    lab.host
        .ip(&["addr", "add", "192.0.2.1/24", "dev", "to-out"]);
    lab.host.ip(&["link", "set", "to-out", "up"]);
    outside.ip(&["addr", "add", "192.0.2.2/24", "dev", "eth0"]);
    outside.ip(&["link", "set", "eth0", "up"]);

    let net = lab.network();
    let (ns_p, p) = pod("web", vec![tcp_port(18080, 8080)]);
    let status = lab.setup(&net, &p).unwrap();
    let host_addr: SocketAddr = "192.0.2.1:18080".parse().unwrap();

    let server = serve_once(tcp_listener(&ns_p.path(), "0.0.0.0:8080".parse().unwrap()));
    let answer = tcp_ping(&outside.path(), host_addr);
    assert_eq!(server.join().unwrap().ip().to_string(), "192.0.2.2");
    assert_eq!(
        answer, "pong 192.0.2.2",
        "the outside reached the pod through the hostPort"
    );

    let server = serve_once(tcp_listener(&ns_p.path(), "0.0.0.0:8080".parse().unwrap()));
    let answer = tcp_ping(&lab.host.path(), host_addr);
    server.join().unwrap();
    assert!(
        answer.starts_with("pong "),
        "the host reached the pod through the hostPort"
    );

    // The pod reaches the outside, which has no route to the pod network: only the
    // masquerade makes the answer come back, and the outside sees the host's address.
    let server = serve_once(tcp_listener(
        &outside.path(),
        "0.0.0.0:9000".parse().unwrap(),
    ));
    let answer = tcp_ping(&ns_p.path(), "192.0.2.2:9000".parse().unwrap());
    let peer = server.join().unwrap();
    assert_eq!(
        peer.ip().to_string(),
        "192.0.2.1",
        "masqueraded behind the host"
    );
    assert_eq!(answer, "pong 192.0.2.1");
    assert_ne!(peer.ip(), v4(&status));

    lab.teardown(&net, &p.uid).unwrap();
}

#[test]
fn del_removes_the_veth_the_ipam_entries_the_rules_and_the_record() {
    let lab = Lab::new();
    let net = lab.network();
    let (ns_p, p) = pod("gone", vec![tcp_port(18081, 80)]);
    let status = lab.setup(&net, &p).unwrap();
    assert_eq!(lab.host_veths().len(), 1);
    assert!(lab.record(&p.uid).exists());
    let made = leftovers(&lab, &p.uid, &status.ips);
    assert!(
        made.iter()
            .any(|l| l.starts_with("rule:") && l.contains("18081")),
        "portmap's DNAT rule is there while the pod is: {made:?}"
    );
    assert_eq!(
        made.iter().filter(|l| l.starts_with("IPAM")).count(),
        2,
        "{made:?}"
    );

    lab.teardown(&net, &p.uid).unwrap();
    assert_eq!(
        lab.host_veths(),
        Vec::<String>::new(),
        "no veth left on the host"
    );
    assert!(
        !ns_p.links().contains(&"eth0".to_string()),
        "no eth0 left in the pod"
    );
    assert_eq!(leftovers(&lab, &p.uid, &status.ips), Vec::<String>::new());
    assert!(
        !lab.host.rules().contains("18081"),
        "no DNAT of the hostPort left"
    );
    assert!(!lab.record(&p.uid).exists());
    // Again: nothing to do is fine.
    lab.teardown(&net, &p.uid).unwrap();
}

#[test]
fn a_failing_plugin_gives_its_own_message_and_a_failed_add_leaves_nothing() {
    // host-local refuses the range: the message is the plugin's.
    let lab = Lab::with_config(|ipam| conflist("cni-t0", ipam, "10.99.0.0/99", V6));
    let net = lab.network();
    let (_ns, p) = pod("bad", vec![]);
    let err = lab.setup(&net, &p).unwrap_err().to_string();
    assert!(err.contains("\"bridge\"") && err.contains("(ADD)"), "{err}");
    assert!(
        err.contains("10.99.0.0/99"),
        "the plugin's message is kept: {err}"
    );
    assert!(!lab.record(&p.uid).exists());

    // A plugin after the bridge fails: the bridge's veth and addresses are DELeted.
    let lab = Lab::with_config(|ipam| {
        let mut list = conflist("cni-t1", ipam, V4, V6);
        list["plugins"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({
                "type": "tuning",
                "sysctl": {"net.no.such.sysctl": "1"}
            }));
        list
    });
    let net = lab.network();
    let (ns_p, p) = pod("midway", vec![tcp_port(18082, 80)]);
    let err = lab.setup(&net, &p).unwrap_err().to_string();
    assert!(
        err.contains("\"tuning\"") && err.contains("/proc/sys/net/no/such/sysctl"),
        "{err}"
    );
    assert_eq!(lab.host_veths(), Vec::<String>::new());
    assert!(!ns_p.links().contains(&"eth0".to_string()));
    assert_eq!(ipam_entries(&lab.ipam_dir), Vec::<String>::new());
    assert!(!lab.host.rules().contains("18082"));
    assert!(!lab.record(&p.uid).exists());
}

#[test]
fn a_missing_plugin_or_an_unsupported_version_is_refused_at_start_naming_it() {
    let lab = Lab::with_config(|_| {
        serde_json::json!({"cniVersion": "1.0.0", "name": "n",
            "plugins": [{"type": "loopback"}, {"type": "no-such-plugin"}]})
    });
    assert!(has_config(&lab.conf_dir));
    let cfg = lab.cfg();
    let err = lab
        .block_on(|| CniNetwork::new(cfg))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("\"no-such-plugin\"") && err.contains("/usr/lib/cni"),
        "{err}"
    );

    // Debian's 1.1.1 plugins speak up to 1.0.0: a 1.1.0 list (which would get STATUS)
    // is refused by their VERSION answer, before any pod.
    let lab = Lab::with_config(
        |_| serde_json::json!({"cniVersion": "1.1.0", "name": "n", "plugins": [{"type": "loopback"}]}),
    );
    let cfg = lab.cfg();
    let err = lab
        .block_on(|| CniNetwork::new(cfg))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("1.1.0") && err.contains("\"loopback\""),
        "{err}"
    );

    let empty = tempfile::tempdir().unwrap();
    assert!(!has_config(empty.path()));
    assert!(!has_config(&empty.path().join("missing")));
}

#[test]
fn reconcile_releases_pods_gone_while_the_daemon_was_down() {
    let lab = Lab::new();
    let net = lab.network();
    let (ns_live, live) = pod("live", vec![]);
    let (_ns_gone, gone) = pod("gone", vec![tcp_port(18083, 80)]);
    let (_ns_mid, mid) = pod("mid", vec![]);
    let (ns_lost, lost) = pod("lost", vec![tcp_port(18084, 80)]);
    let s_live = lab.setup(&net, &live).unwrap();
    let s_gone = lab.setup(&net, &gone).unwrap();
    let s_mid = lab.setup(&net, &mid).unwrap();
    let s_lost = lab.setup(&net, &lost).unwrap();
    drop(net);

    // While the daemon was down: the pod "gone" was removed (its pinned namespace
    // stays until podhost releases it), the daemon died in "mid"'s ADD after its last
    // plugin (firewall) ran but before that result was recorded (the record holds the
    // result of the plugin before it, which is what firewall's DEL needs), and "lost"
    // lost its namespace.
    let path = lab.record(&mid.uid);
    let mut rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    rec["complete"] = serde_json::Value::Bool(false);
    std::fs::write(&path, serde_json::to_vec(&rec).unwrap()).unwrap();
    drop(ns_lost);

    let net = lab.network();
    let alive: HashSet<String> = [live.uid.clone()].into();
    let errors = lab.block_on(|| net.reconcile(&alive));
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(
        leftovers(&lab, &gone.uid, &s_gone.ips),
        Vec::<String>::new()
    );
    assert_eq!(leftovers(&lab, &mid.uid, &s_mid.ips), Vec::<String>::new());
    let rules = lab.host.rules();
    assert!(
        !rules.contains("18083") && !rules.contains("18084"),
        "no DNAT left"
    );
    for uid in [&gone.uid, &mid.uid, &lost.uid] {
        assert!(!lab.record(uid).exists(), "{uid}'s record is gone");
    }
    // Without its namespace, Debian's bridge plugin 1.1.1 cannot find the addresses
    // whose masquerade rules it made (containernetworking/plugins#810), but IPAM and
    // the port mappings are released.
    let lost_ips: Vec<String> = s_lost.ips.iter().map(ToString::to_string).collect();
    assert!(
        ipam_entries(&lab.ipam_dir)
            .iter()
            .all(|e| !lost_ips.contains(e))
    );
    assert_eq!(lab.host_veths().len(), 1, "only the live pod's veth stays");
    assert_eq!(
        ns_live.addresses("eth0").len(),
        2,
        "the live pod is untouched"
    );
    let mut kept = ipam_entries(&lab.ipam_dir);
    kept.sort();
    let mut want: Vec<String> = s_live.ips.iter().map(ToString::to_string).collect();
    want.sort();
    assert_eq!(kept, want);
    lab.teardown(&net, &live.uid).unwrap();
}

#[test]
fn check_passes_on_an_intact_pod_and_fails_with_the_plugins_message_on_a_broken_one() {
    let lab = Lab::new();
    let (ns_p, p) = pod("again", vec![]);
    let first = lab.setup(&lab.network(), &p).unwrap();

    // A new daemon: CHECK passes, setup keeps the addresses and holds nothing new.
    let net = lab.network();
    lab.block_on(|| net.check(&p.uid)).unwrap();
    assert_eq!(lab.setup(&net, &p).unwrap(), first);
    assert_eq!(ipam_entries(&lab.ipam_dir).len(), 2);
    assert_eq!(lab.host_veths().len(), 1);

    // The pod's interface vanished: the bridge plugin's CHECK says so.
    ns_p.ip(&["link", "del", "eth0"]);
    let err = lab.block_on(|| net.check(&p.uid)).unwrap_err().to_string();
    assert!(
        err.contains("\"bridge\"") && err.contains("(CHECK)") && err.contains("eth0"),
        "{err}"
    );
    // setup keeps the recorded attachment (a new ADD would change a running pod's IP).
    assert_eq!(lab.setup(&net, &p).unwrap(), first);
    lab.teardown(&net, &p.uid).unwrap();
    assert_eq!(ipam_entries(&lab.ipam_dir), Vec::<String>::new());
    assert!(!lab.record(&p.uid).exists());
    let unknown = lab.block_on(|| net.check(&p.uid)).unwrap_err().to_string();
    assert!(unknown.contains("no finished CNI setup"), "{unknown}");
}

#[test]
fn setup_with_other_ports_remakes_the_attachment_and_the_host_port_works() {
    let lab = Lab::new();
    let net = lab.network();
    let (ns_p, mut p) = pod("ports", vec![tcp_port(18085, 8080)]);
    let first = lab.setup(&net, &p).unwrap();
    p.host_ports = vec![tcp_port(18086, 8080)];
    let second = lab.setup(&net, &p).unwrap();
    assert_eq!(second.ips.len(), 2);
    assert_eq!(
        ipam_entries(&lab.ipam_dir).len(),
        2,
        "the old addresses were released"
    );
    assert_eq!(lab.host_veths().len(), 1);
    let rules = lab.host.rules();
    assert!(
        !rules.contains("18085") && rules.contains("18086"),
        "{rules}"
    );
    let server = serve_once(tcp_listener(&ns_p.path(), "0.0.0.0:8080".parse().unwrap()));
    let gateway = "10.99.0.1:18086".parse().unwrap();
    assert!(tcp_ping(&lab.host.path(), gateway).starts_with("pong"));
    server.join().unwrap();
    lab.teardown(&net, &p.uid).unwrap();
    for s in [&first, &second] {
        assert_eq!(leftovers(&lab, &p.uid, &s.ips), Vec::<String>::new());
    }
}

#[test]
fn a_plugin_that_hangs_is_killed_at_its_time_limit_and_named() {
    let lab = Lab::with_config(
        |_| serde_json::json!({"cniVersion": "1.0.0", "name": "n", "plugins": [{"type": "hangs"}]}),
    );
    // A plugin that answers VERSION and then never finishes an ADD.
    let bin = lab.conf_dir.parent().unwrap().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let plugin = bin.join("hangs");
    // A sleep only this test runs, to look for it afterwards.
    let sleep = format!("sleep 600.{}", std::process::id());
    std::fs::write(
        &plugin,
        format!(
            "#!/bin/sh\nif [ \"$CNI_COMMAND\" = VERSION ]; then\n  \
             echo '{{\"cniVersion\":\"1.0.0\",\"supportedVersions\":[\"1.0.0\"]}}'\n  \
             exit 0\nfi\nexec {sleep}\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&plugin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut cfg = lab.cfg();
    cfg.bin_dirs = vec![bin];
    let net = lab
        .block_on(|| CniNetwork::new(cfg))
        .unwrap()
        .with_plugin_timeout(std::time::Duration::from_millis(300));
    let (_ns, p) = pod("slow", vec![]);
    let err = lab.setup(&net, &p).unwrap_err();
    assert!(
        matches!(&err, CniError::Timeout { plugin, command: "ADD", .. } if plugin == "hangs"),
        "{err}"
    );
    // The killed plugin is gone.
    let left = std::process::Command::new("pgrep")
        .args(["-f", &format!("^{sleep}$")])
        .output()
        .unwrap();
    assert!(left.stdout.is_empty(), "a hung plugin was left running");
}
