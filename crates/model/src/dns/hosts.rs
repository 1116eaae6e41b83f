//! The pod's `/etc/hosts`: the kubelet's managed file for a pod with its own network,
//! the node's file for a hostNetwork pod, both with the `hostAliases` section.

use std::fmt::Write;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::HostAlias;

use super::PodHostname;

/// The first line of a managed hosts file (the kubelet's).
pub const MANAGED_HEADER: &str = "# Kubernetes-managed hosts file.\n";
/// The first line of a hostNetwork pod's hosts file (the kubelet's).
pub const HOST_NETWORK_HEADER: &str = "# Kubernetes-managed hosts file (host network).\n";
/// Where a pod without an address finds its own name (Debian's convention for a host
/// without a permanent address): the kubelet mounts no hosts file at all then, and
/// `hostname -f` fails in the pod.
pub const NO_ADDRESS_SELF: &str = "127.0.1.1";

/// The kubelet's managed hosts file: localhost, the IPv6 names, one line per pod IP with
/// the FQDN (with a domain) and the hostname, then the host aliases. A pod without an
/// address (no pod network) gets its names on 127.0.1.1, so that they still resolve.
pub fn managed_hosts_file(pod_ips: &[IpAddr], name: &PodHostname, aliases: &[HostAlias]) -> String {
    let mut out = String::from(MANAGED_HEADER);
    out.push_str("127.0.0.1\tlocalhost\n");
    out.push_str("::1\tlocalhost ip6-localhost ip6-loopback\n");
    out.push_str("fe00::0\tip6-localnet\n");
    out.push_str("fe00::0\tip6-mcastprefix\n");
    out.push_str("fe00::1\tip6-allnodes\n");
    out.push_str("fe00::2\tip6-allrouters\n");
    let names = match &name.domain {
        Some(domain) => format!("{}.{domain}\t{}", name.hostname, name.hostname),
        None => name.hostname.clone(),
    };
    if pod_ips.is_empty() {
        let _ = writeln!(out, "{NO_ADDRESS_SELF}\t{names}");
    }
    for ip in pod_ips {
        let _ = writeln!(out, "{ip}\t{names}");
    }
    out.push_str(&aliases_section(aliases));
    out
}

/// A hostNetwork pod's hosts file: the node's, under the kubelet's header, with the
/// host aliases after it.
pub fn host_network_hosts_file(node_hosts: &str, aliases: &[HostAlias]) -> String {
    let mut out = String::from(HOST_NETWORK_HEADER);
    out.push_str(node_hosts);
    out.push_str(&aliases_section(aliases));
    out
}

/// `# Entries added by HostAliases.` and one line per alias: its IP and its hostnames,
/// tab-separated (nothing without aliases).
fn aliases_section(aliases: &[HostAlias]) -> String {
    if aliases.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n# Entries added by HostAliases.\n");
    for alias in aliases {
        let hostnames = alias.hostnames.as_deref().unwrap_or_default().join("\t");
        let _ = writeln!(out, "{}\t{hostnames}", alias.ip);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCAL: &str = "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n";

    fn alias(ip: &str, names: &[&str]) -> HostAlias {
        HostAlias {
            ip: ip.into(),
            hostnames: Some(names.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn managed_file_per_address_domain_and_aliases() {
        let plain = PodHostname {
            hostname: "web".into(),
            domain: None,
        };
        let fq = PodHostname {
            hostname: "web".into(),
            domain: Some("sub.ns.svc.cluster.local".into()),
        };
        let v4: IpAddr = "10.44.0.5".parse().unwrap();
        let v6: IpAddr = "fd44::5".parse().unwrap();
        let aliases = [
            alias("10.1.2.3", &["db", "db.local"]),
            alias("::2", &["six"]),
        ];
        let (one, two) = ([v4], [v4, v6]);
        let table: Vec<(&[IpAddr], &PodHostname, &[HostAlias], String)> = vec![
            (&one, &plain, &[], format!("{LOCAL}10.44.0.5\tweb\n")),
            (
                &two,
                &fq,
                &[],
                format!(
                    "{LOCAL}10.44.0.5\tweb.sub.ns.svc.cluster.local\tweb\nfd44::5\tweb.sub.ns.svc.cluster.local\tweb\n"
                ),
            ),
            (
                &one,
                &plain,
                &aliases,
                format!(
                    "{LOCAL}10.44.0.5\tweb\n\n# Entries added by HostAliases.\n10.1.2.3\tdb\tdb.local\n::2\tsix\n"
                ),
            ),
            // No address: the names on 127.0.1.1.
            (
                &[],
                &fq,
                &[],
                format!("{LOCAL}127.0.1.1\tweb.sub.ns.svc.cluster.local\tweb\n"),
            ),
        ];
        for (ips, name, aliases, want) in table {
            assert_eq!(managed_hosts_file(ips, name, aliases), want);
        }
    }

    #[test]
    fn host_network_file_is_the_nodes_with_header_and_aliases() {
        let node = "127.0.0.1 localhost\n192.0.2.7 node-a\n";
        assert_eq!(
            host_network_hosts_file(node, &[]),
            format!("# Kubernetes-managed hosts file (host network).\n{node}")
        );
        assert_eq!(
            host_network_hosts_file(node, &[alias("10.9.9.9", &["x"])]),
            format!(
                "# Kubernetes-managed hosts file (host network).\n{node}\n# Entries added by HostAliases.\n10.9.9.9\tx\n"
            )
        );
    }
}
