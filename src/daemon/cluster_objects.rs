//! Cluster mode's ConfigMaps and Secrets: the objects the pods bound to the node name,
//! followed from the API server for as long as a bound pod names them (the kubelet
//! registers a pod's references when the pod manager adds it and drops them when the
//! pod goes away; here the bound set is that pod manager's view).

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::sync::watch;

use crate::cluster::objects::ObjectWatches;
use crate::cluster::pods::BoundPods;
use crate::model::config_refs::{ObjectRef, ObjectSet, pod_config_refs};

/// Follows the references of `pods` into `objects` until the pod watch ends.
pub async fn run(
    client: kube::Client,
    mut pods: watch::Receiver<Arc<BoundPods>>,
    objects: watch::Sender<Arc<ObjectSet>>,
) {
    let mut watches = ObjectWatches::new(client, objects);
    let mut last: Option<BTreeSet<ObjectRef>> = None;
    loop {
        let refs: BTreeSet<ObjectRef> = pods
            .borrow_and_update()
            .pods
            .values()
            .flat_map(|p| pod_config_refs(p))
            .collect();
        if last.as_ref() != Some(&refs) {
            tracing::debug!(objects = refs.len(), "objects named by the node's pods");
            watches.set_refs(&refs);
            last = Some(refs);
        }
        if pods.changed().await.is_err() {
            return;
        }
    }
}
