//! Reconcile: what a daemon killed during a setup or teardown left behind is released
//! once the next daemon knows which pods live — records, IPAM entries and veths on the
//! bridge of every other UID that carry this daemon's mark — and the ruleset is
//! re-applied from the live records.

use std::collections::HashSet;

use super::links::Netlink;
use super::{BridgeError, BridgeNetwork, lock};

pub(super) async fn reconcile(net: &BridgeNetwork, live: &HashSet<String>) -> Vec<BridgeError> {
    let mut errors = Vec::new();

    // Records (and with them their veths, rules and addresses).
    let state_dir = net.cfg.state_dir.clone();
    let recorded = match super::blocking(move || super::records::load_all(&state_dir)).await {
        Ok(all) => all.into_iter().map(|r| r.uid).collect::<Vec<_>>(),
        Err(e) => {
            errors.push(e);
            Vec::new()
        }
    };
    let in_memory: Vec<String> = match lock(&net.records) {
        Ok(r) => r.keys().cloned().collect(),
        Err(e) => {
            errors.push(e);
            Vec::new()
        }
    };
    let mut gone: Vec<String> = recorded
        .into_iter()
        .chain(in_memory)
        .filter(|u| !live.contains(u))
        .collect();
    gone.sort();
    gone.dedup();
    for uid in &gone {
        tracing::info!(uid, "pod network: releasing what a pod that is gone held");
        if let Err(e) = net.teardown(uid).await {
            errors.push(e);
        }
    }

    // IPAM entries without a record (a crash between the two, or an empty entry).
    let ipam = net.ipam.clone();
    let live_uids = live.clone();
    let released = super::blocking(move || {
        let mut ipam = lock(&ipam)?;
        let stale: Vec<String> = ipam
            .holders()
            .into_iter()
            .filter(|u| !live_uids.contains(u))
            .collect();
        for uid in &stale {
            ipam.release(uid)?;
        }
        Ok(stale)
    })
    .await;
    match released {
        Ok(stale) if !stale.is_empty() => tracing::info!(
            ?stale,
            "pod network: released IPAM entries of pods that are gone"
        ),
        Ok(_) => {}
        Err(e) => errors.push(e),
    }

    // veths on the bridge that no live pod owns.
    if let Err(e) = delete_stale_veths(net, live).await {
        errors.push(e);
    }

    // The ruleset as the live records make it.
    if net.nft.unavailable().is_none()
        && let Err(e) = net.apply_ruleset().await
    {
        errors.push(e);
    }
    errors
}

/// Deletes the veths on the bridge that carry this daemon's mark and belong to no live
/// pod. A veth without the mark, or with another daemon's, is never deleted: it is not
/// this daemon's to judge (its own pods that are gone were torn down by their records).
async fn delete_stale_veths(
    net: &BridgeNetwork,
    live: &HashSet<String>,
) -> Result<(), BridgeError> {
    let nl = Netlink::connect()?;
    let Some(bridge) = nl.index_of(&net.cfg.bridge).await? else {
        return Ok(());
    };
    let owned: HashSet<String> = live.iter().map(|u| net.host_veth(u)).collect();
    for link in nl.bridge_veths(bridge).await? {
        if owned.contains(&link.name) {
            continue;
        }
        if net.owner.owns(link.alias.as_deref()) {
            tracing::info!(veth = %link.name, "pod network: deleting a veth of this daemon no live pod owns");
            nl.delete_link(&link.name).await?;
        } else {
            tracing::info!(veth = %link.name, alias = ?link.alias, "pod network: leaving a veth this daemon did not mark");
        }
    }
    Ok(())
}
