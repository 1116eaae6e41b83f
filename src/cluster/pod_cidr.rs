//! The Node's `spec.podCIDRs`, read for the pod network's IPAM when `--pod-cidr` is not
//! given: kube-controller-manager (`--allocate-node-cidrs`) sets them shortly after the
//! Node is created. The API server refuses to change a podCIDR once set, so the first
//! one read is final and the reads stop there: an idle node makes no requests for it.
//!
//! Read with a GET of the own Node (what the Node authorizer grants a node) rather than
//! a watch: while it is awaited every second for the first minute (the controller
//! allocates within a second when it runs), then every 10 s (the kubelet's node status
//! period, at which its kubenet would notice it).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use tokio::sync::watch;

use super::ClusterError;

/// How often the Node is read while its podCIDR is awaited, by time since the wait began.
pub fn poll_interval(waited: Duration) -> Duration {
    if waited < Duration::from_secs(60) {
        Duration::from_secs(1)
    } else {
        Duration::from_secs(10)
    }
}

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
/// reads the Node until it has (then stops).
pub async fn follow(
    client: kube::Client,
    registered: &Node,
    await_them: bool,
    tx: watch::Sender<Option<Vec<String>>>,
) {
    let mut cidrs = node_pod_cidrs(registered);
    tx.send_replace(Some(cidrs.clone()));
    if !cidrs.is_empty() || !await_them {
        return;
    }
    let name = registered.metadata.name.clone().unwrap_or_default();
    let nodes: Api<Node> = Api::all(client);
    let began = Instant::now();
    tracing::info!(node = %name, "waiting for the Node's spec.podCIDR before pods get networks");
    while cidrs.is_empty() {
        tokio::time::sleep(poll_interval(began.elapsed())).await;
        match read_once(&nodes, &name).await {
            Ok(now) => cidrs = now,
            Err(error) => tracing::warn!(%error, "reading the Node's podCIDR failed; retrying"),
        }
    }
    tracing::info!(node = %name, cidrs = ?cidrs, waited = ?began.elapsed(), "the Node has its podCIDR");
    tx.send_replace(Some(cidrs));
}

async fn read_once(nodes: &Api<Node>, name: &str) -> Result<Vec<String>, ClusterError> {
    let node = nodes
        .get(name)
        .await
        .map_err(ClusterError::api(format!("reading Node {name}")))?;
    Ok(node_pod_cidrs(&node))
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

    #[test]
    fn the_wait_polls_each_second_for_a_minute_then_at_the_status_period() {
        assert_eq!(poll_interval(Duration::ZERO), Duration::from_secs(1));
        assert_eq!(
            poll_interval(Duration::from_secs(59)),
            Duration::from_secs(1)
        );
        assert_eq!(
            poll_interval(Duration::from_secs(60)),
            Duration::from_secs(10)
        );
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
