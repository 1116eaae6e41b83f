//! The node's own Node object as the API server has it (list + watch of
//! `metadata.name=<node>`, kube-runtime's watcher, as the kubelet's node informer):
//! labels and taints an administrator changes with `kubectl label`/`taint` reach the
//! node's admission, as they reach the kubelet's (its admission reads the Node from
//! that informer).

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;

/// Follows the Node `name` for as long as the receiver is held: `None` until it is
/// first seen (and again if it is deleted), then its latest version.
pub fn watch_own_node(client: kube::Client, name: &str) -> watch::Receiver<Option<Arc<Node>>> {
    let (tx, rx) = watch::channel(None);
    let nodes: Api<Node> = Api::all(client);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let name = name.to_string();
    tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher::watcher(nodes, config).default_backoff());
        let mut listed: Option<Arc<Node>> = None;
        loop {
            let event = tokio::select! {
                event = events.next() => event,
                () = tx.closed() => return,
            };
            let Some(event) = event else { return };
            match event {
                Ok(Event::Apply(node)) => {
                    tx.send_replace(Some(Arc::new(node)));
                }
                Ok(Event::Delete(_)) => {
                    tx.send_replace(None);
                }
                Ok(Event::Init) => listed = None,
                Ok(Event::InitApply(node)) => listed = Some(Arc::new(node)),
                Ok(Event::InitDone) => {
                    tx.send_replace(listed.take());
                }
                Err(e) => {
                    tracing::debug!(node = %name, error = %e, "watch of the node's own Node failed; retrying");
                }
            }
        }
    });
    rx
}
