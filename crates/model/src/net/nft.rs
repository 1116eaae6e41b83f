//! The text of podhost's nftables ruleset: one transaction that deletes and re-creates
//! podhost's own table (`inet podhost`, or `inet podhost-<bridge>` for a daemon on
//! another bridge), so the ruleset is a pure function of the
//! configuration and the live pods' host ports, and no other table is ever touched.
//!
//! - masquerade: traffic from the pod CIDRs to anything outside them and outside the
//!   cluster's pod ranges (`--cluster-cidr`, IPv4 and IPv6): pods on other nodes see
//!   the client pod's own address, as Kubernetes' network model requires; without a
//!   cluster range only the node's own pod CIDRs are exempt (the CNI bridge plugin's
//!   ipMasq);
//! - forward: accepted to and from the bridge (established/related first);
//! - hostPorts: DNAT in prerouting (from other hosts) and output (from the host
//!   itself) for packets to a local address, narrowed to `hostIP` when one is set;
//!   `127.0.0.1` works because the bridge has route_localnet=1 and 127.0.0.0/8 sources
//!   leaving through the bridge are masqueraded; a pod reaching a hostPort through a
//!   host address (hairpin, also its own) is masqueraded so the reply comes back the
//!   same way. The hostport DNAT marks its connection ([`HOSTPORT_CT_MARK`]) and only
//!   marked connections are hairpin-masqueraded: another table's DNAT back into the
//!   bridge (kube-proxy's Services) keeps the client pod's address, as with the
//!   kubelet's bridge networks.

use std::fmt::Write;
use std::net::IpAddr;

use super::Cidr;
use crate::host_ports::HostPort;

/// podhost's table, family `inet` (IPv4 and IPv6 in one), of the default bridge.
pub const TABLE: &str = "podhost";

/// The conntrack mark bit podhost's hostport DNAT ORs into a connection (other bits are
/// left as they are): the hairpin masquerade matches it, so it acts on podhost's own DNAT
/// only. Bit 20, away from the low bits firewalls and kube-proxy's packet marks use.
pub const HOSTPORT_CT_MARK: u32 = 0x0010_0000;

/// The table of the daemon whose bridge is `bridge`: `podhost` for the default bridge
/// `podhost0` (the name every podhost so far used, so an upgrade replaces its own
/// table), `podhost-<bridge>` for any other, so that daemons on separate bridges never
/// replace each other's rules. Characters nft would not take in a name become `_`.
pub fn table_name(bridge: &str) -> String {
    if bridge == "podhost0" {
        return TABLE.to_string();
    }
    let clean: String = bridge
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{TABLE}-{clean}")
}

/// One pod's published ports and the addresses they lead to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodPorts {
    /// The pod's UID (put in each rule's comment, so a rule names its pod).
    pub uid: String,
    pub ips: Vec<IpAddr>,
    pub ports: Vec<HostPort>,
}

/// The transaction for `nft -f -`: the bridge's table ([`table_name`]) as `bridge`,
/// the pod `cidrs`, the `cluster_cidrs` (destinations not masqueraded) and `pods` (in
/// the given order) make it.
pub fn render_ruleset(
    bridge: &str,
    cidrs: &[Cidr],
    cluster_cidrs: &[Cidr],
    pods: &[PodPorts],
) -> String {
    let table = table_name(bridge);
    let mut out = String::new();
    // Declaring the table first makes the delete succeed when it does not exist yet;
    // both happen in the same atomic transaction as the new table.
    let _ = writeln!(out, "table inet {table}\ndelete table inet {table}");
    let _ = writeln!(out, "table inet {table} {{");
    out.push_str("\tchain hostports {\n");
    for pod in pods {
        for port in &pod.ports {
            for rule in dnat_rules(pod, port) {
                let _ = writeln!(out, "\t\t{rule}");
            }
        }
    }
    out.push_str("\t}\n");
    let _ = writeln!(
        out,
        "\tchain prerouting {{\n\t\ttype nat hook prerouting priority dstnat; policy accept;\n\t\tfib daddr type local jump hostports\n\t}}"
    );
    // nft 1.0.6 refuses the `dstnat` keyword in an output hook; -100 is its value.
    let _ = writeln!(
        out,
        "\tchain output {{\n\t\ttype nat hook output priority -100; policy accept;\n\t\tfib daddr type local jump hostports\n\t}}"
    );
    let _ = writeln!(
        out,
        "\tchain postrouting {{\n\t\ttype nat hook postrouting priority srcnat; policy accept;"
    );
    let _ = writeln!(
        out,
        "\t\toifname \"{bridge}\" ip saddr 127.0.0.0/8 masquerade"
    );
    for cidr in cidrs {
        let family = if cidr.is_ipv4() { "ip" } else { "ip6" };
        // Hairpin: a pod's packet that podhost's hostport DNAT sent back into the
        // bridge. (The input interface is unknown in postrouting, so the pod source
        // stands for "came from the bridge".) Another table's DNAT (a Service's) is
        // left alone: its target must see the client pod's own address.
        let _ = writeln!(
            out,
            "\t\toifname \"{bridge}\" {family} saddr {cidr} ct mark and {HOSTPORT_CT_MARK:#x} == {HOSTPORT_CT_MARK:#x} masquerade"
        );
        let exempt = unmasqueraded(cidr, cluster_cidrs);
        let _ = writeln!(
            out,
            "\t\t{family} saddr {cidr} {family} daddr != {exempt} masquerade"
        );
    }
    out.push_str("\t}\n");
    let _ = writeln!(
        out,
        "\tchain forward {{\n\t\ttype filter hook forward priority filter; policy accept;\n\t\tct state established,related accept\n\t\tiifname \"{bridge}\" accept\n\t\toifname \"{bridge}\" accept\n\t}}"
    );
    out.push_str("}\n");
    out
}

/// What traffic from the pod CIDR `cidr` goes to unmasqueraded, in nft's syntax: the
/// CIDR itself and the cluster CIDRs of its family, leaving out any that another covers
/// (a single one is written bare, several as an anonymous set `{ a, b }`).
fn unmasqueraded(cidr: &Cidr, cluster_cidrs: &[Cidr]) -> String {
    let candidates: Vec<Cidr> = std::iter::once(*cidr)
        .chain(
            cluster_cidrs
                .iter()
                .filter(|c| c.is_ipv4() == cidr.is_ipv4())
                .copied(),
        )
        .collect();
    // Drop one that another covers (the first of equal ones stays): nft would merge
    // them in the set anyway; left out, the rule reads back as it was written and a
    // pod CIDR inside its cluster CIDR gives a plain `daddr != RANGE`.
    let kept: Vec<String> = candidates
        .iter()
        .enumerate()
        .filter(|&(i, c)| {
            !candidates
                .iter()
                .enumerate()
                .any(|(j, other)| j != i && other.covers(c) && (other != c || j < i))
        })
        .map(|(_, c)| c.to_string())
        .collect();
    match kept.as_slice() {
        [one] => one.clone(),
        many => format!("{{ {} }}", many.join(", ")),
    }
}

/// The DNAT rules of one published port: for a `hostIP`, one rule to the pod's address
/// of that family; for every address, one per family the pod has an address of.
fn dnat_rules(pod: &PodPorts, port: &HostPort) -> Vec<String> {
    let proto = port.protocol.lower();
    let comment = comment_text(&pod.uid);
    let target = |ip: &IpAddr| match ip {
        IpAddr::V4(a) => format!("dnat ip to {a}:{}", port.container_port),
        IpAddr::V6(a) => format!("dnat ip6 to [{a}]:{}", port.container_port),
    };
    let matches = |ip: &IpAddr| match (port.host_ip, ip) {
        (Some(IpAddr::V4(h)), IpAddr::V4(_)) => Some(format!("ip daddr {h}")),
        (Some(IpAddr::V6(h)), IpAddr::V6(_)) => Some(format!("ip6 daddr {h}")),
        (Some(_), _) => None,
        (None, IpAddr::V4(_)) => Some("meta nfproto ipv4".to_string()),
        (None, IpAddr::V6(_)) => Some("meta nfproto ipv6".to_string()),
    };
    pod.ips
        .iter()
        .filter_map(|ip| {
            let m = matches(ip)?;
            Some(format!(
                "{m} meta l4proto {proto} th dport {} ct mark set ct mark or {HOSTPORT_CT_MARK:#x} {} comment \"{comment}\"",
                port.host_port,
                target(ip)
            ))
        })
        .collect()
}

/// `pod <uid>` with anything but `[A-Za-z0-9._-]` dropped: a comment is quoted text and
/// a UID comes from a manifest.
pub fn comment_text(uid: &str) -> String {
    let clean: String = uid
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        .collect();
    format!("pod {clean}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host_ports::Protocol;

    fn cidrs() -> Vec<Cidr> {
        vec![
            "10.86.0.0/16".parse().unwrap(),
            "fd70:6f64:6800::/64".parse().unwrap(),
        ]
    }

    fn port(host_ip: Option<&str>, host_port: u16, protocol: Protocol) -> HostPort {
        HostPort {
            host_ip: host_ip.map(|i| i.parse().unwrap()),
            host_port,
            container_port: 80,
            protocol,
            container_index: 0,
        }
    }

    fn pod(ports: Vec<HostPort>) -> PodPorts {
        PodPorts {
            uid: "u-1\"; drop".into(),
            ips: vec![
                "10.86.0.2".parse().unwrap(),
                "fd70:6f64:6800::2".parse().unwrap(),
            ],
            ports,
        }
    }

    #[test]
    fn without_pods_the_table_masquerades_and_forwards_only() {
        let text = render_ruleset("podhost0", &cidrs(), &[], &[]);
        assert!(text.starts_with("table inet podhost\ndelete table inet podhost\n"));
        assert!(text.contains("\tchain hostports {\n\t}\n"), "{text}");
        assert!(text.contains("ip saddr 10.86.0.0/16 ip daddr != 10.86.0.0/16 masquerade"));
        assert!(
            text.contains(
                "ip6 saddr fd70:6f64:6800::/64 ip6 daddr != fd70:6f64:6800::/64 masquerade"
            )
        );
        assert!(text.contains(
            "oifname \"podhost0\" ip saddr 10.86.0.0/16 ct mark and 0x100000 == 0x100000 masquerade"
        ));
        assert!(!text.contains("ct status dnat"), "{text}");
        assert!(text.contains("oifname \"podhost0\" ip saddr 127.0.0.0/8 masquerade"));
        assert!(text.contains("ct state established,related accept"));
        assert!(!text.contains("dnat ip"), "{text}");
        // Only podhost's table is named.
        for line in text.lines().filter(|l| l.contains("table")) {
            assert!(
                line.ends_with("inet podhost") || line.ends_with("inet podhost {"),
                "{line}"
            );
        }
    }

    /// The masquerade lines of `text`, without indentation.
    fn masquerades(text: &str) -> Vec<&str> {
        text.lines()
            .map(str::trim)
            .filter(|l| l.ends_with(" masquerade") && l.contains(" daddr != "))
            .collect()
    }

    #[test]
    fn without_a_cluster_cidr_only_the_pod_cidrs_are_exempt_as_before() {
        let text = render_ruleset("podhost0", &cidrs(), &[], &[]);
        assert_eq!(
            masquerades(&text),
            [
                "ip saddr 10.86.0.0/16 ip daddr != 10.86.0.0/16 masquerade",
                "ip6 saddr fd70:6f64:6800::/64 ip6 daddr != fd70:6f64:6800::/64 masquerade",
            ]
        );
    }

    #[test]
    fn cluster_cidrs_of_each_family_are_not_masqueraded() {
        let pod_cidrs: Vec<Cidr> = vec![
            "10.244.1.0/24".parse().unwrap(),
            "fd00:10:244:1::/64".parse().unwrap(),
        ];
        let cluster = vec![
            Cidr::parse_range("10.244.0.0/16").unwrap(),
            Cidr::parse_range("fd00:10:244::/56").unwrap(),
        ];
        let text = render_ruleset("podhost0", &pod_cidrs, &cluster, &[]);
        assert_eq!(
            masquerades(&text),
            [
                "ip saddr 10.244.1.0/24 ip daddr != 10.244.0.0/16 masquerade",
                "ip6 saddr fd00:10:244:1::/64 ip6 daddr != fd00:10:244::/56 masquerade",
            ]
        );
        // The hairpin masquerade still names the node's own pod CIDR.
        assert!(text.contains(
            "oifname \"podhost0\" ip saddr 10.244.1.0/24 ct mark and 0x100000 == 0x100000 masquerade"
        ));
        // Ranges that do not cover the pod CIDR (what validation refuses, but the
        // function stays total) make a set with it; a covered or repeated one is left
        // out; an IPv4-only cluster CIDR leaves IPv6 as it was.
        let cluster = vec![
            Cidr::parse_range("10.245.0.0/16").unwrap(),
            Cidr::parse_range("10.245.3.0/24").unwrap(),
            Cidr::parse_range("100.64.0.0/10").unwrap(),
            Cidr::parse_range("10.245.0.0/16").unwrap(),
        ];
        let text = render_ruleset("podhost0", &pod_cidrs, &cluster, &[]);
        assert_eq!(
            masquerades(&text),
            [
                "ip saddr 10.244.1.0/24 ip daddr != { 10.244.1.0/24, 10.245.0.0/16, 100.64.0.0/10 } masquerade",
                "ip6 saddr fd00:10:244:1::/64 ip6 daddr != fd00:10:244:1::/64 masquerade",
            ]
        );
    }

    #[test]
    fn a_port_on_every_address_is_published_for_each_family_of_the_pod() {
        let text = render_ruleset(
            "podhost0",
            &cidrs(),
            &[],
            &[pod(vec![port(None, 8080, Protocol::Tcp)])],
        );
        assert!(text.contains(
            "meta nfproto ipv4 meta l4proto tcp th dport 8080 ct mark set ct mark or 0x100000 dnat ip to 10.86.0.2:80 comment \"pod u-1drop\""
        ), "{text}");
        assert!(text.contains(
            "meta nfproto ipv6 meta l4proto tcp th dport 8080 ct mark set ct mark or 0x100000 dnat ip6 to [fd70:6f64:6800::2]:80"
        ), "{text}");
    }

    #[test]
    fn a_host_ip_narrows_the_rule_to_that_address_and_its_family() {
        let ports = vec![
            port(Some("127.0.0.1"), 8443, Protocol::Udp),
            port(Some("fd00::9"), 9000, Protocol::Sctp),
        ];
        let text = render_ruleset("br9", &cidrs(), &[], &[pod(ports)]);
        let dnats: Vec<&str> = text.lines().filter(|l| l.contains(" dnat ip")).collect();
        assert_eq!(dnats.len(), 2, "{text}");
        assert!(dnats[0].trim_start().starts_with(
            "ip daddr 127.0.0.1 meta l4proto udp th dport 8443 ct mark set ct mark or 0x100000 dnat ip to 10.86.0.2:80"
        ));
        assert!(dnats[1].trim_start().starts_with(
            "ip6 daddr fd00::9 meta l4proto sctp th dport 9000 ct mark set ct mark or 0x100000 dnat ip6 to [fd70:6f64:6800::2]:80"
        ));
        assert!(text.contains("oifname \"br9\""));
    }

    #[test]
    fn each_bridge_has_its_own_table_and_the_default_keeps_the_old_name() {
        assert_eq!(table_name("podhost0"), "podhost");
        assert_eq!(table_name("podhost1"), "podhost-podhost1");
        assert_eq!(table_name("br.x-1"), "podhost-br.x-1");
        let text = render_ruleset("podhost1", &cidrs(), &[], &[]);
        assert!(
            text.starts_with("table inet podhost-podhost1\ndelete table inet podhost-podhost1\n"),
            "{text}"
        );
        for line in text.lines().filter(|l| l.contains("table")) {
            assert!(line.contains("inet podhost-podhost1"), "{line}");
        }
    }

    #[test]
    fn the_ruleset_is_a_pure_function_of_its_inputs() {
        let pods = [pod(vec![port(None, 1, Protocol::Tcp)])];
        assert_eq!(
            render_ruleset("podhost0", &cidrs(), &[], &pods),
            render_ruleset("podhost0", &cidrs(), &[], &pods)
        );
        let v4_only = render_ruleset("podhost0", &cidrs()[..1], &[], &[]);
        assert!(!v4_only.contains("ip6 saddr"));
    }
}
