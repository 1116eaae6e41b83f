use k8s_openapi::api::core::v1::PodDNSConfigOption;

use super::*;
use crate::dns::parse_resolv_conf;

fn strings(l: &[&str]) -> Vec<String> {
    l.iter().map(|s| s.to_string()).collect()
}

fn settings(cluster_dns: &[&str], domain: &str) -> DnsSettings {
    DnsSettings {
        cluster_dns: cluster_dns.iter().map(|s| s.parse().unwrap()).collect(),
        cluster_domain: domain.into(),
        ..Default::default()
    }
}

fn dns_config(ns: &[&str], search: &[&str], options: &[(&str, Option<&str>)]) -> PodDNSConfig {
    PodDNSConfig {
        nameservers: Some(strings(ns)),
        searches: Some(strings(search)),
        options: Some(
            options
                .iter()
                .map(|(n, v)| PodDNSConfigOption {
                    name: Some(n.to_string()),
                    value: v.map(str::to_string),
                })
                .collect(),
        ),
    }
}

const HOST: &str = "nameserver 192.0.2.53\nsearch corp.example\noptions ndots:2 edns0\n";

struct Case<'a> {
    what: &'a str,
    policy: Option<&'a str>,
    host_network: bool,
    settings: DnsSettings,
    /// `None`: `--resolv-conf ""`.
    host: Option<&'a str>,
    dns_config: Option<PodDNSConfig>,
    want: &'a str,
    missing: bool,
}

fn run(case: &Case<'_>) -> PodDns {
    let host = case.host.map(parse_resolv_conf);
    let node_ips: Vec<IpAddr> = vec!["192.0.2.7".parse().unwrap(), "2001:db8::7".parse().unwrap()];
    pod_dns(&PodDnsInput {
        policy: case.policy,
        host_network: case.host_network,
        dns_config: case.dns_config.as_ref(),
        namespace: "team",
        settings: &case.settings,
        host: host.as_ref(),
        node_ips: &node_ips,
    })
}

#[test]
fn every_policy_as_the_kubelet() {
    let cluster = settings(&["10.96.0.10"], "cluster.local");
    let standalone = settings(&[], "");
    let cases = [
        Case {
            what: "ClusterFirst with cluster DNS: cluster searches then the host's, ndots:5",
            policy: Some("ClusterFirst"),
            host_network: false,
            settings: cluster.clone(),
            host: Some(HOST),
            dns_config: None,
            want: "search team.svc.cluster.local svc.cluster.local cluster.local corp.example\nnameserver 10.96.0.10\noptions ndots:5\n",
            missing: false,
        },
        Case {
            what: "unset policy is ClusterFirst",
            policy: None,
            host_network: false,
            settings: cluster.clone(),
            host: Some(HOST),
            dns_config: None,
            want: "search team.svc.cluster.local svc.cluster.local cluster.local corp.example\nnameserver 10.96.0.10\noptions ndots:5\n",
            missing: false,
        },
        Case {
            what: "ClusterFirst with cluster DNS but no domain: the host's searches",
            policy: Some("ClusterFirst"),
            host_network: false,
            settings: settings(&["10.96.0.10", "fd00::10"], ""),
            host: Some(HOST),
            dns_config: None,
            want: "search corp.example\nnameserver 10.96.0.10\nnameserver fd00::10\noptions ndots:5\n",
            missing: false,
        },
        Case {
            what: "ClusterFirst standalone: Default, and the fallback is reported",
            policy: Some("ClusterFirst"),
            host_network: false,
            settings: standalone.clone(),
            host: Some(HOST),
            dns_config: None,
            want: "search corp.example\nnameserver 192.0.2.53\noptions ndots:2 edns0\n",
            missing: true,
        },
        Case {
            what: "ClusterFirst on the host network: Default without a warning",
            policy: Some("ClusterFirst"),
            host_network: true,
            settings: cluster.clone(),
            host: Some(HOST),
            dns_config: None,
            want: "search corp.example\nnameserver 192.0.2.53\noptions ndots:2 edns0\n",
            missing: false,
        },
        Case {
            what: "ClusterFirstWithHostNet on the host network: cluster DNS",
            policy: Some("ClusterFirstWithHostNet"),
            host_network: true,
            settings: cluster.clone(),
            host: Some(HOST),
            dns_config: None,
            want: "search team.svc.cluster.local svc.cluster.local cluster.local corp.example\nnameserver 10.96.0.10\noptions ndots:5\n",
            missing: false,
        },
        Case {
            what: "ClusterFirstWithHostNet standalone: Default, reported",
            policy: Some("ClusterFirstWithHostNet"),
            host_network: true,
            settings: standalone.clone(),
            host: Some(HOST),
            dns_config: None,
            want: "search corp.example\nnameserver 192.0.2.53\noptions ndots:2 edns0\n",
            missing: true,
        },
        Case {
            what: "Default: the host's file even with cluster DNS",
            policy: Some("Default"),
            host_network: false,
            settings: cluster.clone(),
            host: Some(HOST),
            dns_config: None,
            want: "search corp.example\nnameserver 192.0.2.53\noptions ndots:2 edns0\n",
            missing: false,
        },
        Case {
            what: "Default with --resolv-conf \"\": loopback per family, search root",
            policy: Some("Default"),
            host_network: false,
            settings: standalone.clone(),
            host: None,
            dns_config: None,
            want: "search .\nnameserver 127.0.0.1\nnameserver ::1\n",
            missing: false,
        },
        Case {
            what: "ClusterFirst with --resolv-conf \"\": cluster searches only",
            policy: Some("ClusterFirst"),
            host_network: false,
            settings: cluster.clone(),
            host: None,
            dns_config: None,
            want: "search team.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n",
            missing: false,
        },
        Case {
            what: "None: dnsConfig only",
            policy: Some("None"),
            host_network: false,
            settings: cluster.clone(),
            host: Some(HOST),
            dns_config: Some(dns_config(
                &["203.0.113.1"],
                &["a.example"],
                &[("ndots", Some("1")), ("rotate", None)],
            )),
            want: "search a.example\nnameserver 203.0.113.1\noptions ndots:1 rotate\n",
            missing: false,
        },
        Case {
            what: "None without dnsConfig (validation refuses it): an empty file",
            policy: Some("None"),
            host_network: false,
            settings: cluster.clone(),
            host: Some(HOST),
            dns_config: None,
            want: "",
            missing: false,
        },
        Case {
            what: "ClusterFirst + dnsConfig: appended, deduplicated, options by name",
            policy: Some("ClusterFirst"),
            host_network: false,
            settings: cluster.clone(),
            host: Some(HOST),
            dns_config: Some(dns_config(
                &["10.96.0.10", "203.0.113.1"],
                &["svc.cluster.local", "extra.example"],
                &[("ndots", Some("2")), ("edns0", None), ("timeout", Some(""))],
            )),
            want: "search team.svc.cluster.local svc.cluster.local cluster.local corp.example extra.example\nnameserver 10.96.0.10\nnameserver 203.0.113.1\noptions ndots:2 edns0 timeout\n",
            missing: false,
        },
        Case {
            what: "Default + dnsConfig: the host's options replaced by name, order kept",
            policy: Some("Default"),
            host_network: false,
            settings: standalone.clone(),
            host: Some(HOST),
            dns_config: Some(dns_config(
                &[],
                &[],
                &[("edns0", None), ("ndots", Some("3"))],
            )),
            want: "search corp.example\nnameserver 192.0.2.53\noptions ndots:3 edns0\n",
            missing: false,
        },
    ];
    for case in &cases {
        let got = run(case);
        assert_eq!(got.conf.render(), case.want, "{}", case.what);
        assert_eq!(got.missing_cluster_dns, case.missing, "{}", case.what);
        assert!(got.warnings.is_empty(), "{}: {:?}", case.what, got.warnings);
    }
}

#[test]
fn limits_apply_after_the_merge_with_a_dns_config_forming_warning() {
    let case = Case {
        what: "two cluster DNS + host none + two more from dnsConfig",
        policy: Some("ClusterFirst"),
        host_network: false,
        settings: settings(&["10.96.0.10", "10.96.0.11"], "cluster.local"),
        host: Some(HOST),
        dns_config: Some(dns_config(&["203.0.113.1", "203.0.113.2"], &[], &[])),
        want: "",
        missing: false,
    };
    let got = run(&case);
    assert_eq!(
        got.conf.nameservers,
        strings(&["10.96.0.10", "10.96.0.11", "203.0.113.1"])
    );
    assert_eq!(
        got.warnings,
        [DnsWarning {
            reason: "DNSConfigForming",
            message: "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 10.96.0.10 10.96.0.11 203.0.113.1 (omitted: 203.0.113.2)".into(),
        }]
    );
    let searches: Vec<String> = (0..31).map(|i| format!("s{i}.example")).collect();
    let searches: Vec<&str> = searches.iter().map(String::as_str).collect();
    let case = Case {
        dns_config: Some(dns_config(&[], &searches, &[])),
        settings: settings(&["10.96.0.10"], "cluster.local"),
        ..case
    };
    let got = run(&case);
    // 3 cluster + 1 host + 31 = 35 → 32.
    assert_eq!(got.conf.searches.len(), 32);
    assert_eq!(got.warnings.len(), 1);
    assert!(
        got.warnings[0]
            .message
            .ends_with("(omitted: s28.example s29.example s30.example)"),
        "{:?}",
        got.warnings
    );
}
