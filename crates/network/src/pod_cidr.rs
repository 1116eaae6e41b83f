//! Which pod CIDRs the built-in bridge hands addresses from, and why.
//!
//! As a kubelet user expects: `--pod-cidr` (or the config file's `podCIDR`) wins; in
//! cluster mode without it, the Node's `spec.podCIDRs` as kube-controller-manager
//! (`--allocate-node-cidrs`) allocated them; standalone without it, podhost's default
//! ([`super::bridge::DEFAULT_POD_CIDRS`]).
//!
//! A Node whose podCIDR has not arrived yet: like the kubelet's kubenet, the pod
//! network is not ready until it does — pods that need a network wait (their sandbox
//! is retried), hostNetwork pods run. Starting on the default and switching later would
//! leave the first pods with addresses outside the node's range, colliding with another
//! node's pods. The API server refuses to change a podCIDR once set, so the first one
//! seen is final.

use std::fmt;

use tokio::sync::watch;

use super::bridge::DEFAULT_POD_CIDRS;

/// Where the pod CIDRs in use come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodCidrOrigin {
    /// `--pod-cidr` or the config file's `podCIDR`.
    Flag,
    /// The Node's `spec.podCIDRs` (cluster mode).
    Node,
    /// podhost's default (standalone, nothing given).
    Default,
}

impl fmt::Display for PodCidrOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Flag => "--pod-cidr",
            Self::Node => "the Node's spec.podCIDR",
            Self::Default => "podhost's default",
        })
    }
}

/// The pod CIDRs chosen (`v4[,v6]`, as `--pod-cidr` takes them) and their origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodCidrChoice {
    pub cidrs: String,
    pub origin: PodCidrOrigin,
}

/// The Node's `spec.podCIDRs` as the cluster side last read them: `None` until the
/// Node was read, an empty list while it has none.
pub type NodePodCidrs = watch::Receiver<Option<Vec<String>>>;

/// Chooses the pod CIDRs: `flag` is `--pod-cidr` when given; `node` is `None`
/// standalone, else the Node's podCIDRs as read so far. `None` means: wait for the
/// Node's podCIDR.
pub fn choose(flag: Option<&str>, node: Option<Option<&[String]>>) -> Option<PodCidrChoice> {
    if let Some(flag) = flag.filter(|f| !f.trim().is_empty()) {
        return Some(PodCidrChoice {
            cidrs: flag.to_string(),
            origin: PodCidrOrigin::Flag,
        });
    }
    match node {
        None => Some(PodCidrChoice {
            cidrs: DEFAULT_POD_CIDRS.to_string(),
            origin: PodCidrOrigin::Default,
        }),
        Some(Some(cidrs)) if !cidrs.is_empty() => Some(PodCidrChoice {
            cidrs: cidrs.join(","),
            origin: PodCidrOrigin::Node,
        }),
        Some(_) => None,
    }
}

/// `--pod-cidr` given in cluster mode and the Node allocated other CIDRs: the flag
/// wins, and this says so (pods of this node then use addresses the cluster may hand
/// to another node).
pub fn flag_mismatch(flag: &str, node: &[String]) -> Option<String> {
    if node.is_empty() {
        return None;
    }
    let normalise = |list: &mut Vec<String>| {
        for c in list.iter_mut() {
            *c = c.trim().to_string();
        }
        list.retain(|c| !c.is_empty());
        list.sort();
    };
    let mut given: Vec<String> = flag.split(',').map(str::to_string).collect();
    let mut allocated = node.to_vec();
    normalise(&mut given);
    normalise(&mut allocated);
    (given != allocated).then(|| {
        format!(
            "--pod-cidr {} differs from the Node's spec.podCIDRs {}: pods get addresses \
             from --pod-cidr",
            given.join(","),
            allocated.join(",")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_flag_wins_over_the_node_and_the_default() {
        let node = list(&["10.1.2.0/24"]);
        for n in [None, Some(None), Some(Some(node.as_slice()))] {
            let c = choose(Some("10.9.0.0/24"), n).unwrap();
            assert_eq!(c.cidrs, "10.9.0.0/24");
            assert_eq!(c.origin, PodCidrOrigin::Flag);
        }
    }

    #[test]
    fn cluster_mode_without_the_flag_takes_the_nodes_cidrs() {
        let node = list(&["10.1.2.0/24", "fd00:1::/64"]);
        let c = choose(None, Some(Some(node.as_slice()))).unwrap();
        assert_eq!(c.cidrs, "10.1.2.0/24,fd00:1::/64");
        assert_eq!(c.origin, PodCidrOrigin::Node);
        // An empty flag (the config file's `podCIDR: ""`) is no flag.
        assert_eq!(
            choose(Some(" "), Some(Some(node.as_slice())))
                .unwrap()
                .origin,
            PodCidrOrigin::Node
        );
    }

    #[test]
    fn cluster_mode_waits_while_the_node_has_no_cidr_or_was_not_read() {
        assert_eq!(choose(None, Some(None)), None);
        assert_eq!(choose(None, Some(Some(&[]))), None);
    }

    #[test]
    fn standalone_without_the_flag_uses_the_default() {
        let c = choose(None, None).unwrap();
        assert_eq!(c.cidrs, DEFAULT_POD_CIDRS);
        assert_eq!(c.origin, PodCidrOrigin::Default);
        assert_eq!(c.origin.to_string(), "podhost's default");
    }

    #[test]
    fn a_flag_other_than_the_nodes_allocation_is_reported() {
        let node = list(&["10.1.2.0/24"]);
        let m = flag_mismatch("10.9.0.0/24", &node).unwrap();
        assert!(
            m.contains("10.9.0.0/24") && m.contains("10.1.2.0/24"),
            "{m}"
        );
        assert_eq!(flag_mismatch(" 10.1.2.0/24", &node), None);
        assert_eq!(
            flag_mismatch(
                "fd00:1::/64,10.1.2.0/24",
                &list(&["10.1.2.0/24", "fd00:1::/64"])
            ),
            None
        );
        assert_eq!(flag_mismatch("10.9.0.0/24", &[]), None);
    }
}
