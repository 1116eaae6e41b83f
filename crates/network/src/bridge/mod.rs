//! The built-in pod network: bridge `podhost0`, a veth per pod, host-local IPAM,
//! masquerade and hostPort DNAT in podhost's own nftables table (`inet podhost`).
//!
//! A pod's setup, in order (each step idempotent, so a repeated setup — also by a new
//! daemon while the pod lives — gives the pod the same addresses):
//! 1. the per-pod record with the chosen addresses is written (before any side effect);
//! 2. the IPAM entries are made;
//! 3. the veth pair: the host end `veth<hash>` on the bridge, up; the peer made as
//!    `eth0` inside the pod's namespace;
//! 4. inside the pod: addresses (IPv6 without DAD), up, default routes;
//! 5. only for a pod with hostPorts: the ruleset is re-applied with its DNAT rules;
//! 6. the record is marked complete.
//!
//! Teardown undoes 3 (deleting the host end deletes the pair), 5 and 2, then deletes
//! the record; each step accepts "already gone", and the record stays if a step failed.
//! [`BridgeNetwork::reconcile`] tears down every record, IPAM entry and bridge veth of
//! a UID that is not live and re-applies the ruleset, so a daemon killed in the middle
//! of either leaves nothing once the next daemon starts.

mod claim;
mod config;
mod error;
mod health;
mod ipam_store;
mod links;
mod nftables;
mod owner;
mod pod_netns;
mod records;
mod recovery;
mod sysctl;

pub use config::{BridgeConfig, DEFAULT_BRIDGE, DEFAULT_POD_CIDRS, host_veth_name};
pub use error::BridgeError;
pub use owner::OwnerId;
pub use sysctl::bridged_traffic_problem;

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::{PodNetRequest, PodNetStatus};
use ipam_store::IpamStore;
use links::{Netlink, POD_INTERFACE};
use nftables::Nft;
use records::{PodRecord, RecordedPort};

/// Where a setup stops when a test simulates a daemon killed after that step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SetupStep {
    Record,
    Ipam,
    HostVeth,
    PodInterface,
    HostPorts,
}

/// Where a teardown stops when a test simulates a daemon killed after that step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TeardownStep {
    Link,
    HostPorts,
    Ipam,
}

/// The built-in bridge network of the node.
#[derive(Debug)]
pub struct BridgeNetwork {
    cfg: BridgeConfig,
    /// This daemon's identity: the mark on its bridge and veths.
    owner: OwnerId,
    /// Held while the network lives: tells other daemons this one runs.
    _owner_lock: nix::fcntl::Flock<std::fs::File>,
    nft: Nft,
    /// Why nftables could not be set up at start (missing tool, failed transaction):
    /// pods still get addresses and reach each other; hostPorts fail with this error.
    nft_problem: Option<Box<BridgeError>>,
    ipam: Arc<Mutex<IpamStore>>,
    /// Every pod's record by UID, mirrored from disk: what the ruleset is rendered from.
    records: Arc<Mutex<BTreeMap<String, PodRecord>>>,
}

impl BridgeNetwork {
    /// Brings the bridge up with its gateway addresses, sets the forwarding sysctls and
    /// route_localnet on the bridge, loads the IPAM state and records, and applies the
    /// ruleset. Runs in the calling thread's network namespace (the daemon's).
    pub async fn new(cfg: BridgeConfig) -> Result<Self, BridgeError> {
        Self::with_nft_program(cfg, Path::new("nft")).await
    }

    /// [`BridgeNetwork::new`] with another `nft` program (a path, or a name looked up
    /// in PATH and the sbin directories).
    pub async fn with_nft_program(
        mut cfg: BridgeConfig,
        nft_program: &Path,
    ) -> Result<Self, BridgeError> {
        cfg.validate()?;
        if !sysctl::ipv6_available() && cfg.cidrs.iter().any(|c| !c.is_ipv4()) {
            tracing::warn!("IPv6 is disabled in this kernel: pods get IPv4 addresses only");
            cfg.cidrs.retain(|c| c.is_ipv4());
            cfg.validate()?;
        }
        let owner = OwnerId::of_state_dir(&cfg.state_dir)?;
        let owner_lock = owner.lock()?;
        let (state_dir, cidrs) = (cfg.state_dir.clone(), cfg.cidrs.clone());
        let (ipam, loaded) = blocking(move || {
            Ok((
                IpamStore::open(&state_dir, &cidrs)?,
                records::load_all(&state_dir)?,
            ))
        })
        .await?;
        // The veths this daemon's records name: on an unmarked bridge (an older
        // podhost's) they are this daemon's; any other there is not.
        let recorded: HashSet<String> = loaded.iter().map(|r| r.host_veth.clone()).collect();
        let nl = Netlink::connect()?;
        claim::claim_bridge(&nl, &cfg, &owner, &recorded).await?;
        drop(nl);
        enable_sysctls(&cfg)?;
        let records = loaded.into_iter().map(|r| (r.uid.clone(), r)).collect();
        let table = podhost_model::net::nft::table_name(&cfg.bridge);
        let mut net = Self {
            cfg,
            owner,
            _owner_lock: owner_lock,
            nft: Nft::find(nft_program, table),
            nft_problem: None,
            ipam: Arc::new(Mutex::new(ipam)),
            records: Arc::new(Mutex::new(records)),
        };
        if let Err(e) = net.apply_ruleset().await {
            tracing::error!("pod network: {e}");
            net.nft_problem = Some(Box::new(e));
        }
        tracing::info!(
            bridge = %net.cfg.bridge,
            cidrs = ?net.cfg.cidrs.iter().map(ToString::to_string).collect::<Vec<_>>(),
            cluster_cidrs = ?net.cfg.cluster_cidrs.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "pod network ready"
        );
        Ok(net)
    }

    /// Why nftables could not be set up when the network started (`nft` missing — the
    /// message says `apt-get install nftables` — or its transaction failed), for the
    /// daemon to report; pods still get addresses and reach each other.
    pub fn nft_problem(&self) -> Option<&BridgeError> {
        self.nft_problem.as_deref()
    }

    /// The configuration in use (IPv6 CIDRs dropped on a kernel without IPv6).
    pub fn config(&self) -> &BridgeConfig {
        &self.cfg
    }

    /// This daemon's identity (the mark on its bridge and veths).
    pub fn owner(&self) -> &OwnerId {
        &self.owner
    }

    /// The nftables table this daemon owns (`podhost` on the default bridge).
    pub fn nft_table(&self) -> &str {
        self.nft.table()
    }

    /// The host end of pod `uid`'s veth: the recorded name (a pod set up by an older
    /// podhost keeps its own), else this daemon's name for it.
    pub fn host_veth(&self, uid: &str) -> String {
        let recorded = lock(&self.records)
            .ok()
            .and_then(|r| r.get(uid).map(|r| r.host_veth.clone()));
        recorded.unwrap_or_else(|| host_veth_name(self.owner.id(), uid))
    }

    /// Sets the pod's network up; idempotent (the same addresses come back).
    pub async fn setup(&self, req: &PodNetRequest) -> Result<PodNetStatus, BridgeError> {
        let status = self.setup_until(req, None).await?;
        status.ok_or_else(|| BridgeError::Missing {
            what: format!("the network status of pod {}/{}", req.namespace, req.name),
        })
    }

    /// For crash tests: the steps of [`BridgeNetwork::setup`] up to and including
    /// `stop_after`, then nothing more, as if the daemon were killed there.
    #[doc(hidden)]
    pub async fn setup_interrupted(
        &self,
        req: &PodNetRequest,
        stop_after: SetupStep,
    ) -> Result<(), BridgeError> {
        self.setup_until(req, Some(stop_after)).await.map(|_| ())
    }

    async fn setup_until(
        &self,
        req: &PodNetRequest,
        stop: Option<SetupStep>,
    ) -> Result<Option<PodNetStatus>, BridgeError> {
        check_uid(&req.uid)?;
        let stops_at = |step: SetupStep| stop == Some(step);
        // A repeated setup (a new daemon adopting the pod, or a repair) keeps the
        // recorded veth name and re-applies the ruleset, which may be what was lost.
        let previous = lock(&self.records)?.get(&req.uid).cloned();
        let repeated = previous.is_some();
        let mut record = PodRecord {
            uid: req.uid.clone(),
            namespace: req.namespace.clone(),
            name: req.name.clone(),
            host_veth: previous.map_or_else(
                || host_veth_name(self.owner.id(), &req.uid),
                |p| p.host_veth,
            ),
            ips: Vec::new(),
            host_ports: req
                .host_ports
                .iter()
                .map(RecordedPort::from_host_port)
                .collect(),
            complete: false,
        };
        // 1 and 2: choose, record, then take the addresses, under the IPAM lock. The
        // files are small and not fsynced (see `records`): written inline, since a
        // hand-off to a blocking thread costs more than the writes.
        let ips = {
            let mut ipam = lock(&self.ipam)?;
            let planned = ipam.plan(&record.uid)?;
            let ips: Vec<IpAddr> = planned.iter().map(|p| p.ip).collect();
            let draft = PodRecord {
                ips: ips.clone(),
                ..record.clone()
            };
            records::save(&self.cfg.state_dir, &draft)?;
            if !stops_at(SetupStep::Record) {
                ipam.commit(&record.uid, &planned)?;
            }
            ips
        };
        record.ips = ips;
        let had_ports = lock(&self.records)?
            .insert(record.uid.clone(), record.clone())
            .is_some_and(|old| !old.host_ports.is_empty());
        if stops_at(SetupStep::Record) || stops_at(SetupStep::Ipam) {
            return Ok(None);
        }

        // 3: the veth pair, its peer born inside the pod's namespace.
        let netns = std::fs::File::open(&req.netns)
            .map_err(|e| BridgeError::io("open the pod's network namespace", &req.netns, e))?;
        let nl = Netlink::connect()?;
        let bridge = match nl.index_of(&self.cfg.bridge).await? {
            Some(index) => index,
            // Someone deleted the bridge: make it again rather than fail every pod.
            None => claim::remake_bridge(&nl, &self.cfg, &self.owner).await?,
        };
        // An existing host end is adopted when it carries this daemon's mark or none
        // (made by an older podhost); another daemon's is refused.
        let owner = &self.owner;
        let adoptable = |alias: Option<&str>| alias.is_none() || owner.owns(alias);
        nl.create_veth(
            &record.host_veth,
            bridge,
            &netns,
            &owner.veth_alias(&record.uid),
            adoptable,
        )
        .await?;
        drop(nl);
        if stops_at(SetupStep::HostVeth) {
            return Ok(None);
        }

        // 4: inside the pod.
        pod_netns::configure(&req.netns, &self.cfg.cidrs, &record.ips).await?;
        if stops_at(SetupStep::PodInterface) {
            return Ok(None);
        }

        // 5: only a pod that publishes (or published) ports changes the ruleset.
        if !record.host_ports.is_empty() || had_ports || (repeated && self.nft_problem.is_none()) {
            self.apply_ruleset().await?;
        }
        if stops_at(SetupStep::HostPorts) {
            return Ok(None);
        }

        // 6.
        record.complete = true;
        records::save(&self.cfg.state_dir, &record)?;
        lock(&self.records)?.insert(record.uid.clone(), record.clone());
        Ok(Some(PodNetStatus {
            ips: record.ips,
            interface: POD_INTERFACE.into(),
        }))
    }

    /// Releases everything the pod held; fine when nothing or part of it exists.
    pub async fn teardown(&self, uid: &str) -> Result<(), BridgeError> {
        self.teardown_until(uid, None).await
    }

    /// For crash tests: the steps of [`BridgeNetwork::teardown`] up to and including
    /// `stop_after`, as if the daemon were killed there.
    #[doc(hidden)]
    pub async fn teardown_interrupted(
        &self,
        uid: &str,
        stop_after: TeardownStep,
    ) -> Result<(), BridgeError> {
        self.teardown_until(uid, Some(stop_after)).await
    }

    async fn teardown_until(
        &self,
        uid: &str,
        stop: Option<TeardownStep>,
    ) -> Result<(), BridgeError> {
        check_uid(uid)?;
        let mut first_error = None;
        let mut keep = |r: Result<(), BridgeError>| {
            if let Err(e) = r {
                tracing::warn!(uid, "pod network teardown: {e}");
                first_error.get_or_insert(e);
            }
        };
        let known = lock(&self.records)?.get(uid).cloned();
        let recorded = match known {
            Some(r) => Some(r),
            None => records::load(&self.cfg.state_dir, uid)?,
        };
        let veth = recorded.as_ref().map_or_else(
            || host_veth_name(self.owner.id(), uid),
            |r| r.host_veth.clone(),
        );
        keep(self.delete_veth(&veth).await);
        if stop == Some(TeardownStep::Link) {
            return first_error.map_or(Ok(()), Err);
        }

        let removed = lock(&self.records)?.remove(uid);
        let had_ports = removed
            .or(recorded)
            .is_some_and(|r| !r.host_ports.is_empty());
        if had_ports && self.nft.unavailable().is_none() {
            keep(self.apply_ruleset().await);
        }
        if stop == Some(TeardownStep::HostPorts) {
            return first_error.map_or(Ok(()), Err);
        }

        keep(lock(&self.ipam).and_then(|mut ipam| ipam.release(uid).map(|_| ())));
        if stop == Some(TeardownStep::Ipam) {
            return first_error.map_or(Ok(()), Err);
        }
        if let Some(e) = first_error {
            // The record stays, so that reconcile finishes the job.
            return Err(e);
        }
        records::remove(&self.cfg.state_dir, uid)
    }

    /// At daemon start: tears down what belongs to pods not in `live` and re-applies
    /// the ruleset from the live pods' records; returns what could not be released.
    pub async fn reconcile(&self, live: &HashSet<String>) -> Vec<BridgeError> {
        recovery::reconcile(self, live).await
    }

    /// Deletes this daemon's veth `name`: one carrying another daemon's mark is left.
    async fn delete_veth(&self, name: &str) -> Result<(), BridgeError> {
        let nl = Netlink::connect()?;
        match nl.link(name).await? {
            None => Ok(()),
            Some(l) if l.alias.is_some() && !self.owner.owns(l.alias.as_deref()) => {
                tracing::warn!(veth = name, alias = ?l.alias, "pod network: not deleting another daemon's veth");
                Ok(())
            }
            Some(_) => nl.delete_link(name).await.map(|_| ()),
        }
    }

    /// Renders the ruleset from the current records and applies it.
    async fn apply_ruleset(&self) -> Result<(), BridgeError> {
        let records = self.records.clone();
        let (bridge, cidrs, cluster_cidrs) = (
            self.cfg.bridge.clone(),
            self.cfg.cidrs.clone(),
            self.cfg.cluster_cidrs.clone(),
        );
        self.nft
            .apply(move || {
                let pods: Vec<_> = match records.lock() {
                    Ok(r) => r.values().map(PodRecord::pod_ports).collect(),
                    Err(poisoned) => poisoned
                        .get_ref()
                        .values()
                        .map(PodRecord::pod_ports)
                        .collect(),
                };
                podhost_model::net::nft::render_ruleset(&bridge, &cidrs, &cluster_cidrs, &pods)
            })
            .await
    }
}

/// Forwarding (per family in use) and route_localnet on the bridge; logs once at
/// info when podhost changed a global one.
fn enable_sysctls(cfg: &BridgeConfig) -> Result<(), BridgeError> {
    if cfg.cidrs.iter().any(|c| c.is_ipv4()) && sysctl::ensure("net/ipv4/ip_forward", "1")? {
        tracing::info!(
            "podhost enabled net.ipv4.ip_forward=1 (pods' traffic is routed through the host)"
        );
    }
    if cfg.cidrs.iter().any(|c| !c.is_ipv4())
        && sysctl::ensure("net/ipv6/conf/all/forwarding", "1")?
    {
        tracing::info!(
            "podhost enabled net.ipv6.conf.all.forwarding=1 (pods' IPv6 traffic is routed through the host; \
             the host no longer accepts router advertisements on interfaces with accept_ra=1)"
        );
    }
    sysctl::ensure(&format!("net/ipv4/conf/{}/route_localnet", cfg.bridge), "1")?;
    Ok(())
}

/// A UID names files: refuse what could escape the state directory.
fn check_uid(uid: &str) -> Result<(), BridgeError> {
    if uid.is_empty() || uid.contains('/') || uid.starts_with('.') {
        return Err(BridgeError::BadUid { uid: uid.into() });
    }
    Ok(())
}

fn lock<T>(m: &Mutex<T>) -> Result<std::sync::MutexGuard<'_, T>, BridgeError> {
    m.lock()
        .map_err(|_| BridgeError::Blocking("a pod network task panicked holding its state".into()))
}

/// Runs work that reads whole directories (start, reconcile) off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, BridgeError> + Send + 'static,
) -> Result<T, BridgeError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| BridgeError::Blocking(e.to_string()))?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send<T: Send>(_: &T) {}

    /// The worker spawns these futures on a multi-threaded runtime: they must be Send
    /// (no lock guard held across an await). Checked by compiling; never run.
    #[allow(dead_code)]
    fn futures_are_send(net: &BridgeNetwork, req: &PodNetRequest, live: &HashSet<String>) {
        assert_send(&net.setup(req));
        assert_send(&net.teardown("uid"));
        assert_send(&net.reconcile(live));
        assert_send(&BridgeNetwork::new(BridgeConfig::with_defaults(
            "/x".into(),
        )));
    }

    #[test]
    fn uids_that_could_escape_the_state_directory_are_refused() {
        assert!(check_uid("8d1c3b9e-0000-4000-8000-000000000001").is_ok());
        for bad in ["", "../x", "a/b", ".hidden"] {
            assert!(
                matches!(check_uid(bad), Err(BridgeError::BadUid { .. })),
                "{bad:?}"
            );
        }
    }
}
