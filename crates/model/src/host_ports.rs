//! A pod's published ports (`ports[].hostPort`, with `hostIP` and `protocol`) and the
//! kubelet's host-port admission check: two pods may not publish the same protocol and
//! port on overlapping host addresses.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::Pod;

/// A transport protocol of a container port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}

impl Protocol {
    /// From the spec's `protocol` (TCP when unset, as the API server defaults it).
    pub fn from_spec(p: Option<&str>) -> Option<Self> {
        match p.unwrap_or("TCP") {
            "TCP" => Some(Self::Tcp),
            "UDP" => Some(Self::Udp),
            "SCTP" => Some(Self::Sctp),
            _ => None,
        }
    }

    /// The spec's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tcp => "TCP",
            Self::Udp => "UDP",
            Self::Sctp => "SCTP",
        }
    }

    /// The lower-case name nftables and CNI's portMappings use.
    pub fn lower(self) -> &'static str {
        match self {
            Self::Tcp => "tcp",
            Self::Udp => "udp",
            Self::Sctp => "sctp",
        }
    }
}

/// One published port: `host_ip:host_port/protocol` → the pod's `container_port`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPort {
    /// The host address it is published on; `None` for every address (hostIP unset or
    /// `0.0.0.0`/`::`).
    pub host_ip: Option<IpAddr>,
    pub host_port: u16,
    pub container_port: u16,
    pub protocol: Protocol,
    /// Which container declares it (for messages).
    pub container_index: usize,
}

impl HostPort {
    /// `hostIP:hostPort/protocol` as the kubelet's messages show it.
    pub fn describe(&self) -> String {
        let ip = self
            .host_ip
            .map(|ip| ip.to_string())
            .unwrap_or_else(|| "0.0.0.0".into());
        format!("{ip}:{}/{}", self.host_port, self.protocol.as_str())
    }

    /// Whether this and `other` cannot both be published: same protocol and port, and
    /// host addresses that overlap (a wildcard overlaps every address of its family and,
    /// as in the scheduler's check, every address at all).
    pub fn conflicts_with(&self, other: &HostPort) -> bool {
        self.protocol == other.protocol
            && self.host_port == other.host_port
            && match (self.host_ip, other.host_ip) {
                (None, _) | (_, None) => true,
                (Some(a), Some(b)) => a == b,
            }
    }
}

/// The ports `pod` publishes on the host: every container's (regular and init, as the
/// kubelet counts them) `ports[]` entry with a `hostPort` > 0. A hostNetwork pod's
/// ports are all on the host: an unset hostPort is its containerPort, as the API server
/// defaults it. Malformed entries are left out here; validation reports them.
pub fn host_ports(pod: &Pod) -> Vec<HostPort> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    let host_network = spec.host_network == Some(true);
    let containers = spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter());
    let mut out = Vec::new();
    for (index, c) in containers.enumerate() {
        for p in c.ports.iter().flatten() {
            let host_port = match p.host_port {
                None if host_network => Some(p.container_port),
                other => other,
            };
            let Some(host_port) = host_port.and_then(|h| u16::try_from(h).ok()) else {
                continue;
            };
            if host_port == 0 {
                continue;
            }
            let (Ok(container_port), Some(protocol)) = (
                u16::try_from(p.container_port),
                Protocol::from_spec(p.protocol.as_deref()),
            ) else {
                continue;
            };
            let host_ip = p
                .host_ip
                .as_deref()
                .and_then(|ip| ip.parse::<IpAddr>().ok())
                .filter(|ip| !ip.is_unspecified());
            let port = HostPort {
                host_ip,
                host_port,
                container_port,
                protocol,
                container_index: index,
            };
            if !out.contains(&port) {
                out.push(port);
            }
        }
    }
    out
}

/// The first of `wanted` that conflicts with one of `taken`, with the one it meets.
pub fn first_conflict<'a>(
    wanted: &'a [HostPort],
    taken: &'a [HostPort],
) -> Option<(&'a HostPort, &'a HostPort)> {
    wanted
        .iter()
        .find_map(|w| taken.iter().find(|t| w.conflicts_with(t)).map(|t| (w, t)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(yaml: &str) -> Pod {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn only_ports_with_a_host_port_are_published_tcp_by_default() {
        let p = pod(r#"
metadata: {name: web}
spec:
  initContainers:
  - name: side
    image: busybox
    ports: [{containerPort: 9000, hostPort: 19000, protocol: UDP}]
  containers:
  - name: app
    image: busybox
    ports:
    - {containerPort: 80, hostPort: 8080}
    - {containerPort: 81}
    - {containerPort: 443, hostPort: 8443, hostIP: 127.0.0.1}
    - {containerPort: 53, hostPort: 5353, hostIP: "0.0.0.0"}
"#);
        let ports = host_ports(&p);
        assert_eq!(ports.len(), 4);
        assert_eq!(ports[0].protocol, Protocol::Udp);
        assert_eq!(ports[0].container_index, 0);
        assert_eq!(ports[1].describe(), "0.0.0.0:8080/TCP");
        assert_eq!(ports[1].container_port, 80);
        assert_eq!(ports[2].host_ip, Some("127.0.0.1".parse().unwrap()));
        assert_eq!(ports[3].host_ip, None, "0.0.0.0 is every address");
    }

    #[test]
    fn a_host_network_pods_container_ports_are_host_ports() {
        let p = pod(r#"
metadata: {name: dns}
spec:
  hostNetwork: true
  containers:
  - name: app
    image: busybox
    ports: [{containerPort: 53, protocol: UDP}]
"#);
        assert_eq!(host_ports(&p)[0].describe(), "0.0.0.0:53/UDP");
    }

    #[test]
    fn conflicts_need_the_same_protocol_port_and_overlapping_addresses() {
        let at = |ip: Option<&str>, port: u16, protocol: Protocol| HostPort {
            host_ip: ip.map(|i| i.parse().unwrap()),
            host_port: port,
            container_port: 80,
            protocol,
            container_index: 0,
        };
        let any = at(None, 8080, Protocol::Tcp);
        assert!(any.conflicts_with(&at(Some("10.0.0.1"), 8080, Protocol::Tcp)));
        assert!(any.conflicts_with(&at(None, 8080, Protocol::Tcp)));
        assert!(!any.conflicts_with(&at(None, 8080, Protocol::Udp)));
        assert!(!any.conflicts_with(&at(None, 8081, Protocol::Tcp)));
        let one = at(Some("10.0.0.1"), 8080, Protocol::Tcp);
        assert!(!one.conflicts_with(&at(Some("10.0.0.2"), 8080, Protocol::Tcp)));
        let (wanted, taken) = ([one], [any]);
        let (w, t) = first_conflict(&wanted, &taken).unwrap();
        assert_eq!(
            (w.describe(), t.describe()),
            ("10.0.0.1:8080/TCP".into(), "0.0.0.0:8080/TCP".into())
        );
    }
}
