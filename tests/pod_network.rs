//! Pod networking end to end with the built-in bridge: a daemon in a network namespace
//! that stands in for the host (with an "outside" namespace behind its uplink), real
//! pods, real traffic. Pods run `netcheck` (tests/programs/netcheck.c), which answers
//! every TCP or UDP request with the source address it saw.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::common_cni;

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{TestDaemon, phase, require_root, static_program_layout, wait_until};
use serde_json::Value;

const IMAGE: &str = "localhost/netcheck:latest";
const PORT: u16 = 7000;

/// The netcheck image, built once per test binary.
fn netcheck_layout() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("netcheck-{}", std::process::id()));
        std::fs::create_dir_all(&work).unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/netcheck.c");
        static_program_layout(&src, &work, IMAGE)
    })
}

/// A daemon in its own "host" namespace with an "outside" behind its uplink (made
/// before the daemon starts, so that its host IPs are the uplink's).
fn start_daemon(extra: &[&str]) -> (TestDaemon, common::netns::Outside) {
    require_root();
    let mut d = TestDaemon::prepare_with(extra);
    let outside = d.netns.as_ref().unwrap().add_outside();
    d.spawn_daemon();
    d.load(netcheck_layout());
    (d, outside)
}

/// A pod serving TCP and UDP on [`PORT`]; `ports` is its `ports:` list (YAML flow).
fn server_pod(name: &str, ports: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 2\n  containers:\n  - name: main\n    image: {IMAGE}\n    imagePullPolicy: Never\n    command: [netcheck, serve, \"{PORT}\"]\n    ports: {ports}\n"
    )
}

fn running(d: &TestDaemon, name: &str) -> Value {
    d.wait_pod(name, &format!("{name} Running"), 60, |p| {
        (phase(p) == "Running").then(|| p.clone())
    })
}

/// The pod's (IPv4, IPv6) from status.podIPs, checked against status.podIP.
fn pod_ips(pod: &Value) -> (IpAddr, IpAddr) {
    let ips: Vec<IpAddr> = pod["status"]["podIPs"]
        .as_array()
        .unwrap_or_else(|| panic!("no podIPs in {}", pod["status"]))
        .iter()
        .map(|ip| ip["ip"].as_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(ips.len(), 2, "dual stack: {ips:?}");
    assert!(ips[0].is_ipv4() && ips[1].is_ipv6(), "IPv4 first: {ips:?}");
    assert_eq!(pod["status"]["podIP"], ips[0].to_string().as_str());
    (ips[0], ips[1])
}

/// `netcheck ask` run in pod `name`: the server's answer, or the failure.
fn ask_from(
    d: &TestDaemon,
    name: &str,
    proto: &str,
    to: IpAddr,
    port: u16,
) -> Result<String, String> {
    let full = d.full_name(name);
    let to = to.to_string();
    let port = port.to_string();
    let out = d.cli(&[
        "exec", &full, "--", "netcheck", "ask", proto, &to, &port, "ping",
    ]);
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// A TCP request to `addr` from the current thread's namespace: the server's answer.
fn tcp_ask(addr: SocketAddr) -> Result<String, String> {
    let mut s =
        TcpStream::connect_timeout(&addr, Duration::from_secs(3)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"ping").map_err(|e| e.to_string())?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).map_err(|e| e.to_string())?;
    Ok(answer)
}

/// A UDP request to `addr`: the server's answer.
fn udp_ask(addr: SocketAddr) -> Result<String, String> {
    let bind = if addr.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    };
    let s = UdpSocket::bind(bind).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    s.send_to(b"ping", addr).map_err(|e| e.to_string())?;
    let mut buf = [0u8; 256];
    let (n, _) = s.recv_from(&mut buf).map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// Retries `f` for a few seconds (a server may still be binding).
fn eventually(what: &str, f: impl Fn() -> Result<String, String>) -> String {
    let mut last = String::new();
    let got = wait_until(Duration::from_secs(10), what, || match f() {
        Ok(answer) => Some(answer),
        Err(e) => {
            last = e;
            None
        }
    });
    got.unwrap_or_else(|| panic!("{what}: {last}"))
}

#[test]
fn two_pods_reach_each_other_over_tcp_and_udp_on_ipv4_and_ipv6() {
    let (d, _outside) = start_daemon(&[]);
    d.write_manifest("a.yaml", &server_pod("a", "[]"));
    d.write_manifest("b.yaml", &server_pod("b", "[]"));
    let (a4, a6) = pod_ips(&running(&d, "a"));
    let (b4, b6) = pod_ips(&running(&d, "b"));
    assert_ne!(a4, b4);
    for (proto, to, from) in [
        ("tcp", a4, b4),
        ("udp", a4, b4),
        ("tcp", a6, b6),
        ("udp", a6, b6),
    ] {
        let answer = eventually(&format!("b → a {proto} {to}"), || {
            ask_from(&d, "b", proto, to, PORT)
        });
        // No NAT between pods: a sees b's own address.
        assert_eq!(answer, format!("{from} ping"), "{proto} to {to}");
    }
}

#[test]
fn a_pod_reaches_the_outside_through_the_masquerade() {
    let (d, outside) = start_daemon(&[]);
    // The outside's server: netcheck on the outside namespace (the host's binary).
    let bin = netcheck_layout().parent().unwrap().join("netcheck");
    let mut server = outside
        .ns
        .command(bin.to_str().unwrap())
        .args(["serve", "8000"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    d.write_manifest("c.yaml", &server_pod("c", "[]"));
    running(&d, "c");
    let v4 = "192.0.2.2".parse().unwrap();
    let v6 = "2001:db8:1::2".parse().unwrap();
    let results: Vec<(String, String)> = [("tcp", v4), ("udp", v4), ("tcp", v6), ("udp", v6)]
        .into_iter()
        .map(|(proto, to)| {
            (
                format!("{proto} {to}"),
                eventually(&format!("pod → outside {proto} {to}"), || {
                    ask_from(&d, "c", proto, to, 8000)
                }),
            )
        })
        .collect();
    let _ = server.kill();
    let _ = server.wait();
    for (what, answer) in results {
        // The outside sees the host's uplink address, not the pod's.
        let expected = if what.contains(':') {
            "2001:db8:1::1 ping"
        } else {
            "192.0.2.1 ping"
        };
        assert_eq!(answer, expected, "{what}");
    }
}

#[test]
fn a_host_port_reaches_the_pod_from_the_host_and_the_outside() {
    let (d, outside) = start_daemon(&[]);
    d.write_manifest(
        "web.yaml",
        &server_pod(
            "web",
            &format!("[{{containerPort: {PORT}, hostPort: 18080}}, {{containerPort: {PORT}, hostPort: 18081, protocol: UDP}}]"),
        ),
    );
    let pod = running(&d, "web");
    assert_eq!(pod["status"]["hostIP"], "192.0.2.1", "{}", pod["status"]);
    let host = d.netns.as_ref().unwrap();
    let host_v4: SocketAddr = "192.0.2.1:18080".parse().unwrap();
    let loopback: SocketAddr = "127.0.0.1:18080".parse().unwrap();
    let udp: SocketAddr = "192.0.2.1:18081".parse().unwrap();
    let from_host = host.run(move || {
        (
            eventually("host → hostPort", || tcp_ask(host_v4)),
            eventually("host loopback → hostPort", || tcp_ask(loopback)),
            eventually("host → UDP hostPort", || udp_ask(udp)),
        )
    });
    assert!(from_host.0.ends_with(" ping"), "{from_host:?}");
    assert!(from_host.1.ends_with(" ping"), "{from_host:?}");
    assert!(from_host.2.ends_with(" ping"), "{from_host:?}");
    let from_outside = outside.ns.run(move || {
        (
            eventually("outside → hostPort", || tcp_ask(host_v4)),
            eventually("outside → UDP hostPort", || udp_ask(udp)),
        )
    });
    // From another host the pod sees the client's own address (DNAT only).
    assert_eq!(from_outside.0, "192.0.2.2 ping");
    assert_eq!(from_outside.1, "192.0.2.2 ping");
    // Released with the pod: nothing answers there any more.
    d.remove_manifest("web.yaml");
    d.wait_gone("web", 30);
    let after = host.run(move || tcp_ask(host_v4));
    assert!(after.is_err(), "the hostPort still answers: {after:?}");
}

#[test]
fn a_host_port_conflict_rejects_the_second_pod_with_an_event() {
    let (d, _outside) = start_daemon(&[]);
    d.write_manifest(
        "first.yaml",
        &server_pod("first", "[{containerPort: 7000, hostPort: 18090}]"),
    );
    running(&d, "first");
    d.write_manifest(
        "second.yaml",
        &server_pod("second", "[{containerPort: 7000, hostPort: 18090}]"),
    );
    let second = d.wait_pod("second", "second Failed", 30, |p| {
        (phase(p) == "Failed").then(|| p.clone())
    });
    assert_eq!(
        second["status"]["reason"], "NodePorts",
        "{}",
        second["status"]
    );
    let message = second["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("0.0.0.0:18090/TCP is published by pod first"),
        "{message}"
    );
    assert!(
        second["status"]["containerStatuses"].is_null()
            || second["status"]["containerStatuses"][0]["state"]["running"].is_null(),
        "the second pod was started: {}",
        second["status"]
    );
    let events = d.pod_events("second");
    assert!(
        events.iter().any(|e| e["reason"] == "NodePorts"),
        "{events:?}"
    );
    // The first keeps running.
    assert_eq!(phase(&d.pod("first").unwrap()), "Running");
}

#[test]
fn status_has_pod_and_host_ips_and_a_host_network_pod_reports_the_hosts() {
    let (d, _outside) = start_daemon(&[]);
    d.write_manifest(
        "hn.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: hn\nspec:\n  hostNetwork: true\n  terminationGracePeriodSeconds: 2\n  containers:\n  - name: main\n    image: localhost/busybox:latest\n    imagePullPolicy: Never\n    command: [sleep, \"3600\"]\n",
    );
    let hn = running(&d, "hn");
    assert_eq!(hn["status"]["podIP"], "192.0.2.1", "{}", hn["status"]);
    assert_eq!(hn["status"]["podIPs"][0]["ip"], "192.0.2.1");
    assert_eq!(hn["status"]["podIPs"][1]["ip"], "2001:db8:1::1");
    assert_eq!(hn["status"]["hostIPs"][0]["ip"], "192.0.2.1");
    d.write_manifest("own.yaml", &server_pod("own", "[]"));
    let own = running(&d, "own");
    let (v4, v6) = pod_ips(&own);
    assert_eq!(own["status"]["hostIP"], "192.0.2.1");
    // The container sees the same addresses on its eth0, and the downward API says so.
    let out = d.cli(&[
        "exec",
        &d.full_name("own"),
        "--",
        "ip",
        "addr",
        "show",
        "eth0",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("inet {v4}/")), "{text}");
    assert!(text.contains(&format!("inet6 {v6}/")), "{text}");
}

/// What is left of pod networking in the daemon's "host" namespace and root dir:
/// veth interfaces, IPAM entries, and hostPort rules in podhost's nftables table.
fn leftovers(d: &TestDaemon) -> Vec<String> {
    let host = d.netns.as_ref().unwrap();
    // Only veths on the bridge count: the uplink to the outside is the test's own.
    let mut left: Vec<String> = host
        .ip(&["-o", "link", "show", "type", "veth"])
        .lines()
        .filter(|l| l.contains("master podhost0"))
        .map(|l| format!("veth: {l}"))
        .collect();
    let network = d.root.join("network");
    for entry in walk(&network) {
        let name = entry.file_name().unwrap().to_string_lossy().into_owned();
        if entry.is_file() && name.parse::<IpAddr>().is_ok() {
            left.push(format!("IPAM entry: {}", entry.display()));
        }
        if entry.is_file() && entry.parent().is_some_and(|p| p.ends_with("pods")) {
            left.push(format!("pod record: {}", entry.display()));
        }
    }
    let rules = host
        .command("nft")
        .args(["list", "ruleset"])
        .output()
        .unwrap();
    for line in String::from_utf8_lossy(&rules.stdout).lines() {
        if line.contains("dnat") && line.contains("18100") {
            left.push(format!("nft: {}", line.trim()));
        }
    }
    left
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}

#[test]
fn teardown_leaves_nothing_also_after_a_kill_9_during_setup_or_teardown() {
    let (mut d, _outside) = start_daemon(&[]);
    for round in 0..4u64 {
        let names: Vec<String> = (0..3).map(|i| format!("k{round}x{i}")).collect();
        for (i, name) in names.iter().enumerate() {
            let ports = if i == 0 {
                "[{containerPort: 7000, hostPort: 18100}]"
            } else {
                "[]"
            };
            d.write_manifest(&format!("{name}.yaml"), &server_pod(name, ports));
        }
        // Killed while the pods' networks are being set up (a different moment each
        // round), then a new daemon finishes what it finds.
        std::thread::sleep(Duration::from_millis(20 + 40 * round));
        d.kill9();
        d.spawn_daemon();
        for name in &names {
            running(&d, name);
        }
        for name in &names {
            d.remove_manifest(&format!("{name}.yaml"));
        }
        // Killed while they are torn down.
        std::thread::sleep(Duration::from_millis(2100 + 100 * round));
        d.kill9();
        d.spawn_daemon();
        for name in &names {
            d.wait_gone(name, 60);
        }
        let left = leftovers(&d);
        assert!(
            left.is_empty(),
            "round {round}: {left:#?}\n{}",
            d.daemon_log()
        );
    }
}

#[test]
fn a_hundred_pods_get_a_hundred_addresses_and_release_them() {
    let (d, _outside) = start_daemon(&[]);
    let names: Vec<String> = (0..100).map(|i| format!("p{i}")).collect();
    for name in &names {
        d.write_manifest(
            &format!("{name}.yaml"),
            &format!(
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 2\n  containers:\n  - name: main\n    image: localhost/busybox:latest\n    imagePullPolicy: Never\n    command: [sleep, \"3600\"]\n"
            ),
        );
    }
    let mut v4 = HashSet::new();
    let mut v6 = HashSet::new();
    for name in &names {
        let pod = d.wait_pod(name, &format!("{name} has its IPs"), 180, |p| {
            p["status"]["podIPs"]
                .as_array()
                .filter(|a| a.len() == 2)
                .map(|_| p.clone())
        });
        let (a, b) = pod_ips(&pod);
        assert!(v4.insert(a), "{a} given twice");
        assert!(v6.insert(b), "{b} given twice");
    }
    assert_eq!((v4.len(), v6.len()), (100, 100));
    for name in &names {
        d.remove_manifest(&format!("{name}.yaml"));
    }
    for name in &names {
        d.wait_gone(name, 180);
    }
    let left = leftovers(&d);
    assert!(left.is_empty(), "{left:#?}");
}

/// A daemon in CNI mode over Debian's plugins (bridge `cni0`, host-local, portmap,
/// firewall, loopback), with its conf dir and IPAM dir under the test's dir.
fn start_cni_daemon(
    conflist: impl Fn(&Path) -> Value,
) -> (TestDaemon, common::netns::Outside, PathBuf) {
    start_daemon_with_cni_config("--pod-network=cni", conflist)
}

/// As [`start_cni_daemon`], with another `--pod-network` flag.
fn start_daemon_with_cni_config(
    network_flag: &str,
    conflist: impl Fn(&Path) -> Value,
) -> (TestDaemon, common::netns::Outside, PathBuf) {
    require_root();
    let mut d = TestDaemon::prepare_with(&[network_flag]);
    let conf_dir = d.dir.path().join("cni/net.d");
    let ipam = d.dir.path().join("cni/ipam");
    std::fs::create_dir_all(&conf_dir).unwrap();
    std::fs::write(
        conf_dir.join("10-test.conflist"),
        serde_json::to_string_pretty(&conflist(&ipam)).unwrap(),
    )
    .unwrap();
    d.extra_args.extend([
        "--cni-conf-dir".to_string(),
        conf_dir.display().to_string(),
        "--cni-bin-dir".to_string(),
        common_cni::DEBIAN_CNI_BIN.to_string(),
    ]);
    let outside = d.netns.as_ref().unwrap().add_outside();
    d.spawn_daemon();
    d.load(netcheck_layout());
    (d, outside, ipam)
}

#[test]
fn cni_mode_gives_pods_addresses_and_host_ports_through_the_plugins_and_releases_them() {
    let (d, outside, ipam) = start_cni_daemon(|ipam| {
        common_cni::conflist("cni0", ipam, "10.200.0.0/24", "fd00:200::/64")
    });
    d.write_manifest(
        "a.yaml",
        &server_pod("a", "[{containerPort: 7000, hostPort: 18200}]"),
    );
    d.write_manifest("b.yaml", &server_pod("b", "[]"));
    let (a4, a6) = pod_ips(&running(&d, "a"));
    let (b4, b6) = pod_ips(&running(&d, "b"));
    assert!(a4.to_string().starts_with("10.200.0."), "{a4}");
    assert_eq!(
        common_cni::ipam_entries(&ipam).len(),
        4,
        "two addresses per pod"
    );
    for (proto, to, from) in [
        ("tcp", a4, b4),
        ("udp", a4, b4),
        ("tcp", a6, b6),
        ("udp", a6, b6),
    ] {
        let answer = eventually(&format!("b → a {proto} {to}"), || {
            ask_from(&d, "b", proto, to, PORT)
        });
        assert_eq!(answer, format!("{from} ping"), "{proto} to {to}");
    }
    let host_port: SocketAddr = "192.0.2.1:18200".parse().unwrap();
    let from_outside = outside
        .ns
        .run(move || eventually("outside → hostPort", || tcp_ask(host_port)));
    assert_eq!(from_outside, "192.0.2.2 ping");
    d.remove_manifest("a.yaml");
    d.remove_manifest("b.yaml");
    d.wait_gone("a", 30);
    d.wait_gone("b", 30);
    assert_eq!(common_cni::ipam_entries(&ipam), Vec::<String>::new());
    let veths = d
        .netns
        .as_ref()
        .unwrap()
        .ip(&["-o", "link", "show", "type", "veth"]);
    assert!(!veths.contains("master cni0"), "{veths}");
    let records = walk(&d.root.join("network/cni"));
    assert!(records.iter().all(|p| p.is_dir()), "{records:?}");
}

#[test]
fn a_failing_cni_plugin_is_a_pod_event_with_the_plugins_message() {
    let (d, _outside, _ipam) = start_cni_daemon(|ipam| {
        // An IPv4 subnet that is not one: host-local refuses it at ADD.
        common_cni::conflist("cni1", ipam, "10.300.0.0/24", "fd00:300::/64")
    });
    d.write_manifest("bad.yaml", &server_pod("bad", "[]"));
    let events = wait_until(Duration::from_secs(30), "FailedCreatePodSandBox", || {
        let events = d.pod_events("bad");
        events
            .iter()
            .any(|e| e["reason"] == "FailedCreatePodSandBox")
            .then_some(events)
    })
    .unwrap_or_else(|| panic!("no event; daemon log:\n{}", d.daemon_log()));
    let message = events
        .iter()
        .find(|e| e["reason"] == "FailedCreatePodSandBox")
        .and_then(|e| e["message"].as_str())
        .unwrap()
        .to_string();
    assert!(message.contains("10.300.0.0/24"), "{message}");
    assert!(
        message.contains("bridge") || message.contains("host-local"),
        "{message}"
    );
    assert_ne!(phase(&d.pod("bad").unwrap()), "Running");
}

/// `--pod-network auto` with a CNI config in the directory (as after installing podman):
/// the daemon says which file and network it chose, and the pods get that network.
#[test]
fn auto_mode_names_the_cni_config_it_chose() {
    let (d, _outside, _ipam) = start_daemon_with_cni_config("--pod-network=auto", |ipam| {
        common_cni::conflist("cni2", ipam, "10.202.0.0/24", "fd00:202::/64")
    });
    let message = wait_until(Duration::from_secs(30), "PodNetworkFromCniConfig", || {
        d.node_events()
            .iter()
            .find(|e| e["reason"] == "PodNetworkFromCniConfig")
            .and_then(|e| e["message"].as_str().map(str::to_string))
    })
    .unwrap_or_else(|| panic!("no event; daemon log:\n{}", d.daemon_log()));
    assert!(message.contains("10-test.conflist"), "{message}");
    assert!(message.contains("\"podhost-test\""), "{message}");
    assert!(message.contains("--pod-network bridge"), "{message}");
    assert!(
        d.daemon_log()
            .contains("--pod-network auto uses the CNI network"),
        "said at start too"
    );
    // And in `describe node`: the annotation and the event.
    let described = String::from_utf8_lossy(&d.cli(&["describe", "node"]).stdout).into_owned();
    let annotation = described
        .lines()
        .find(|l| l.contains("podhost.io/pod-network: "))
        .unwrap_or_else(|| panic!("{described}"));
    assert!(
        annotation.contains("cni podhost-test (") && annotation.contains("10-test.conflist)"),
        "{described}"
    );
    assert!(described.contains("PodNetworkFromCniConfig"), "{described}");
    d.write_manifest("a.yaml", &server_pod("a", "[]"));
    let (a4, _) = pod_ips(&running(&d, "a"));
    assert!(a4.to_string().starts_with("10.202.0."), "{a4}");
    d.remove_manifest("a.yaml");
    d.wait_gone("a", 60);
}
