//! The bridge network's configuration: the bridge's name, the pod CIDRs (`--pod-cidr`)
//! and where its state lives; and the host-side interface name of a pod.

use std::path::PathBuf;

use sha2::{Digest, Sha256};

use super::BridgeError;
use crate::model::net::Cidr;

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
        Ok(())
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
