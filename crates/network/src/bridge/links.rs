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
use netlink_packet_route::route::{RouteAddress, RouteAttribute};
use rtnetlink::{
    Handle, LinkBridge, LinkBridgePort, LinkMessageBuilder, LinkUnspec, LinkVeth,
    RouteMessageBuilder,
};

use super::BridgeError;
use podhost_model::net::Cidr;

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
        Ok(self.link(name).await?.map(|l| l.index))
    }

    /// The link `name`, if it exists.
    pub(super) async fn link(&self, name: &str) -> Result<Option<LinkInfo>, BridgeError> {
        let mut links = self
            .handle
            .link()
            .get()
            .match_name(name.to_string())
            .execute();
        match links.try_next().await {
            Ok(link) => Ok(link.as_ref().map(LinkInfo::of)),
            Err(e) if errno(&e) == Some(libc::ENODEV) => Ok(None),
            Err(e) => Err(BridgeError::netlink(format!("look up link {name}"), e)),
        }
    }

    /// Every link of the namespace.
    pub(super) async fn links(&self) -> Result<Vec<LinkInfo>, BridgeError> {
        let links: Vec<LinkMessage> = self
            .handle
            .link()
            .get()
            .execute()
            .try_collect()
            .await
            .map_err(|e| BridgeError::netlink("list links".into(), e))?;
        Ok(links.iter().map(LinkInfo::of).collect())
    }

    /// Sets the alias (IFLA_IFALIAS) of link `index`: podhost's ownership mark.
    pub(super) async fn set_alias(
        &self,
        index: u32,
        alias: &str,
        name: &str,
    ) -> Result<(), BridgeError> {
        let mut msg = LinkUnspec::new_with_index(index).build();
        msg.attributes
            .push(LinkAttribute::IfAlias(alias.to_string()));
        self.handle
            .link()
            .set(msg)
            .execute()
            .await
            .map_err(|e| BridgeError::netlink(format!("mark {name} as podhost's"), e))
    }

    /// Every address of the namespace: (link index, address, prefix length).
    pub(super) async fn addresses(&self) -> Result<Vec<(u32, IpAddr, u8)>, BridgeError> {
        let all: Vec<_> = self
            .handle
            .address()
            .get()
            .execute()
            .try_collect()
            .await
            .map_err(|e| BridgeError::netlink("list addresses".into(), e))?;
        Ok(all
            .iter()
            .filter_map(|m| {
                let ip = m.attributes.iter().find_map(|a| match a {
                    AddressAttribute::Address(ip) => Some(*ip),
                    _ => None,
                })?;
                Some((m.header.index, ip, m.header.prefix_len))
            })
            .collect())
    }

    /// Whether link `index` has a default route of `gateway`'s family via `gateway`.
    pub(super) async fn has_default_route(
        &self,
        index: u32,
        gateway: IpAddr,
    ) -> Result<bool, BridgeError> {
        let filter = match gateway {
            IpAddr::V4(_) => RouteMessageBuilder::<Ipv4Addr>::new().build(),
            IpAddr::V6(_) => RouteMessageBuilder::<Ipv6Addr>::new().build(),
        };
        let routes: Vec<_> = self
            .handle
            .route()
            .get(filter)
            .execute()
            .try_collect()
            .await
            .map_err(|e| BridgeError::netlink("list routes".into(), e))?;
        Ok(routes.iter().any(|r| {
            r.header.destination_prefix_length == 0
                && r.attributes.contains(&RouteAttribute::Oif(index))
                && r.attributes.iter().any(|a| match a {
                    RouteAttribute::Gateway(RouteAddress::Inet(g)) => IpAddr::V4(*g) == gateway,
                    RouteAttribute::Gateway(RouteAddress::Inet6(g)) => IpAddr::V6(*g) == gateway,
                    _ => false,
                })
        }))
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
    /// The host end is marked with `alias`; an existing one that carries another
    /// daemon's mark is refused (`may_adopt` says which marks are this daemon's).
    pub(super) async fn create_veth(
        &self,
        host_name: &str,
        bridge_index: u32,
        pod_netns: &std::fs::File,
        alias: &str,
        may_adopt: impl Fn(Option<&str>) -> bool,
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
        let link = self
            .link(host_name)
            .await?
            .ok_or_else(|| BridgeError::Missing {
                what: format!("veth {host_name} right after creating it"),
            })?;
        let index = link.index;
        if !created && !may_adopt(link.alias.as_deref()) {
            return Err(BridgeError::VethOwned {
                veth: host_name.into(),
                alias: link.alias.unwrap_or_default(),
            });
        }
        if link.alias.as_deref() != Some(alias) {
            self.set_alias(index, alias, host_name).await?;
        }
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

    /// The veth links attached to the bridge `bridge_index`.
    pub(super) async fn bridge_veths(
        &self,
        bridge_index: u32,
    ) -> Result<Vec<LinkInfo>, BridgeError> {
        Ok(self
            .links()
            .await?
            .into_iter()
            .filter(|l| l.controller == Some(bridge_index) && l.name.starts_with("veth"))
            .collect())
    }
}

/// What podhost reads of a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LinkInfo {
    pub index: u32,
    pub name: String,
    /// IFLA_IFALIAS: podhost's ownership mark on its bridge and veths.
    pub alias: Option<String>,
    /// The bridge it is attached to.
    pub controller: Option<u32>,
}

impl LinkInfo {
    fn of(msg: &LinkMessage) -> Self {
        let mut info = Self {
            index: msg.header.index,
            name: String::new(),
            alias: None,
            controller: None,
        };
        for a in &msg.attributes {
            match a {
                LinkAttribute::IfName(n) => info.name = n.clone(),
                LinkAttribute::IfAlias(n) if !n.is_empty() => info.alias = Some(n.clone()),
                LinkAttribute::Controller(c) => info.controller = Some(*c),
                _ => {}
            }
        }
        info
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
