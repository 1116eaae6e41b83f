//! The Node's `spec.podCIDRs`, for the pod network's IPAM when `--pod-cidr` is not
//! given: kube-controller-manager (`--allocate-node-cidrs`) sets them shortly after the
//! Node is created. They come from the watch of the node's own Node (`own_node`, which
//! admission follows too): seen the moment they are set, no request of their own. The
//! API server refuses to change a podCIDR once set, so the first one seen is final.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
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

/// Publishes the pod CIDRs of the Node `own` follows on `tx`: `None` until the Node is
/// listed, then its CIDRs (empty while it has none); returns once it has some, or
/// when the watch is gone.
pub async fn follow(
    mut own: watch::Receiver<Option<Arc<Node>>>,
    tx: watch::Sender<Option<Vec<String>>>,
) {
    let began = std::time::Instant::now();
    let mut waiting_logged = false;
    loop {
        let node = own.borrow_and_update().clone();
        if let Some(node) = node {
            let cidrs = node_pod_cidrs(&node);
            tx.send_replace(Some(cidrs.clone()));
            if !cidrs.is_empty() {
                if waiting_logged {
                    tracing::info!(cidrs = ?cidrs, waited = ?began.elapsed(), "the Node has its podCIDR");
                }
                return;
            }
            if !waiting_logged {
                tracing::info!("the Node has no spec.podCIDR yet");
                waiting_logged = true;
            }
        }
        if own.changed().await.is_err() {
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
    async fn the_cidrs_are_published_once_listed_and_followed_until_set() {
        let (own_tx, own_rx) = watch::channel(None);
        let (tx, mut rx) = watch::channel(None);
        let follower = tokio::spawn(follow(own_rx, tx));
        tokio::task::yield_now().await;
        assert_eq!(*rx.borrow(), None, "published before the Node was listed");
        own_tx.send_replace(Some(Arc::new(node(None, None))));
        rx.wait_for(Option::is_some).await.unwrap();
        assert_eq!(*rx.borrow(), Some(vec![]));
        assert!(!follower.is_finished());
        own_tx.send_replace(Some(Arc::new(node(Some("10.1.0.0/24"), None))));
        follower.await.unwrap();
        assert_eq!(*rx.borrow(), Some(vec!["10.1.0.0/24".to_string()]));
    }

    #[tokio::test]
    async fn a_node_listed_with_cidrs_ends_the_follower_at_once() {
        let (_own_tx, own_rx) = watch::channel(Some(Arc::new(node(
            None,
            Some(&["10.1.0.0/24", "fd00::/64"]),
        ))));
        let (tx, rx) = watch::channel(None);
        follow(own_rx, tx).await;
        assert_eq!(
            *rx.borrow(),
            Some(vec!["10.1.0.0/24".to_string(), "fd00::/64".to_string()])
        );
    }
}
