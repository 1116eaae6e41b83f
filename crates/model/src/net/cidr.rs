//! An IPv4 or IPv6 network (`10.86.0.0/16`, `fd70:6f64:6800::/64`) and the addresses in
//! it as offsets from the network address, so IPAM arithmetic is the same for both
//! families.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// Why a CIDR was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidrError {
    #[error(
        "{text:?} is not a CIDR: write ADDRESS/PREFIX, e.g. 10.86.0.0/16 or fd70:6f64:6800::/64"
    )]
    Syntax { text: String },
    #[error(
        "{text:?}: a pod network needs a prefix of /{min}../{max} for this family (room for a gateway and pods)"
    )]
    Prefix { text: String, min: u8, max: u8 },
    #[error("{text:?}: an address range needs a prefix of /1../{max} for this family")]
    RangePrefix { text: String, max: u8 },
    #[error("{text:?} has host bits set: the network is {network}")]
    HostBits { text: String, network: String },
}

/// A network: its address (host bits zero) and prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

/// The prefix lengths podhost accepts: at least four addresses (network, gateway, one
/// pod and, for IPv4, broadcast), and not wider than a /8 or a /48.
const V4_PREFIXES: (u8, u8) = (8, 30);
const V6_PREFIXES: (u8, u8) = (48, 126);

impl Cidr {
    /// The network address.
    pub fn network(&self) -> IpAddr {
        self.network
    }

    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    pub fn is_ipv4(&self) -> bool {
        self.network.is_ipv4()
    }

    /// Address bits of the family (32 or 128).
    fn bits(&self) -> u8 {
        if self.is_ipv4() { 32 } else { 128 }
    }

    /// How many addresses the network holds.
    pub fn size(&self) -> u128 {
        1u128 << (self.bits() - self.prefix)
    }

    /// Whether `ip` lies in the network.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.offset_of(ip).is_some()
    }

    /// Whether every address of `other` lies in this network (same family, a prefix
    /// no longer than `other`'s).
    pub fn covers(&self, other: &Cidr) -> bool {
        self.prefix <= other.prefix && self.contains(other.network)
    }

    /// An address range that is not a pod network of this node (the cluster's pod
    /// range, `--cluster-cidr`): any prefix from /1 to the family's width, since only
    /// [`Cidr::covers`]/[`Cidr::contains`] and the text are used of it. (/0 would make
    /// [`Cidr::size`] overflow for IPv6, and means "never masquerade", which no one
    /// should get by a typo.)
    pub fn parse_range(text: &str) -> Result<Self, CidrError> {
        let (addr, prefix) = split(text)?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if !(1..=max).contains(&prefix) {
            return Err(CidrError::RangePrefix {
                text: text.into(),
                max,
            });
        }
        Self::network_of(text, addr, prefix)
    }

    /// The network `addr/prefix`, refused if `addr` has host bits set.
    fn network_of(text: &str, addr: IpAddr, prefix: u8) -> Result<Self, CidrError> {
        let network = match addr {
            IpAddr::V4(a) => IpAddr::V4(Ipv4Addr::from(
                u32::from(a) & u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0),
            )),
            IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(
                u128::from(a) & u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0),
            )),
        };
        if network != addr {
            return Err(CidrError::HostBits {
                text: text.into(),
                network: format!("{network}/{prefix}"),
            });
        }
        Ok(Self { network, prefix })
    }

    /// `ip`'s offset from the network address, if it lies in the network.
    pub fn offset_of(&self, ip: IpAddr) -> Option<u128> {
        let (base, value) = match (self.network, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => (u128::from(u32::from(n)), u128::from(u32::from(a))),
            (IpAddr::V6(n), IpAddr::V6(a)) => (u128::from(n), u128::from(a)),
            _ => return None,
        };
        let offset = value.checked_sub(base)?;
        (offset < self.size()).then_some(offset)
    }

    /// The address `offset` after the network address, if it lies in the network.
    pub fn nth(&self, offset: u128) -> Option<IpAddr> {
        if offset >= self.size() {
            return None;
        }
        Some(match self.network {
            IpAddr::V4(n) => {
                let v = u32::try_from(u128::from(u32::from(n)) + offset).ok()?;
                IpAddr::V4(Ipv4Addr::from(v))
            }
            IpAddr::V6(n) => IpAddr::V6(Ipv6Addr::from(u128::from(n).checked_add(offset)?)),
        })
    }

    /// The gateway (the bridge's address): the first address after the network's.
    pub fn gateway(&self) -> IpAddr {
        self.nth(1).unwrap_or(self.network)
    }

    /// The offsets pods may get, inclusive: after the gateway, and for IPv4 before the
    /// broadcast address (IPv6 has none).
    pub fn pod_offsets(&self) -> (u128, u128) {
        let last = if self.is_ipv4() {
            self.size() - 2
        } else {
            self.size() - 1
        };
        (2, last)
    }

    /// A name for files and directories: `10.86.0.0-16`.
    pub fn file_name(&self) -> String {
        format!("{}-{}", self.network, self.prefix)
    }
}

impl FromStr for Cidr {
    type Err = CidrError;

    fn from_str(text: &str) -> Result<Self, CidrError> {
        let (addr, prefix) = split(text)?;
        let (min, max) = if addr.is_ipv4() {
            V4_PREFIXES
        } else {
            V6_PREFIXES
        };
        if !(min..=max).contains(&prefix) {
            return Err(CidrError::Prefix {
                text: text.into(),
                min,
                max,
            });
        }
        Self::network_of(text, addr, prefix)
    }
}

/// `ADDRESS/PREFIX` split and parsed (the prefix not range-checked yet).
fn split(text: &str) -> Result<(IpAddr, u8), CidrError> {
    let syntax = || CidrError::Syntax { text: text.into() };
    let (addr, prefix) = text.trim().split_once('/').ok_or_else(syntax)?;
    let addr: IpAddr = addr.parse().map_err(|_| syntax())?;
    let prefix: u8 = prefix.parse().map_err(|_| syntax())?;
    Ok((addr, prefix))
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

impl serde::Serialize for Cidr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Cidr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(s: &str) -> Cidr {
        s.parse().unwrap()
    }

    #[test]
    fn parses_both_families_and_prints_them_back() {
        let v4 = cidr("10.86.0.0/16");
        assert_eq!(v4.to_string(), "10.86.0.0/16");
        assert!(v4.is_ipv4());
        assert_eq!(v4.size(), 65536);
        let v6 = cidr("fd70:6f64:6800::/64");
        assert_eq!(v6.to_string(), "fd70:6f64:6800::/64");
        assert_eq!(v6.size(), 1u128 << 64);
        assert_eq!(v6.file_name(), "fd70:6f64:6800::-64");
    }

    #[test]
    fn refuses_bad_text_prefixes_and_host_bits_with_the_fix() {
        assert!(matches!(
            "10.0.0.0".parse::<Cidr>(),
            Err(CidrError::Syntax { .. })
        ));
        assert!(matches!(
            "10.0.0.0/x".parse::<Cidr>(),
            Err(CidrError::Syntax { .. })
        ));
        assert!(matches!(
            "nope/8".parse::<Cidr>(),
            Err(CidrError::Syntax { .. })
        ));
        assert!(matches!(
            "10.0.0.0/31".parse::<Cidr>(),
            Err(CidrError::Prefix { .. })
        ));
        assert!(matches!(
            "fd00::/127".parse::<Cidr>(),
            Err(CidrError::Prefix { .. })
        ));
        assert!(matches!(
            "fd00::/32".parse::<Cidr>(),
            Err(CidrError::Prefix { .. })
        ));
        let err = "10.86.0.1/16".parse::<Cidr>().unwrap_err();
        assert!(err.to_string().contains("10.86.0.0/16"), "{err}");
    }

    #[test]
    fn gateway_and_pod_range_skip_network_and_broadcast() {
        let v4 = cidr("192.168.7.0/24");
        assert_eq!(v4.gateway().to_string(), "192.168.7.1");
        assert_eq!(v4.pod_offsets(), (2, 254));
        assert_eq!(v4.nth(254).unwrap().to_string(), "192.168.7.254");
        assert_eq!(v4.nth(256), None);
        let v6 = cidr("fd00:1::/120");
        assert_eq!(v6.gateway().to_string(), "fd00:1::1");
        assert_eq!(v6.pod_offsets(), (2, 255), "IPv6 has no broadcast");
    }

    #[test]
    fn offsets_round_trip_and_other_families_or_networks_are_outside() {
        let v4 = cidr("10.86.0.0/16");
        let ip: IpAddr = "10.86.1.2".parse().unwrap();
        assert_eq!(v4.offset_of(ip), Some(258));
        assert_eq!(v4.nth(258), Some(ip));
        assert!(!v4.contains("10.87.0.1".parse().unwrap()));
        assert!(!v4.contains("10.85.255.255".parse().unwrap()));
        assert!(!v4.contains("fd00::1".parse().unwrap()));
        let v6 = cidr("fd70:6f64:6800::/64");
        assert!(v6.contains("fd70:6f64:6800::ffff:1".parse().unwrap()));
        assert!(!v6.contains("fd70:6f64:6801::1".parse().unwrap()));
    }

    #[test]
    fn a_range_takes_any_prefix_and_covers_the_networks_inside_it() {
        let wide = Cidr::parse_range("10.0.0.0/7").unwrap();
        assert_eq!(wide.to_string(), "10.0.0.0/7");
        assert!(wide.covers(&cidr("10.87.1.0/24")));
        assert!(wide.covers(&cidr("11.0.0.0/8")));
        assert!(!wide.covers(&cidr("12.0.0.0/8")));
        let v6 = Cidr::parse_range("fd00::/8").unwrap();
        assert!(v6.covers(&cidr("fd70:6f64:6800::/64")));
        assert!(!v6.covers(&cidr("10.86.0.0/16")), "another family");
        let range = Cidr::parse_range("10.87.0.0/16").unwrap();
        assert!(range.covers(&range));
        assert!(!cidr("10.87.1.0/24").covers(&range), "narrower");
        assert_eq!(Cidr::parse_range("10.87.0.0/16"), Ok(cidr("10.87.0.0/16")));
        assert!(matches!(
            Cidr::parse_range("0.0.0.0/0"),
            Err(CidrError::RangePrefix { max: 32, .. })
        ));
        assert!(matches!(
            Cidr::parse_range("fd00::/129"),
            Err(CidrError::RangePrefix { max: 128, .. })
        ));
        assert!(matches!(
            Cidr::parse_range("10.87.1.0/16"),
            Err(CidrError::HostBits { .. })
        ));
        assert!(Cidr::parse_range("10.0.0.1/32").is_ok());
        assert!(Cidr::parse_range("fd00::1/128").is_ok());
    }

    #[test]
    fn serde_uses_the_text_form() {
        let v = serde_json::to_string(&cidr("10.86.0.0/16")).unwrap();
        assert_eq!(v, "\"10.86.0.0/16\"");
        let back: Cidr = serde_json::from_str(&v).unwrap();
        assert_eq!(back, cidr("10.86.0.0/16"));
        assert!(serde_json::from_str::<Cidr>("\"10.86.0.1/16\"").is_err());
    }
}
