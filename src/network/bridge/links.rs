//! Links, addresses and routes through rtnetlink (never the `ip` tool).
//!
//! A netlink socket works in the network namespace of the thread that opened it, so
//! [`Netlink::connect`] on a daemon thread talks to the daemon's namespace; the pod's
//! side is reached through a socket opened in the pod's namespace (`pod_netns`).
//! One short-lived connection per operation: cheap (one socket), and nothing outlives
//! the runtime that made it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::AsRawFd;

use futures::TryStreamExt;
use netlink_packet_route::address::{AddressAttribute, AddressFlags, AddressHeaderFlags};
use netlink_packet_route::link::{InfoData, InfoKind, InfoVeth, LinkAttribute, LinkMessage};
use rtnetlink::{
    Handle, LinkBridge, LinkBridgePort, LinkMessageBuilder, LinkUnspec, LinkVeth,
    RouteMessageBuilder,
};

use super::BridgeError;
use crate::model::net::Cidr;

/// The pod's interface name.
pub(super) const POD_INTERFACE: &str = "eth0";

/// An rtnetlink handle whose connection task ends when the handle is dropped.
pub(super) struct Netlink {
    handle: Handle,
}

impl Netlink {
    /// A connection in the calling thread's network namespace.
    pub(super) fn connect() -> Result<Self, BridgeError> {
        let (connection, handle, unsolicited) =
            rtnetlink::new_connection().map_err(BridgeError::NetlinkSocket)?;
        // Dropping the unsolicited-message receiver lets the connection end once the
        // handle is gone.
        drop(unsolicited);
        tokio::spawn(connection);
        Ok(Self { handle })
    }

    /// Wraps a connection opened elsewhere (in a pod's namespace).
    pub(super) fn from_handle(handle: Handle) -> Self {
        Self { handle }
    }

    /// The index of the link `name`, if it exists.
    pub(super) async fn index_of(&self, name: &str) -> Result<Option<u32>, BridgeError> {
        let mut links = self
            .handle
            .link()
            .get()
            .match_name(name.to_string())
            .execute();
        match links.try_next().await {
            Ok(link) => Ok(link.map(|l| l.header.index)),
            Err(e) if errno(&e) == Some(libc::ENODEV) => Ok(None),
            Err(e) => Err(BridgeError::netlink(format!("look up link {name}"), e)),
        }
    }

    /// The bridge `name` (made if missing) up with a fixed MAC address (a bridge
    /// otherwise takes its lowest port's, which changes as pods come and go and leaves
    /// stale neighbour entries in the pods), and the gateway address of every CIDR.
    pub(super) async fn ensure_bridge(
        &self,
        name: &str,
        cidrs: &[Cidr],
    ) -> Result<u32, BridgeError> {
        let index = match self.index_of(name).await? {
            Some(index) => index,
            None => {
                let msg = LinkBridge::new(name)
                    .address(bridge_mac(name).to_vec())
                    .up()
                    .build();
                match self.handle.link().add(msg).execute().await {
                    Ok(()) => {}
                    Err(e) if errno(&e) == Some(libc::EEXIST) => {}
                    Err(e) => return Err(BridgeError::netlink(format!("create bridge {name}"), e)),
                }
                self.index_of(name)
                    .await?
                    .ok_or_else(|| BridgeError::Missing {
                        what: format!("bridge {name} right after creating it"),
                    })?
            }
        };
        self.set_up(index, name).await?;
        for cidr in cidrs {
            self.add_address(index, cidr.gateway(), cidr.prefix(), name)
                .await?;
        }
        Ok(index)
    }

    /// Brings link `index` up.
    pub(super) async fn set_up(&self, index: u32, name: &str) -> Result<(), BridgeError> {
        let msg = LinkUnspec::new_with_index(index).up().build();
        self.handle
            .link()
            .set(msg)
            .execute()
            .await
            .map_err(|e| BridgeError::netlink(format!("bring {name} up"), e))
    }

    /// Adds `ip/prefix` to link `index` (present already is fine). IPv6 addresses skip
    /// duplicate address detection, so they are usable at once: the pod CIDR is
    /// podhost's own, there is nobody to collide with.
    pub(super) async fn add_address(
        &self,
        index: u32,
        ip: IpAddr,
        prefix: u8,
        link: &str,
    ) -> Result<(), BridgeError> {
        let mut req = self.handle.address().add(index, ip, prefix);
        if ip.is_ipv6() {
            let msg = req.message_mut();
            msg.header.flags |= AddressHeaderFlags::Nodad;
            msg.attributes
                .push(AddressAttribute::Flags(AddressFlags::Nodad));
        }
        match req.execute().await {
            Ok(()) => Ok(()),
            Err(e) if errno(&e) == Some(libc::EEXIST) => Ok(()),
            Err(e) => Err(BridgeError::netlink(
                format!("add address {ip}/{prefix} to {link}"),
                e,
            )),
        }
    }

    /// The default route of `gateway`'s family via `gateway` on link `index` (present
    /// already is fine).
    pub(super) async fn add_default_route(
        &self,
        index: u32,
        gateway: IpAddr,
    ) -> Result<(), BridgeError> {
        let msg = match gateway {
            IpAddr::V4(gw) => RouteMessageBuilder::<Ipv4Addr>::new()
                .output_interface(index)
                .gateway(gw)
                .build(),
            IpAddr::V6(gw) => RouteMessageBuilder::<Ipv6Addr>::new()
                .output_interface(index)
                .gateway(gw)
                .build(),
        };
        match self.handle.route().add(msg).execute().await {
            Ok(()) => Ok(()),
            Err(e) if errno(&e) == Some(libc::EEXIST) => Ok(()),
            Err(e) => Err(BridgeError::netlink(
                format!("add the default route via {gateway}"),
                e,
            )),
        }
    }

    /// A veth pair: `host_name` here, attached to the bridge `bridge_index` and up; its
    /// peer made directly inside the namespace `pod_netns` as `eth0` (one request; no
    /// temporary name in the host's namespace). An existing `host_name` (a setup
    /// repeated after a restart) is attached and brought up again.
    pub(super) async fn create_veth(
        &self,
        host_name: &str,
        bridge_index: u32,
        pod_netns: &std::fs::File,
    ) -> Result<(), BridgeError> {
        let peer = LinkUnspec::new_with_name(POD_INTERFACE)
            .setns_by_fd(pod_netns.as_raw_fd())
            .build();
        let msg = LinkMessageBuilder::<LinkVeth>::new_with_info_kind(InfoKind::Veth)
            .name(host_name.to_string())
            .set_info_data(InfoData::Veth(InfoVeth::Peer(peer)))
            .controller(bridge_index)
            .up()
            .build();
        let created = match self.handle.link().add(msg).execute().await {
            Ok(()) => true,
            Err(e) if errno(&e) == Some(libc::EEXIST) => false,
            Err(e) => return Err(BridgeError::netlink(format!("create veth {host_name}"), e)),
        };
        let index = self
            .index_of(host_name)
            .await?
            .ok_or_else(|| BridgeError::Missing {
                what: format!("veth {host_name} right after creating it"),
            })?;
        if !created {
            let msg = LinkUnspec::new_with_index(index)
                .controller(bridge_index)
                .up()
                .build();
            self.handle.link().set(msg).execute().await.map_err(|e| {
                BridgeError::netlink(format!("attach {host_name} to the bridge"), e)
            })?;
        }
        // Hairpin mode: with br_netfilter loaded (Docker loads it), a pod's packet to
        // its own hostPort is DNATed while still being bridged and must leave through
        // the port it came in by, which a bridge port refuses otherwise.
        let msg = LinkBridgePort::new(index).hairpin(true).build();
        self.handle
            .link()
            .set_port(msg)
            .execute()
            .await
            .map_err(|e| BridgeError::netlink(format!("set hairpin mode on {host_name}"), e))
    }

    /// Deletes link `name` (with a veth, its peer too); `false` when it was not there.
    pub(super) async fn delete_link(&self, name: &str) -> Result<bool, BridgeError> {
        let msg = LinkUnspec::new_with_name(name).build();
        match self.handle.link().del_with_message(msg).execute().await {
            Ok(()) => Ok(true),
            Err(e) if errno(&e) == Some(libc::ENODEV) => Ok(false),
            Err(e) => Err(BridgeError::netlink(format!("delete link {name}"), e)),
        }
    }

    /// The names of the veth links attached to the bridge `bridge_index`.
    pub(super) async fn bridge_veths(&self, bridge_index: u32) -> Result<Vec<String>, BridgeError> {
        let links: Vec<LinkMessage> = self
            .handle
            .link()
            .get()
            .execute()
            .try_collect()
            .await
            .map_err(|e| BridgeError::netlink("list links".into(), e))?;
        Ok(links
            .iter()
            .filter(|l| {
                l.attributes
                    .contains(&LinkAttribute::Controller(bridge_index))
            })
            .filter_map(|l| {
                l.attributes.iter().find_map(|a| match a {
                    LinkAttribute::IfName(n) if n.starts_with("veth") => Some(n.clone()),
                    _ => None,
                })
            })
            .collect())
    }
}

/// A locally administered unicast MAC derived from the bridge's name (stable across
/// restarts, different for differently named bridges).
fn bridge_mac(name: &str) -> [u8; 6] {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(name.as_bytes());
    [0x02, d[0], d[1], d[2], d[3], d[4]]
}

/// The errno of a netlink error reply (positive), if it is one.
pub(super) fn errno(e: &rtnetlink::Error) -> Option<i32> {
    match e {
        rtnetlink::Error::NetlinkError(msg) => msg.code.map(|c| -c.get()),
        _ => None,
    }
}
