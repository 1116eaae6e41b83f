//! The bridge network's error: each names the pod, file, link or flag and what to do.

use std::path::{Path, PathBuf};

use podhost_disk::DiskError;
use podhost_model::net::CidrError;

/// Why the bridge network failed.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error("--pod-cidr {flag:?}: {source}")]
    PodCidr { flag: String, source: CidrError },
    #[error("--pod-cidr {flag:?} {problem}")]
    PodCidrList { flag: String, problem: &'static str },
    /// Not a `source`: the message already holds it, and the daemon prints the chain.
    #[error("--cluster-cidr {flag:?}: {problem}")]
    ClusterCidr { flag: String, problem: CidrError },
    #[error(
        "the pod CIDR {pod_cidr} is not inside the cluster CIDRs of its family ({cluster}): \
         give a --cluster-cidr that contains every node's pod CIDR (kube-controller-manager's \
         --cluster-cidr), or a --pod-cidr inside it"
    )]
    PodCidrOutsideCluster { pod_cidr: String, cluster: String },
    #[error(
        "bridge name {name:?} is not a usable interface name (1 to 15 characters, no '/', ':', space or quote)"
    )]
    BridgeName { name: String },
    #[error("pod UID {uid:?} cannot name a file (empty, or has '/' or a leading '.')")]
    BadUid { uid: String },
    #[error("could not {what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("pod network record: {0}")]
    State(#[source] DiskError),
    #[error("could not set sysctl {key}={value} (is /proc/sys writable for the daemon?): {source}")]
    Sysctl {
        key: String,
        value: String,
        source: std::io::Error,
    },
    #[error("could not open a netlink socket (podhost needs CAP_NET_ADMIN): {0}")]
    NetlinkSocket(#[source] std::io::Error),
    #[error("could not {what}: {source}")]
    Netlink {
        what: String,
        source: rtnetlink::Error,
    },
    #[error("could not enter the pod's network namespace {}: {source}", path.display())]
    EnterNetns { path: PathBuf, source: nix::Error },
    #[error("missing: {what}")]
    Missing { what: String },
    #[error(
        "pod CIDR {cidr} has no free address ({held} held): give a wider --pod-cidr or remove pods"
    )]
    IpamExhausted { cidr: String, held: usize },
    #[error(
        "IPAM entry {} is held by {holder:?}, not by this pod: another program writes podhost's state directory",
        path.display()
    )]
    IpamConflict { path: PathBuf, holder: String },
    #[error(
        "nftables' `nft` tool ({program}) is not installed, so hostPorts cannot be published and pods' traffic is not masqueraded: apt-get install nftables"
    )]
    NftMissing { program: String },
    #[error("{} failed to apply podhost's ruleset (table inet {table}): {message}", program.display())]
    Nft {
        program: PathBuf,
        table: String,
        message: String,
    },
    #[error(
        "the pod network state {} is in use by another process (another podhost daemon with the same --root-dir?)",
        state_dir.display()
    )]
    StateInUse { state_dir: PathBuf },
    #[error(
        "bridge {bridge} belongs to the podhost daemon with root dir {other_root}, which is running: \
         a daemon never shares another's bridge; give this one its own bridge and pod CIDR, \
         e.g. --bridge-name podhost1 --pod-cidr 10.87.0.0/16,fd70:6f64:6801::/64"
    )]
    BridgeOwned { bridge: String, other_root: String },
    #[error(
        "bridge {bridge} carries no podhost owner mark and has links this daemon did not make \
         ({links}): another program's, or pods of a running older podhost; give this daemon \
         its own bridge and pod CIDR (--bridge-name, --pod-cidr), or delete the bridge if \
         nothing uses it"
    )]
    BridgeInUse { bridge: String, links: String },
    #[error(
        "pod CIDR {cidr} overlaps address {address} on {link}{}: two networks cannot route the \
         same addresses; give this daemon a distinct --pod-cidr (and --bridge-name)",
        owner.as_ref().map(|r| format!(" (the bridge of the podhost daemon with root dir {r})")).unwrap_or_default()
    )]
    CidrInUse {
        cidr: String,
        address: String,
        link: String,
        owner: Option<String>,
    },
    #[error("veth {veth} exists and belongs to someone else (alias {alias:?}): not touched")]
    VethOwned { veth: String, alias: String },
    #[error("a pod network task ended without finishing: {0}")]
    Blocking(String),
}

impl BridgeError {
    pub(super) fn io(what: &'static str, path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            what,
            path: path.to_path_buf(),
            source,
        }
    }

    pub(super) fn netlink(what: String, source: rtnetlink::Error) -> Self {
        Self::Netlink { what, source }
    }
}
