//! Claiming the bridge at network start: a daemon refuses a bridge another live daemon
//! owns, and pod CIDRs that overlap an address of another link; otherwise it makes the
//! bridge (or adopts it: unmarked from an older podhost, or left by a daemon that is
//! gone) and marks it as its own.
//!
//! Why refuse rather than share: two daemons on one bridge would each need to know the
//! other's pods to reconcile, render one table and allocate from one range; refusing
//! keeps every daemon the only writer of what it owns, and the message says how to run
//! the second one beside the first (`--bridge-name`, `--pod-cidr`).

use std::collections::HashSet;
use std::net::IpAddr;

use super::links::{LinkInfo, Netlink};
use super::owner::{self, OwnerId};
use super::{BridgeConfig, BridgeError};
use podhost_model::net::Cidr;

/// Checks that the bridge and the CIDRs are free for `me`, makes or adopts the bridge,
/// marks it, and returns its index.
/// `recorded`: the host veths this daemon's records name.
pub(super) async fn claim_bridge(
    nl: &Netlink,
    cfg: &BridgeConfig,
    me: &OwnerId,
    recorded: &HashSet<String>,
) -> Result<u32, BridgeError> {
    let _serialized = owner::claim_lock();
    let links = nl.links().await?;
    if let Some(bridge) = links.iter().find(|l| l.name == cfg.bridge) {
        refuse_if_owned(bridge, me)?;
        if owner::parse(bridge.alias.as_deref()).is_none() {
            refuse_if_others_attached(bridge, &links, me, recorded)?;
        }
    }
    refuse_overlaps(nl, cfg, me, &links).await?;
    let index = nl.ensure_bridge(&cfg.bridge, &cfg.cidrs).await?;
    let current = nl.link(&cfg.bridge).await?;
    let alias = current.as_ref().and_then(|l| l.alias.clone());
    if let Some(other) = owner::foreign_owner(me, alias.as_deref()) {
        tracing::warn!(
            bridge = %cfg.bridge,
            other_root = %other.root_dir(),
            "pod network: taking over a bridge whose daemon is gone"
        );
    }
    if !me.owns(alias.as_deref()) {
        nl.set_alias(index, &me.bridge_alias(), &cfg.bridge).await?;
    }
    Ok(index)
}

/// The bridge again, after someone deleted it while the daemon ran.
pub(super) async fn remake_bridge(
    nl: &Netlink,
    cfg: &BridgeConfig,
    me: &OwnerId,
) -> Result<u32, BridgeError> {
    let index = nl.ensure_bridge(&cfg.bridge, &cfg.cidrs).await?;
    nl.set_alias(index, &me.bridge_alias(), &cfg.bridge).await?;
    Ok(index)
}

fn refuse_if_owned(bridge: &LinkInfo, me: &OwnerId) -> Result<(), BridgeError> {
    match owner::foreign_owner(me, bridge.alias.as_deref()) {
        Some(other) if other.is_live() => Err(BridgeError::BridgeOwned {
            bridge: bridge.name.clone(),
            other_root: other.root_dir(),
        }),
        _ => Ok(()),
    }
}

/// An unmarked bridge (made by a podhost without marks, or by someone else) is adopted
/// only when every veth on it is this daemon's (by its records or its mark): one that
/// is not may be a pod of a running older daemon, whose network adopting would break.
fn refuse_if_others_attached(
    bridge: &LinkInfo,
    links: &[LinkInfo],
    me: &OwnerId,
    recorded: &HashSet<String>,
) -> Result<(), BridgeError> {
    let others: Vec<String> = links
        .iter()
        .filter(|l| l.controller == Some(bridge.index))
        .filter(|l| !recorded.contains(&l.name) && !me.owns(l.alias.as_deref()))
        .map(|l| l.name.clone())
        .collect();
    if others.is_empty() {
        return Ok(());
    }
    Err(BridgeError::BridgeInUse {
        bridge: bridge.name.clone(),
        links: others.join(", "),
    })
}

/// Another link with an address inside one of the pod CIDRs (or in a network that
/// holds one) would share its routes: refused, naming the link and, when it is another
/// daemon's bridge, that daemon's root.
async fn refuse_overlaps(
    nl: &Netlink,
    cfg: &BridgeConfig,
    me: &OwnerId,
    links: &[LinkInfo],
) -> Result<(), BridgeError> {
    let ours = links.iter().find(|l| l.name == cfg.bridge).map(|l| l.index);
    for (index, ip, prefix) in nl.addresses().await? {
        if Some(index) == ours {
            continue;
        }
        let Some(cidr) = cfg.cidrs.iter().find(|c| overlaps(c, ip, prefix)) else {
            continue;
        };
        let link = links.iter().find(|l| l.index == index);
        return Err(BridgeError::CidrInUse {
            cidr: cidr.to_string(),
            address: format!("{ip}/{prefix}"),
            link: link.map_or_else(|| format!("link {index}"), |l| l.name.clone()),
            owner: link
                .and_then(|l| owner::foreign_owner(me, l.alias.as_deref()))
                .map(|o| o.root_dir()),
        });
    }
    Ok(())
}

/// Whether `ip/prefix` and `cidr` share addresses (one holds the other's network).
fn overlaps(cidr: &Cidr, ip: IpAddr, prefix: u8) -> bool {
    if cidr.is_ipv4() != ip.is_ipv4() {
        return false;
    }
    if cidr.contains(ip) {
        return true;
    }
    let bits = if ip.is_ipv4() { 32 } else { 128 };
    let prefix = prefix.min(bits);
    let masked = |addr: IpAddr| -> u128 {
        let raw = match addr {
            IpAddr::V4(a) => u128::from(u32::from(a)),
            IpAddr::V6(a) => u128::from(a),
        };
        let host_bits = u32::from(bits - prefix);
        raw.checked_shr(host_bits).unwrap_or(0)
    };
    masked(ip) == masked(cidr.network())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_is_either_network_holding_the_other() {
        let cidr: Cidr = "10.86.0.0/16".parse().unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(overlaps(&cidr, ip("10.86.0.1"), 16));
        assert!(overlaps(&cidr, ip("10.86.200.7"), 24));
        assert!(overlaps(&cidr, ip("10.0.0.1"), 8), "a /8 holding the CIDR");
        assert!(!overlaps(&cidr, ip("10.87.0.1"), 16));
        assert!(!overlaps(&cidr, ip("192.168.1.2"), 24));
        assert!(!overlaps(&cidr, ip("fd70:6f64:6800::1"), 64));
        let v6: Cidr = "fd70:6f64:6800::/64".parse().unwrap();
        assert!(overlaps(&v6, ip("fd70:6f64:6800::1"), 64));
        assert!(overlaps(&v6, ip("fd70::1"), 16));
        assert!(!overlaps(&v6, ip("fd70:6f64:6801::1"), 64));
        assert!(!overlaps(&v6, ip("fe80::1"), 64));
    }
}
