//! The API server's rules for a pod's DNS settings (`validatePodDNSConfig`,
//! `ValidateHostAliases`): what the kubelet would write into resolv.conf and /etc/hosts
//! must be addresses and names, within the resolver's limits.

use k8s_openapi::api::core::v1::PodSpec;

use super::Errs;
use super::names::dns1123_subdomain;
use crate::error::ValueError;

/// The resolver's limits, as the API server has them.
const MAX_NAMESERVERS: usize = 3;
const MAX_SEARCHES: usize = 32;
const MAX_SEARCH_CHARS: usize = 2048;

pub(super) fn validate(spec: &PodSpec, errs: &mut Errs) {
    dns_config(spec, errs);
    for (i, alias) in spec.host_aliases.iter().flatten().enumerate() {
        let at = format!("spec.hostAliases[{i}]");
        let ip = alias.ip.as_str();
        if ip.is_empty() {
            errs.bare(
                format!("{at}.ip"),
                ValueError::Required {
                    hint: "give the address the hostnames resolve to",
                },
            );
        } else if ip.parse::<std::net::IpAddr>().is_err() {
            errs.invalid(format!("{at}.ip"), ip, ValueError::NotAnIp);
        }
        for (j, name) in alias.hostnames.iter().flatten().enumerate() {
            errs.check(
                format!("{at}.hostnames[{j}]"),
                name,
                dns1123_subdomain(name),
            );
        }
    }
}

fn dns_config(spec: &PodSpec, errs: &mut Errs) {
    let Some(config) = spec.dns_config.as_ref() else {
        return;
    };
    let nameservers = config.nameservers.as_deref().unwrap_or_default();
    if spec.dns_policy.as_deref() == Some("None") && nameservers.is_empty() {
        errs.bare(
            "spec.dnsConfig.nameservers",
            ValueError::Required {
                hint: "dnsPolicy None needs at least one nameserver",
            },
        );
    }
    if nameservers.len() > MAX_NAMESERVERS {
        errs.invalid(
            "spec.dnsConfig.nameservers",
            nameservers.join(","),
            ValueError::TooMany {
                max: MAX_NAMESERVERS,
                what: "nameservers",
            },
        );
    }
    for (i, ns) in nameservers.iter().enumerate() {
        if ns.parse::<std::net::IpAddr>().is_err() {
            errs.invalid(
                format!("spec.dnsConfig.nameservers[{i}]"),
                ns,
                ValueError::NotAnIp,
            );
        }
    }
    let searches = config.searches.as_deref().unwrap_or_default();
    if searches.len() > MAX_SEARCHES {
        errs.invalid(
            "spec.dnsConfig.searches",
            searches.join(" "),
            ValueError::TooMany {
                max: MAX_SEARCHES,
                what: "search paths",
            },
        );
    }
    let chars = searches.iter().map(String::len).sum::<usize>() + searches.len().saturating_sub(1);
    if chars > MAX_SEARCH_CHARS {
        errs.invalid(
            "spec.dnsConfig.searches",
            format!("{chars} characters"),
            ValueError::TooMany {
                max: MAX_SEARCH_CHARS,
                what: "characters (including spaces) in the search list",
            },
        );
    }
    for (i, search) in searches.iter().enumerate() {
        if !is_search_domain(search) {
            errs.invalid(
                format!("spec.dnsConfig.searches[{i}]"),
                search,
                ValueError::SearchDomain,
            );
        }
    }
    for (i, option) in config.options.iter().flatten().enumerate() {
        if option.name.as_deref().is_none_or(str::is_empty) {
            errs.bare(
                format!("spec.dnsConfig.options[{i}].name"),
                ValueError::Required {
                    hint: "name the resolver option (ndots, timeout, edns0…)",
                },
            );
        }
    }
}

/// A search domain: a DNS subdomain that may end with '.' and whose labels may hold
/// '_' (the API server's `validateDNSSearch` allows both); "." alone is the root.
fn is_search_domain(s: &str) -> bool {
    if s == "." {
        return true;
    }
    let s = s.strip_suffix('.').unwrap_or(s);
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(yaml: &str) -> Vec<String> {
        let spec: PodSpec = serde_yaml_ng::from_str(yaml).unwrap();
        let mut errs = Errs::default();
        validate(&spec, &mut errs);
        errs.0.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn valid_dns_settings_pass() {
        assert_eq!(
            errors(
                "containers: []\ndnsPolicy: None\ndnsConfig:\n  nameservers: [10.0.0.10, \"fd00::10\"]\n  searches: [svc.cluster.local, _tcp.example.com., \".\"]\n  options: [{name: ndots, value: \"2\"}]\nhostAliases: [{ip: 10.1.2.3, hostnames: [db, db.local]}]\n"
            ),
            Vec::<String>::new()
        );
    }

    #[test]
    fn every_broken_dns_setting_is_named() {
        let e = errors(
            "containers: []\ndnsConfig:\n  nameservers: [1.1.1.1, 2.2.2.2, 3.3.3.3, dns.example]\n  searches: [Bad_Caps.example]\n  options: [{value: \"1\"}]\nhostAliases: [{ip: 300.1.1.1, hostnames: [ok, -bad]}, {hostnames: [x]}]\n",
        );
        let joined = e.join("\n");
        for want in [
            "spec.dnsConfig.nameservers: invalid value",
            "must not have more than 3 nameservers",
            "spec.dnsConfig.nameservers[3]",
            "spec.dnsConfig.searches[0]",
            "spec.dnsConfig.options[0].name",
            "spec.hostAliases[0].ip",
            "spec.hostAliases[0].hostnames[1]",
            "spec.hostAliases[1].ip",
        ] {
            assert!(joined.contains(want), "{want} missing in:\n{joined}");
        }
        assert_eq!(e.len(), 7, "{joined}");
    }

    #[test]
    fn dns_policy_none_needs_a_nameserver() {
        let e = errors("containers: []\ndnsPolicy: None\ndnsConfig: {searches: [a.example]}\n");
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains("spec.dnsConfig.nameservers"), "{e:?}");
    }

    #[test]
    fn the_search_list_is_limited_in_count_and_length() {
        let many: Vec<String> = (0..33).map(|i| format!("d{i}.example")).collect();
        let e = errors(&format!(
            "containers: []\ndnsConfig: {{searches: [{}]}}\n",
            many.join(", ")
        ));
        assert!(
            e.iter().any(|m| m.contains("more than 32 search paths")),
            "{e:?}"
        );
        // 30 names of about 70 characters: few enough, but too long together.
        let long: Vec<String> = (0..30)
            .map(|i| format!("{}.example", "a".repeat(60) + &i.to_string()))
            .collect();
        let e = errors(&format!(
            "containers: []\ndnsConfig: {{searches: [{}]}}\n",
            long.join(", ")
        ));
        assert!(
            e.iter().any(|m| m.contains("more than 2048 characters")),
            "{e:?}"
        );
    }
}
