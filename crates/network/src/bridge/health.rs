//! Whether a pod's network is still whole: something outside podhost (an operator, a
//! script, another program) may delete a pod's veth, its `eth0`, an address or
//! podhost's nftables table while the pod runs. [`BridgeNetwork::check`] names the
//! first thing gone; a repeated [`BridgeNetwork::setup`] makes it again with the same
//! addresses.

use std::net::IpAddr;

use super::links::Netlink;
use super::{BridgeError, BridgeNetwork, lock, pod_netns};
use crate::{NetworkHealth, PodNetRequest};

impl BridgeNetwork {
    /// Checks the pod's host veth (present, on the bridge), its `eth0`, `ips` on it and
    /// its default routes, and this daemon's nftables table (with the pod's hostPort
    /// rules when it has hostPorts); what is gone first is named.
    pub async fn check(
        &self,
        req: &PodNetRequest,
        ips: &[IpAddr],
    ) -> Result<NetworkHealth, BridgeError> {
        super::check_uid(&req.uid)?;
        let record = lock(&self.records)?.get(&req.uid).cloned();
        let Some(record) = record else {
            return Ok(NetworkHealth::Missing(format!(
                "the pod network record of pod {}/{}",
                req.namespace, req.name
            )));
        };
        let nl = Netlink::connect()?;
        let Some(bridge) = nl.index_of(&self.cfg.bridge).await? else {
            return Ok(NetworkHealth::Missing(format!(
                "bridge {}",
                self.cfg.bridge
            )));
        };
        match nl.link(&record.host_veth).await? {
            None => {
                return Ok(NetworkHealth::Missing(format!("veth {}", record.host_veth)));
            }
            Some(l) if l.controller != Some(bridge) => {
                return Ok(NetworkHealth::Missing(format!(
                    "veth {} on bridge {}",
                    record.host_veth, self.cfg.bridge
                )));
            }
            Some(_) => {}
        }
        drop(nl);
        if let Some(gone) = pod_netns::missing(&req.netns, &self.cfg.cidrs, ips).await? {
            return Ok(NetworkHealth::Missing(gone));
        }
        if self.nft_problem.is_none() {
            let table = self.nft.table();
            let Some(text) = self.nft.list_table().await? else {
                return Ok(NetworkHealth::Missing(format!(
                    "nftables table inet {table}"
                )));
            };
            let comment = podhost_model::net::nft::comment_text(&record.uid);
            if !record.host_ports.is_empty() && !text.contains(&comment) {
                return Ok(NetworkHealth::Missing(format!(
                    "the hostPort rules of the pod in nftables table inet {table}"
                )));
            }
        }
        Ok(NetworkHealth::Attached)
    }
}
