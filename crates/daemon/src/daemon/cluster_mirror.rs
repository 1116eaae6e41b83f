//! Cluster mode's mirror pods: each static pod the node runs (manifest directory or
//! URL) is shown in the API server as a mirror pod, kept as the kubelet keeps it —
//! created once the Node is registered, replaced when the manifest is edited, created
//! again when someone deletes it, left in place while its static pod terminates, and
//! deleted once no static pod of its name is left (also those a previous daemon left).
//!
//! The static pods come from the status store (a pod is there from its worker's start
//! until it fully terminated, marked with a deletionTimestamp while it terminates), the
//! mirror pods from the node's pod watch; `cluster::mirror_plan` decides. A static pod
//! refused at admission gets none, as with the kubelet. Runs on every
//! change of either, and every 10 s to retry failed writes.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use tokio::sync::watch;

use super::api_pods::is_api_pod;
use podhost_cluster::mirror_client::{
    MirrorCreate, NodeOwner, create_mirror, delete_mirror, mirror_pod,
};
use podhost_cluster::mirror_plan::{MirrorAction, RecentWrites, StaticPodState, plan};
use podhost_cluster::pods::MirrorPods;
use podhost_cluster::rate::ClientLimiter;
use podhost_status::StatusStore;

/// How often failed writes are tried again (the kubelet's pod resync is of this order).
pub const RETRY_EVERY: Duration = Duration::from_secs(10);

struct MirrorSync {
    client: kube::Client,
    store: Arc<StatusStore>,
    node_name: String,
    recent: RecentWrites,
    limiter: ClientLimiter,
    /// Writes whose failure was logged: a static pod that cannot be mirrored (one
    /// naming a service account or a secret, which NodeRestriction refuses) is
    /// reported once, not every 10 s.
    reported: HashSet<MirrorAction>,
    /// What the last plan was made from, so that a status-only change of the store
    /// does not plan again.
    last: Option<(Vec<StaticPodState>, Arc<MirrorPods>)>,
}

/// Runs for the daemon's life.
pub async fn run(
    client: kube::Client,
    store: Arc<StatusStore>,
    mut mirrors: watch::Receiver<Arc<MirrorPods>>,
    mut node_uid: watch::Receiver<Option<String>>,
    node_name: String,
    limiter: ClientLimiter,
) {
    let mut changes = store.subscribe();
    let mut s = MirrorSync {
        client,
        store,
        node_name,
        recent: RecentWrites::default(),
        limiter,
        reported: HashSet::new(),
        last: None,
    };
    let mut retry = tokio::time::interval(RETRY_EVERY);
    retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut registered = true;
    loop {
        let forced = tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
                false
            }
            changed = mirrors.changed() => {
                if changed.is_err() {
                    return;
                }
                false
            }
            // The node side ended (the daemon is stopping): no new value will come.
            changed = node_uid.changed(), if registered => {
                registered = changed.is_ok();
                true
            }
            _ = retry.tick() => true,
        };
        let view = mirrors.borrow_and_update().clone();
        let uid = node_uid.borrow_and_update().clone();
        if let Some(uid) = uid.filter(|_| view.synced) {
            s.reconcile(view, &uid, forced).await;
        }
    }
}

impl MirrorSync {
    /// The static pods of the store that get a mirror pod, in a stable order.
    fn static_pods(&self) -> Vec<StaticPodState> {
        let mut statics = Vec::new();
        self.store
            .visit(|rec| statics.extend(mirrored(&rec.admitted, &rec.status)));
        statics.sort_by(|a, b| {
            (&a.namespace, &a.name, &a.hash).cmp(&(&b.namespace, &b.name, &b.hash))
        });
        statics
    }

    async fn reconcile(&mut self, view: Arc<MirrorPods>, node_uid: &str, forced: bool) {
        let statics = self.static_pods();
        if !forced
            && let Some((last_statics, last_view)) = &self.last
            && Arc::ptr_eq(last_view, &view)
            && *last_statics == statics
        {
            return;
        }
        let mirrors = view.states();
        let now = Instant::now();
        let actions = self.recent.filter(plan(&statics, &mirrors), &mirrors, now);
        self.last = Some((statics, view));
        let owner = NodeOwner {
            name: self.node_name.clone(),
            uid: node_uid.to_string(),
        };
        let mut blocked: HashSet<String> = HashSet::new();
        for action in actions {
            if blocked.contains(&action.full_name()) {
                continue;
            }
            self.limiter.acquire().await;
            let done = match &action {
                MirrorAction::Delete {
                    namespace,
                    name,
                    uid,
                    reason,
                } => {
                    let result = delete_mirror(&self.client, namespace, name, uid).await;
                    if result.is_ok() {
                        tracing::info!(pod = %name, %namespace, %uid, ?reason, "mirror pod deleted");
                    }
                    result.map(|_| true)
                }
                MirrorAction::Create {
                    namespace,
                    name,
                    hash,
                } => {
                    let Some(rec) = self.store.get(hash) else {
                        continue;
                    };
                    let result =
                        create_mirror(&self.client, &mirror_pod(&rec.admitted, hash, &owner)).await;
                    match &result {
                        Ok((MirrorCreate::Created, uid)) => {
                            tracing::info!(pod = %name, %namespace, uid = uid.as_deref().unwrap_or_default(), %hash, "mirror pod created");
                        }
                        Ok((MirrorCreate::Exists, _)) => {
                            tracing::debug!(pod = %name, %namespace, "mirror pod exists already");
                        }
                        Err(_) => {}
                    }
                    result.map(|(how, _)| how == MirrorCreate::Created)
                }
            };
            match done {
                // A create that met a pod of the name did nothing: nothing to remember.
                Ok(false) => {
                    self.reported.remove(&action);
                }
                Ok(true) => {
                    self.reported.remove(&action);
                    self.recent.record(&action, Instant::now());
                }
                Err(e) => {
                    if self.reported.insert(action.clone()) {
                        tracing::warn!(pod = %action.full_name(), error = %e, "mirror pod not written; retrying every 10 s");
                    }
                    // A replacement's create waits for its delete.
                    blocked.insert(action.full_name());
                }
            }
        }
    }
}

/// A pod of the status store as the mirror plan sees it: static pods only, and not one
/// the node refused at admission (the kubelet never syncs a rejected pod, so it gets no
/// mirror pod).
fn mirrored(pod: &Pod, s: &PodStatus) -> Option<StaticPodState> {
    if is_api_pod(pod) {
        return None;
    }
    let rejected = s.phase.as_deref() == Some("Failed")
        && s.reason.as_deref().is_some_and(|r| {
            podhost_model::admission::is_admission_reason(r)
                || r == crate::worker::host_ports::REASON
        });
    if rejected {
        return None;
    }
    Some(StaticPodState {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        hash: pod.metadata.uid.clone().unwrap_or_default(),
        terminating: pod.metadata.deletion_timestamp.is_some(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(source: &str, phase: &str, reason: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("web-n".into()),
                namespace: Some("default".into()),
                uid: Some("h1".into()),
                annotations: Some(
                    [(
                        podhost_source::ANNOTATION_CONFIG_SOURCE.to_string(),
                        source.to_string(),
                    )]
                    .into(),
                ),
                ..ObjectMeta::default()
            },
            spec: None,
            status: Some(PodStatus {
                phase: Some(phase.into()),
                reason: reason.map(Into::into),
                ..PodStatus::default()
            }),
        }
    }

    fn mirrored_pod(pod: &Pod) -> Option<StaticPodState> {
        mirrored(pod, pod.status.as_ref().unwrap())
    }

    #[test]
    fn static_pods_of_both_sources_are_mirrored_even_once_finished() {
        for source in ["file", "http"] {
            let state = mirrored_pod(&pod(source, "Running", None)).unwrap();
            assert_eq!((state.name.as_str(), state.hash.as_str()), ("web-n", "h1"));
            assert!(!state.terminating);
        }
        assert!(mirrored_pod(&pod("file", "Failed", Some("Evicted"))).is_some());
        assert!(mirrored_pod(&pod("file", "Succeeded", None)).is_some());
    }

    #[test]
    fn api_pods_and_rejected_static_pods_are_not() {
        assert!(mirrored_pod(&pod("api", "Running", None)).is_none());
        assert!(mirrored_pod(&pod("file", "Failed", Some("NodeAffinity"))).is_none());
        assert!(mirrored_pod(&pod("file", "Failed", Some("OutOfcpu"))).is_none());
        assert!(mirrored_pod(&pod("file", "Failed", Some("NodePorts"))).is_none());
    }
}
