//! Keeps the workers' admission on the Node as the API server has it: when an
//! administrator relabels or taints the node, later pods are admitted against the new
//! labels and taints (pods already running stay, as with the kubelet).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use tokio::sync::watch;

use crate::worker::admission_ledger::AdmissionLedger;

/// Follows `node` for the daemon's life.
pub async fn run(mut node: watch::Receiver<Option<Arc<Node>>>, ledger: AdmissionLedger) {
    loop {
        let current = node.borrow_and_update().clone();
        if let Some(api) = current
            && let Some(view) = ledger.node().with_placement_of(&api)
        {
            tracing::info!(labels = ?view.labels, taints = view.taints.len(),
                "the Node's labels or taints changed in the API server; later pods are admitted against them");
            ledger.set_node(view);
        }
        if node.changed().await.is_err() {
            return;
        }
    }
}
