//! The pod's side of its network: `eth0`'s addresses, up, default routes; `lo` up.
//!
//! setns(2) changes the calling thread's namespace, so the netlink socket is opened on a
//! dedicated short-lived std thread that enters the pod's namespace, opens the socket
//! (registered with the caller's tokio runtime) and ends; the socket keeps the pod's
//! namespace and is used from tokio. No tokio thread ever changes namespace (the
//! pattern of `runtime::netns_connect`).

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use nix::sched::{CloneFlags, setns};

use super::BridgeError;
use super::links::{Netlink, POD_INTERFACE};
use podhost_model::net::Cidr;

/// Configures `eth0` in the namespace at `netns`: one address per CIDR (`ips[i]` in
/// `cidrs[i]`), up, and a default route via each CIDR's gateway.
pub(super) async fn configure(
    netns: &Path,
    cidrs: &[Cidr],
    ips: &[IpAddr],
) -> Result<(), BridgeError> {
    let nl = connect_in(netns).await?;
    if let Some(lo) = nl.index_of("lo").await? {
        nl.set_up(lo, "lo").await?;
    }
    let eth0 = nl
        .index_of(POD_INTERFACE)
        .await?
        .ok_or_else(|| BridgeError::Missing {
            what: format!(
                "{POD_INTERFACE} in the pod's network namespace {}",
                netns.display()
            ),
        })?;
    nl.set_up(eth0, POD_INTERFACE).await?;
    for (cidr, ip) in cidrs.iter().zip(ips) {
        nl.add_address(eth0, *ip, cidr.prefix(), POD_INTERFACE)
            .await?;
    }
    for cidr in cidrs {
        nl.add_default_route(eth0, cidr.gateway()).await?;
    }
    Ok(())
}

/// What of the pod's side is gone: `eth0`, one of `ips` on it, or a default route via
/// a CIDR's gateway; `None` when all is there.
pub(super) async fn missing(
    netns: &Path,
    cidrs: &[Cidr],
    ips: &[IpAddr],
) -> Result<Option<String>, BridgeError> {
    let nl = connect_in(netns).await?;
    let Some(eth0) = nl.index_of(POD_INTERFACE).await? else {
        return Ok(Some(format!(
            "{POD_INTERFACE} in the pod's network namespace"
        )));
    };
    let present: Vec<IpAddr> = nl
        .addresses()
        .await?
        .into_iter()
        .filter(|(index, _, _)| *index == eth0)
        .map(|(_, ip, _)| ip)
        .collect();
    if let Some(ip) = ips.iter().find(|ip| !present.contains(ip)) {
        return Ok(Some(format!("address {ip} on {POD_INTERFACE}")));
    }
    for cidr in cidrs {
        if !nl.has_default_route(eth0, cidr.gateway()).await? {
            return Ok(Some(format!(
                "the default route via {} in the pod",
                cidr.gateway()
            )));
        }
    }
    Ok(None)
}

/// An rtnetlink connection inside the namespace at `netns`.
async fn connect_in(netns: &Path) -> Result<Netlink, BridgeError> {
    let runtime = tokio::runtime::Handle::current();
    let path = netns.to_path_buf();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("netns-netlink".into())
        .spawn(move || {
            // The socket registers with the caller's runtime's reactor.
            let _entered = runtime.enter();
            let _ = tx.send(open_on_this_thread(&path));
        })
        .map_err(|e| BridgeError::io("start a thread to enter", netns, e))?;
    let (connection, handle) = rx.await.map_err(|_| BridgeError::Missing {
        what: format!("an answer from the thread entering {}", netns.display()),
    })??;
    tokio::spawn(connection);
    Ok(Netlink::from_handle(handle))
}

type Connection = rtnetlink::proto::Connection<rtnetlink::packet_route::RouteNetlinkMessage>;

/// Enters `netns` (this thread only: it is about to end) and opens the socket.
fn open_on_this_thread(netns: &PathBuf) -> Result<(Connection, rtnetlink::Handle), BridgeError> {
    let ns = std::fs::File::open(netns)
        .map_err(|e| BridgeError::io("open the pod's network namespace", netns, e))?;
    setns(ns, CloneFlags::CLONE_NEWNET).map_err(|source| BridgeError::EnterNetns {
        path: netns.clone(),
        source,
    })?;
    let (connection, handle, unsolicited) =
        rtnetlink::new_connection().map_err(BridgeError::NetlinkSocket)?;
    drop(unsolicited);
    Ok((connection, handle))
}
