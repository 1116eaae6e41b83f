//! The Node's `spec.podCIDRs`, read for the pod network's IPAM when `--pod-cidr` is not
//! given: kube-controller-manager (`--allocate-node-cidrs`) sets them shortly after the
//! Node is created. The API server refuses to change a podCIDR once set, so the first
//! one seen is final.
//!
//! The registered Node usually has it already (a restart). When it has not, the node
//! watches its own Node (`metadata.name=<node>`: what the kubelet's node informer does
//! and the Node authorizer allows) until it has, then stops: no requests while idle
//! after that, and the podCIDR is seen the moment it is set.

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;

/// The Node's pod CIDRs: `spec.podCIDRs`, else `spec.podCIDR` (API servers before
/// dual-stack fill only that one); empty when it has none.
pub fn node_pod_cidrs(node: &Node) -> Vec<String> {
    let Some(spec) = &node.spec else {
        return Vec::new();
    };
    match (&spec.pod_cidrs, &spec.pod_cidr) {
        (Some(list), _) if !list.is_empty() => list.clone(),
        (_, Some(one)) if !one.is_empty() => vec![one.clone()],
        _ => Vec::new(),
    }
}

/// Publishes the registered Node's pod CIDRs on `tx`; when it has none and `await_them`,
/// watches the Node until it has (then stops).
pub async fn follow(
    client: kube::Client,
    registered: &Node,
    await_them: bool,
    tx: watch::Sender<Option<Vec<String>>>,
) {
    let cidrs = node_pod_cidrs(registered);
    tx.send_replace(Some(cidrs.clone()));
    if !cidrs.is_empty() || !await_them {
        return;
    }
    let name = registered.metadata.name.clone().unwrap_or_default();
    let began = std::time::Instant::now();
    tracing::info!(node = %name, "waiting for the Node's spec.podCIDR before pods get networks");
    let nodes: Api<Node> = Api::all(client);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = std::pin::pin!(watcher::watcher(nodes, config).default_backoff());
    let mut failing = false;
    while let Some(event) = events.next().await {
        let node = match event {
            Ok(Event::Apply(node) | Event::InitApply(node)) => node,
            Ok(_) => continue,
            Err(error) => {
                if !failing {
                    tracing::warn!(%error, "watching the Node for its podCIDR failed; retrying with backoff");
                }
                failing = true;
                continue;
            }
        };
        failing = false;
        let cidrs = node_pod_cidrs(&node);
        if !cidrs.is_empty() {
            tracing::info!(node = %name, cidrs = ?cidrs, waited = ?began.elapsed(), "the Node has its podCIDR");
            tx.send_replace(Some(cidrs));
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NodeSpec;

    fn node(pod_cidr: Option<&str>, pod_cidrs: Option<&[&str]>) -> Node {
        Node {
            spec: Some(NodeSpec {
                pod_cidr: pod_cidr.map(str::to_string),
                pod_cidrs: pod_cidrs.map(|l| l.iter().map(|s| s.to_string()).collect()),
                ..NodeSpec::default()
            }),
            ..Node::default()
        }
    }

    #[test]
    fn pod_cidrs_come_from_the_list_else_the_single_field() {
        assert_eq!(
            node_pod_cidrs(&node(
                Some("10.1.0.0/24"),
                Some(&["10.1.0.0/24", "fd00::/64"])
            )),
            vec!["10.1.0.0/24", "fd00::/64"]
        );
        assert_eq!(
            node_pod_cidrs(&node(Some("10.1.0.0/24"), None)),
            vec!["10.1.0.0/24"]
        );
        assert_eq!(
            node_pod_cidrs(&node(Some("10.1.0.0/24"), Some(&[]))),
            vec!["10.1.0.0/24"]
        );
        assert!(node_pod_cidrs(&node(None, None)).is_empty());
        assert!(node_pod_cidrs(&node(Some(""), None)).is_empty());
        assert!(node_pod_cidrs(&Node::default()).is_empty());
    }

    #[tokio::test]
    async fn a_registered_node_with_cidrs_is_published_without_a_request() {
        // A client whose every request fails: `follow` must not need it.
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let (tx, rx) = watch::channel(None);
        follow(client.clone(), &node(Some("10.1.0.0/24"), None), true, tx).await;
        assert_eq!(*rx.borrow(), Some(vec!["10.1.0.0/24".to_string()]));
        let (tx, rx) = watch::channel(None);
        follow(client, &node(None, None), false, tx).await;
        assert_eq!(*rx.borrow(), Some(vec![]));
    }
}
