//! Cluster mode's ConfigMaps, Secrets and service account tokens: what the pods bound
//! to the node name,
//! followed from the API server for as long as a bound pod names them (the kubelet
//! registers a pod's references when the pod manager adds it and drops them when the
//! pod goes away; here the bound set is that pod manager's view).

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::sync::watch;

use podhost_cluster::objects::ObjectWatches;
use podhost_cluster::pods::BoundPods;
use podhost_model::config_refs::{ObjectRef, ObjectSet, TokenRef, pod_config_refs, pod_token_refs};

/// Follows the references of `pods` into `objects` until the pod watch ends.
pub async fn run(
    client: kube::Client,
    mut pods: watch::Receiver<Arc<BoundPods>>,
    objects: watch::Sender<Arc<ObjectSet>>,
) {
    let mut watches = ObjectWatches::new(client, objects);
    let mut last: Option<(BTreeSet<ObjectRef>, BTreeSet<TokenRef>)> = None;
    loop {
        let (refs, tokens) = {
            let view = pods.borrow_and_update();
            let refs: BTreeSet<ObjectRef> = view
                .pods
                .values()
                .flat_map(|p| pod_config_refs(p))
                .collect();
            let tokens: BTreeSet<TokenRef> =
                view.pods.values().flat_map(|p| pod_token_refs(p)).collect();
            (refs, tokens)
        };
        if last.as_ref().is_none_or(|(r, _)| *r != refs) {
            tracing::debug!(objects = refs.len(), "objects named by the node's pods");
            watches.set_refs(&refs);
        }
        if last.as_ref().is_none_or(|(_, t)| *t != tokens) {
            tracing::debug!(
                tokens = tokens.len(),
                "service account tokens of the node's pods"
            );
            watches.set_tokens(&tokens);
        }
        last = Some((refs, tokens));
        if pods.changed().await.is_err() {
            return;
        }
    }
}
