//! A pod's name service files, as the kubelet makes them: the hostname and domain
//! (`spec.hostname`, `spec.subdomain`, `setHostnameAsFQDN`), the managed `/etc/hosts`
//! (`hostAliases`) and `/etc/resolv.conf` per `dnsPolicy` and `dnsConfig`.
//!
//! Pure: the worker reads the host's files and writes the pod's (`worker::dns_files`).

pub mod hostname;
pub mod hosts;
pub mod policy;
pub mod resolv;

use std::net::IpAddr;
use std::path::PathBuf;

pub use hostname::{PodHostname, kernel_hostname, pod_hostname};
pub use hosts::{host_network_hosts_file, managed_hosts_file};
pub use policy::{DnsWarning, PodDns, PodDnsInput, pod_dns};
pub use resolv::{ResolvConf, parse_resolv_conf};

/// The kubelet's `/etc/resolv.conf` of the host, the default of `--resolv-conf`.
pub const DEFAULT_RESOLV_CONF: &str = "/etc/resolv.conf";

/// The node's DNS settings (the kubelet's `--cluster-dns`, `--cluster-domain`,
/// `--resolv-conf`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsSettings {
    /// The cluster's DNS servers; empty in standalone mode, where ClusterFirst pods fall
    /// back to Default, as the kubelet's do.
    pub cluster_dns: Vec<IpAddr>,
    /// The cluster's domain (`cluster.local`); empty = none (the kubelet's default).
    pub cluster_domain: String,
    /// The host's resolver configuration; `None` for `--resolv-conf ""` (the pods get
    /// the node's loopback as nameserver, as the kubelet gives them).
    pub resolv_conf: Option<PathBuf>,
}

impl Default for DnsSettings {
    fn default() -> Self {
        Self {
            cluster_dns: Vec::new(),
            cluster_domain: String::new(),
            resolv_conf: Some(PathBuf::from(DEFAULT_RESOLV_CONF)),
        }
    }
}

/// A pod whose name files cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DnsError {
    /// setHostnameAsFQDN with an FQDN longer than the kernel's nodename field (the
    /// kubelet's message): shorten the hostname, subdomain or namespace.
    #[error(
        "failed to construct FQDN from pod hostname and cluster domain, FQDN {fqdn} is too long ({max} characters is the max, {len} characters requested)"
    )]
    FqdnTooLong {
        fqdn: String,
        max: usize,
        len: usize,
    },
    /// The hostname is empty once cut to 63 characters and trimmed of `-` and `.`.
    #[error("hostname for pod {pod:?} was invalid: {hostname:?}")]
    InvalidHostname { pod: String, hostname: String },
}
