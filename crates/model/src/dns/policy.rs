//! A pod's resolver configuration per `dnsPolicy`, merged with its `dnsConfig` (the
//! kubelet's `GetPodDNS`).

use std::net::IpAddr;

use k8s_openapi::api::core::v1::PodDNSConfig;

use super::{DnsSettings, ResolvConf};

/// The options of a ClusterFirst pod with a cluster DNS.
pub const CLUSTER_FIRST_OPTIONS: &[&str] = &["ndots:5"];

/// What a pod's resolv.conf is made from.
#[derive(Debug, Clone, Copy)]
pub struct PodDnsInput<'a> {
    /// `spec.dnsPolicy` (the API default, ClusterFirst, when unset).
    pub policy: Option<&'a str>,
    pub host_network: bool,
    pub dns_config: Option<&'a PodDNSConfig>,
    pub namespace: &'a str,
    pub settings: &'a DnsSettings,
    /// The host's resolver configuration (`--resolv-conf`); `None` when that flag is
    /// empty. Unused with dnsPolicy None.
    pub host: Option<&'a ResolvConf>,
    /// The node's addresses: with `--resolv-conf ""`, one loopback nameserver per family.
    pub node_ips: &'a [IpAddr],
}

/// A warning for the pod's events, in the kubelet's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsWarning {
    /// The event's reason (`DNSConfigForming`, `MissingClusterDNS`).
    pub reason: &'static str,
    pub message: String,
}

/// The pod's resolver configuration and what to say about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodDns {
    pub conf: ResolvConf,
    /// Limits that cut the configuration (`DNSConfigForming`).
    pub warnings: Vec<DnsWarning>,
    /// A ClusterFirst pod fell back to Default because no `--cluster-dns` is set (the
    /// kubelet's `MissingClusterDNS`; podhost says it once per daemon, not per pod).
    pub missing_cluster_dns: bool,
}

/// The kubelet's node-level `MissingClusterDNS` message, naming podhost's flag.
pub const MISSING_CLUSTER_DNS: &str = "podhost has no --cluster-dns configured and cannot create Pod using \"ClusterFirst\" policy. Falling back to \"Default\" policy.";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DnsType {
    Cluster,
    Host,
    None,
}

fn dns_type(policy: Option<&str>, host_network: bool) -> DnsType {
    match policy.unwrap_or("ClusterFirst") {
        "None" => DnsType::None,
        "ClusterFirstWithHostNet" => DnsType::Cluster,
        // A hostNetwork pod with ClusterFirst uses the host's DNS, as in the kubelet.
        "ClusterFirst" if host_network => DnsType::Host,
        "Default" => DnsType::Host,
        // ClusterFirst, and anything validation let through (the kubelet's fallback).
        _ => DnsType::Cluster,
    }
}

/// The pod's resolv.conf settings: the policy's base, then `dnsConfig` appended
/// (nameservers and searches deduplicated, options by name with the pod's value
/// winning), then cut to the kubelet's limits.
pub fn pod_dns(input: &PodDnsInput<'_>) -> PodDns {
    let settings = input.settings;
    let mut missing_cluster_dns = false;
    let host = input.host.cloned().unwrap_or_default();
    let mut conf = match dns_type(input.policy, input.host_network) {
        DnsType::None => ResolvConf::default(),
        DnsType::Cluster if !settings.cluster_dns.is_empty() => ResolvConf {
            nameservers: settings.cluster_dns.iter().map(IpAddr::to_string).collect(),
            searches: cluster_searches(host.searches, input.namespace, &settings.cluster_domain),
            options: CLUSTER_FIRST_OPTIONS
                .iter()
                .map(|s| s.to_string())
                .collect(),
        },
        DnsType::Cluster => {
            missing_cluster_dns = true;
            host_dns(input)
        }
        DnsType::Host => host_dns(input),
    };
    if let Some(extra) = input.dns_config {
        conf.nameservers
            .extend(extra.nameservers.iter().flatten().cloned());
        conf.nameservers = dedup(std::mem::take(&mut conf.nameservers));
        conf.searches
            .extend(extra.searches.iter().flatten().cloned());
        conf.searches = dedup(std::mem::take(&mut conf.searches));
        conf.options = merge_options(&conf.options, extra);
    }
    let warnings = conf
        .fit_limits()
        .into_iter()
        .map(|message| DnsWarning {
            reason: "DNSConfigForming",
            message,
        })
        .collect();
    PodDns {
        conf,
        warnings,
        missing_cluster_dns,
    }
}

/// Default: the host's resolver configuration; with `--resolv-conf ""` the node's
/// loopback (one per address family of the node's IPs) and the root as search, which
/// keeps lookups from escaping anywhere, as the kubelet does.
fn host_dns(input: &PodDnsInput<'_>) -> ResolvConf {
    if let Some(host) = input.host {
        return host.clone();
    }
    let mut nameservers: Vec<String> = input
        .node_ips
        .iter()
        .map(|ip| if ip.is_ipv6() { "::1" } else { "127.0.0.1" }.to_string())
        .collect();
    if nameservers.is_empty() {
        nameservers.push("127.0.0.1".into());
    }
    ResolvConf {
        nameservers,
        searches: vec![".".into()],
        options: Vec::new(),
    }
}

/// `<ns>.svc.<domain> svc.<domain> <domain>`, then the host's (duplicates dropped); the
/// host's alone without a cluster domain.
fn cluster_searches(host: Vec<String>, namespace: &str, domain: &str) -> Vec<String> {
    if domain.is_empty() {
        return host;
    }
    let mut all = vec![
        format!("{namespace}.svc.{domain}"),
        format!("svc.{domain}"),
        domain.to_string(),
    ];
    all.extend(host);
    dedup(all)
}

fn dedup(list: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    list.into_iter()
        .filter(|s| seen.insert(s.clone()))
        .collect()
}

/// Options by name: the pod's value replaces the base's. The kubelet's map loses the
/// order; here an option keeps the place where it first appeared.
fn merge_options(base: &[String], extra: &PodDNSConfig) -> Vec<String> {
    let mut merged: Vec<(String, Option<String>)> = Vec::new();
    let mut set =
        |name: &str, value: Option<String>| match merged.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => slot.1 = value,
            None => merged.push((name.to_string(), value)),
        };
    for op in base {
        match op.split_once(':') {
            Some((name, value)) => set(name, Some(value.to_string())),
            None => set(op, None),
        }
    }
    for op in extra.options.iter().flatten() {
        set(op.name.as_deref().unwrap_or_default(), op.value.clone());
    }
    merged
        .into_iter()
        .filter(|(name, _)| !name.is_empty())
        .map(|(name, value)| match value.filter(|v| !v.is_empty()) {
            Some(v) => format!("{name}:{v}"),
            None => name,
        })
        .collect()
}

#[cfg(test)]
mod tests;
