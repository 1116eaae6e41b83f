//! The bridge network's configuration: the bridge's name, the pod CIDRs (`--pod-cidr`),
//! the cluster's pod ranges (`--cluster-cidr`) and where its state lives; and the
//! host-side interface name of a pod.

use std::path::PathBuf;

use sha2::{Digest, Sha256};

use super::BridgeError;
use podhost_model::net::Cidr;

/// The pod CIDRs when `--pod-cidr` is not given: `10.86.0.0/16` and the IPv6 ULA
/// `fd70:6f64:6800::/64`.
///
/// Why 10.86.0.0/16: it collides with none of the networks a host running podhost is
/// likely to have already — podman's default 10.88.0.0/16 and its pool for new networks
/// (10.89.0.0/24 and up), docker's 172.17.0.0/16 and its pools (172.18–31, 192.168),
/// cri-o's 10.85.0.0/16, flannel/kind's 10.244.0.0/16, k3s' 10.42.0.0/16 (and its
/// services' 10.43.0.0/16), Kubernetes' default service range 10.96.0.0/12, weave's
/// 10.32.0.0/12 and microk8s' 10.1.0.0/16. A /16 leaves room for 65533 pods.
/// The ULA's 40-bit global ID is "podh" in ASCII (70 6f 64 68) and a zero byte:
/// fixed so that pods' addresses are predictable, and inside fc00::/7 so it never
/// meets a global address.
pub const DEFAULT_POD_CIDRS: &str = "10.86.0.0/16,fd70:6f64:6800::/64";

/// The bridge's name when none is configured.
pub const DEFAULT_BRIDGE: &str = "podhost0";

/// Longest interface name Linux accepts (IFNAMSIZ - 1).
const MAX_IFNAME: usize = 15;

/// What the bridge network is made of.
#[derive(Debug, Clone)]
pub struct BridgeConfig {
    /// The bridge's interface name (`podhost0`).
    pub bridge: String,
    /// The pod CIDRs: at most one IPv4 and one IPv6.
    pub cidrs: Vec<Cidr>,
    /// The cluster's pod ranges (`--cluster-cidr`): pods' traffic to them is not
    /// masqueraded, so pods on other nodes see the client pod's own address. Empty: only
    /// [`BridgeConfig::cidrs`] are exempt. Each pod CIDR must lie inside one of its
    /// family's, if there is one of its family.
    pub cluster_cidrs: Vec<Cidr>,
    /// Where IPAM entries and per-pod records live (`<root>/network/bridge`).
    pub state_dir: PathBuf,
}

impl BridgeConfig {
    /// The default bridge and pod CIDRs with state under `state_dir`.
    pub fn with_defaults(state_dir: PathBuf) -> Self {
        Self {
            bridge: DEFAULT_BRIDGE.into(),
            // The constant parses: the config tests check it.
            cidrs: Self::parse_cidrs(DEFAULT_POD_CIDRS).unwrap_or_default(),
            cluster_cidrs: Vec::new(),
            state_dir,
        }
    }

    /// `--pod-cidr`: a comma-separated list of at most one IPv4 and one IPv6 CIDR
    /// (`10.86.0.0/16,fd70:6f64:6800::/64`), IPv4 first in the result.
    pub fn parse_cidrs(flag: &str) -> Result<Vec<Cidr>, BridgeError> {
        let mut cidrs = Vec::new();
        for part in flag.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let cidr: Cidr = part.parse().map_err(|source| BridgeError::PodCidr {
                flag: flag.into(),
                source,
            })?;
            if cidrs.iter().any(|c: &Cidr| c.is_ipv4() == cidr.is_ipv4()) {
                return Err(BridgeError::PodCidrList {
                    flag: flag.into(),
                    problem: "has two CIDRs of one family; give one IPv4 and/or one IPv6",
                });
            }
            cidrs.push(cidr);
        }
        if cidrs.is_empty() {
            return Err(BridgeError::PodCidrList {
                flag: flag.into(),
                problem: "names no CIDR; give e.g. 10.86.0.0/16,fd70:6f64:6800::/64",
            });
        }
        cidrs.sort_by_key(|c| !c.is_ipv4());
        Ok(cidrs)
    }

    /// `--cluster-cidr`: a comma-separated list of IPv4 and/or IPv6 ranges
    /// (`10.244.0.0/16,fd00:10:244::/56`), as kube-proxy's and kube-controller-manager's
    /// `--cluster-cidr`; any prefix (they are ranges, not pod networks). Several of one
    /// family are taken (a cluster whose range grew). Empty text: none.
    pub fn parse_cluster_cidrs(flag: &str) -> Result<Vec<Cidr>, BridgeError> {
        flag.split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|part| {
                Cidr::parse_range(part).map_err(|problem| BridgeError::ClusterCidr {
                    flag: flag.into(),
                    problem,
                })
            })
            .collect()
    }

    /// Every pod CIDR lies inside a cluster CIDR of its family, when there is one of
    /// its family: else the node's pods would be "outside the cluster" for every other
    /// node's rules (and kube-controller-manager never hands out such a podCIDR).
    pub fn check_cluster_cidrs(cidrs: &[Cidr], cluster_cidrs: &[Cidr]) -> Result<(), BridgeError> {
        for pod_cidr in cidrs {
            let family: Vec<&Cidr> = cluster_cidrs
                .iter()
                .filter(|c| c.is_ipv4() == pod_cidr.is_ipv4())
                .collect();
            if !family.is_empty() && !family.iter().any(|c| c.covers(pod_cidr)) {
                return Err(BridgeError::PodCidrOutsideCluster {
                    pod_cidr: pod_cidr.to_string(),
                    cluster: family
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(","),
                });
            }
        }
        Ok(())
    }

    /// Checks what the kernel would refuse later with a less clear message.
    pub(super) fn validate(&self) -> Result<(), BridgeError> {
        let name_ok = !self.bridge.is_empty()
            && self.bridge.len() <= MAX_IFNAME
            && !self.bridge.contains(['/', ' ', '"', ':']);
        if !name_ok {
            return Err(BridgeError::BridgeName {
                name: self.bridge.clone(),
            });
        }
        if self.cidrs.is_empty() {
            return Err(BridgeError::PodCidrList {
                flag: String::new(),
                problem: "names no CIDR; give e.g. 10.86.0.0/16,fd70:6f64:6800::/64",
            });
        }
        Self::check_cluster_cidrs(&self.cidrs, &self.cluster_cidrs)
    }
}

/// The host end of a pod's veth pair: `veth` and 8 hex digits of the SHA-256 of the
/// daemon's identity ([`super::OwnerId`]) and the pod's UID: a pure function of the two,
/// so that a daemon that lost its records still finds it, and distinct for two daemons
/// running the same pod (a URL source gives a pod the same UID on every node). Veths
/// made before the identity existed keep their recorded names. (Docker names its host
/// ends `veth` + 7 hex digits, so the two never collide.)
pub fn host_veth_name(owner_id: &str, uid: &str) -> String {
    let digest = Sha256::digest(format!("{owner_id}/{uid}").as_bytes());
    format!("veth{}", hex::encode(&digest[..4]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_cidrs_parse_ipv4_first_and_avoid_the_common_networks() {
        let cidrs = BridgeConfig::parse_cidrs(DEFAULT_POD_CIDRS).unwrap();
        assert_eq!(cidrs.len(), 2);
        assert!(cidrs[0].is_ipv4());
        for taken in [
            "10.88.0.1",
            "10.89.0.1",
            "172.17.0.1",
            "10.85.0.1",
            "10.244.0.1",
            "10.42.0.1",
            "10.96.0.1",
        ] {
            assert!(!cidrs[0].contains(taken.parse().unwrap()), "{taken}");
        }
        let cfg = BridgeConfig::with_defaults("/x".into());
        assert_eq!(cfg.cidrs, cidrs);
        assert_eq!(cfg.bridge, "podhost0");
    }

    #[test]
    fn the_flag_takes_one_cidr_per_family_in_any_order() {
        let cidrs = BridgeConfig::parse_cidrs(" fd00:9::/64 , 10.9.0.0/24").unwrap();
        assert_eq!(cidrs[0].to_string(), "10.9.0.0/24");
        assert_eq!(cidrs[1].to_string(), "fd00:9::/64");
        assert_eq!(BridgeConfig::parse_cidrs("10.9.0.0/24").unwrap().len(), 1);
        let err = BridgeConfig::parse_cidrs("10.9.0.0/24,10.8.0.0/24").unwrap_err();
        assert!(err.to_string().contains("two CIDRs of one family"), "{err}");
        let err = BridgeConfig::parse_cidrs("").unwrap_err();
        assert!(err.to_string().contains("--pod-cidr"), "{err}");
        let err = BridgeConfig::parse_cidrs("10.9.0.1/24").unwrap_err();
        assert!(err.to_string().contains("10.9.0.0/24"), "{err}");
    }

    #[test]
    fn cluster_cidrs_take_any_number_and_prefix_and_name_the_flag_when_bad() {
        let cidrs = BridgeConfig::parse_cluster_cidrs("10.244.0.0/16, fd00:10:244::/56").unwrap();
        assert_eq!(cidrs.len(), 2);
        assert_eq!(cidrs[1].to_string(), "fd00:10:244::/56");
        assert_eq!(
            BridgeConfig::parse_cluster_cidrs("10.0.0.0/8,100.64.0.0/10,fd00::/8")
                .unwrap()
                .len(),
            3
        );
        assert_eq!(BridgeConfig::parse_cluster_cidrs("").unwrap(), vec![]);
        let err = BridgeConfig::parse_cluster_cidrs("10.244.0.0/16,10.244.1.0/8").unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("--cluster-cidr \"10.244.0.0/16,10.244.1.0/8\""),
            "{text}"
        );
        assert!(
            text.contains("\"10.244.1.0/8\"") && text.contains("10.0.0.0/8"),
            "{text}"
        );
        let err = BridgeConfig::parse_cluster_cidrs("10.244.0.0").unwrap_err();
        assert!(matches!(err, BridgeError::ClusterCidr { .. }), "{err}");
    }

    #[test]
    fn a_pod_cidr_outside_its_familys_cluster_cidrs_is_refused() {
        let mut cfg = BridgeConfig::with_defaults("/x".into());
        cfg.cidrs = BridgeConfig::parse_cidrs("10.87.1.0/24,fd87:0:0:1::/64").unwrap();
        cfg.cluster_cidrs = BridgeConfig::parse_cluster_cidrs("10.87.0.0/16,fd87::/48").unwrap();
        assert!(cfg.validate().is_ok());
        // Only IPv4 given: the IPv6 pod CIDR is not checked against anything.
        cfg.cluster_cidrs = BridgeConfig::parse_cluster_cidrs("10.87.0.0/16").unwrap();
        assert!(cfg.validate().is_ok());
        // One of several of the family suffices.
        cfg.cluster_cidrs = BridgeConfig::parse_cluster_cidrs("10.88.0.0/16,10.87.0.0/16").unwrap();
        assert!(cfg.validate().is_ok());
        cfg.cluster_cidrs = BridgeConfig::parse_cluster_cidrs("10.87.0.0/16,fd88::/48").unwrap();
        let err = cfg.validate().unwrap_err().to_string();
        assert!(
            err.contains("fd87:0:0:1::/64") && err.contains("(fd88::/48)"),
            "{err}"
        );
        cfg.cluster_cidrs = BridgeConfig::parse_cluster_cidrs("10.87.1.0/25").unwrap();
        let err = cfg.validate().unwrap_err().to_string();
        assert!(
            err.contains("10.87.1.0/24") && err.contains("--cluster-cidr"),
            "{err}"
        );
    }

    #[test]
    fn host_veth_names_are_stable_short_and_distinct() {
        let a = host_veth_name("0123456789abcdef", "8d1c3b9e-0000-4000-8000-000000000001");
        assert_eq!(
            a,
            host_veth_name("0123456789abcdef", "8d1c3b9e-0000-4000-8000-000000000001")
        );
        assert_eq!(a.len(), 12);
        assert!(a.starts_with("veth"));
        assert_ne!(
            a,
            host_veth_name("0123456789abcdef", "8d1c3b9e-0000-4000-8000-000000000002")
        );
        // Another daemon running the same pod gets another name.
        assert_ne!(
            a,
            host_veth_name("fedcba9876543210", "8d1c3b9e-0000-4000-8000-000000000001")
        );
    }

    #[test]
    fn bad_bridge_names_are_refused() {
        let mut cfg = BridgeConfig::with_defaults("/x".into());
        assert!(cfg.validate().is_ok());
        cfg.bridge = "a-name-too-long-for-linux".into();
        assert!(cfg.validate().is_err());
        cfg.bridge = String::new();
        assert!(cfg.validate().is_err());
    }
}
