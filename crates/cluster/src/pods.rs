//! The pods the API server binds to this node: list + watch of `spec.nodeName=<node>`
//! (kube-runtime's watcher: list, then watch from the list's resourceVersion, relist on
//! 410 Gone, retried with backoff), kept as one current set that the pod manager
//! follows as a second pod source beside the manifest directory.
//!
//! Mirror pods (`kubernetes.io/config.mirror`) are this node's static pods as the API
//! shows them: they are no pods to run (the static source runs those), so they go to a
//! channel of their own, which the mirror pod sync and the status sync follow. One
//! list + watch serves both, as the kubelet's one API source does: mirror pods are
//! bound to the node like any other, and a second watch would double the load on the
//! API server for the same objects.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;

use super::mirror_plan::MirrorPodState;

/// The annotation of a mirror pod (its value is the static pod's config hash).
pub const ANNOTATION_CONFIG_MIRROR: &str = "kubernetes.io/config.mirror";

/// How long the last state of a pod deleted from the API is kept for the manager.
pub const GONE_KEPT: Duration = Duration::from_secs(120);

/// The pods bound to the node, as last listed and watched.
#[derive(Debug, Clone, Default)]
pub struct BoundPods {
    /// False until the first full list: before it, a pod's absence means nothing.
    pub synced: bool,
    /// The pods by UID.
    pub pods: BTreeMap<String, Arc<Pod>>,
    /// The last state of pods deleted while watched, by UID, with when the deletion was
    /// seen. A force delete (grace 0) shows only here: the object is gone at once, and
    /// its last state carries the grace the termination must use.
    pub gone: BTreeMap<String, (Instant, Arc<Pod>)>,
}

impl BoundPods {
    fn apply(&mut self, pod: Pod) {
        if let Some(uid) = pod_uid(&pod) {
            self.gone.remove(&uid);
            self.pods.insert(uid, Arc::new(pod));
        }
    }

    fn delete(&mut self, pod: Pod, now: Instant) {
        if let Some(uid) = pod_uid(&pod) {
            self.pods.remove(&uid);
            self.gone.insert(uid, (now, Arc::new(pod)));
        }
        self.gone
            .retain(|_, (at, _)| now.duration_since(*at) < GONE_KEPT);
    }

    /// The first list, or a relist after the watch expired: the listed pods are the
    /// whole set.
    fn relisted(&mut self, listed: BTreeMap<String, Arc<Pod>>) {
        self.pods = listed;
        self.synced = true;
    }
}

/// The mirror pods bound to the node, as last listed and watched.
#[derive(Debug, Clone, Default)]
pub struct MirrorPods {
    /// False until the first full list: before it, a mirror pod's absence means nothing.
    pub synced: bool,
    /// The mirror pods by UID.
    pub pods: BTreeMap<String, Arc<Pod>>,
}

impl MirrorPods {
    /// The mirror pods as the mirror plan sees them.
    pub fn states(&self) -> Vec<MirrorPodState> {
        self.pods
            .iter()
            .map(|(uid, pod)| MirrorPodState {
                namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                name: pod.metadata.name.clone().unwrap_or_default(),
                uid: uid.clone(),
                hash: pod
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(ANNOTATION_CONFIG_MIRROR))
                    .cloned()
                    .unwrap_or_default(),
                deleting: pod.metadata.deletion_timestamp.is_some(),
            })
            .collect()
    }
}

/// The node's pods as two followed sets: the pods to run, and the mirror pods.
pub struct NodePods {
    pub bound: watch::Receiver<Arc<BoundPods>>,
    pub mirrors: watch::Receiver<Arc<MirrorPods>>,
}

/// Whether `pod` is a mirror pod (the API's copy of a static pod).
pub fn is_mirror_pod(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ANNOTATION_CONFIG_MIRROR))
}

fn pod_uid(pod: &Pod) -> Option<String> {
    pod.metadata.uid.clone().filter(|u| !u.is_empty())
}

/// Follows the pods bound to `node_name` (mirror pods left out) for as long as the
/// receiver is held. Every change of the set is one new value of the channel (a busy
/// reader sees the latest).
pub fn watch_bound_pods(client: kube::Client, node_name: &str) -> watch::Receiver<Arc<BoundPods>> {
    watch_node_pods(client, node_name).bound
}

/// Follows the pods bound to `node_name`, the mirror pods apart, for as long as a
/// receiver of either is held. Each channel gets a new value only when its own set
/// changed.
pub fn watch_node_pods(client: kube::Client, node_name: &str) -> NodePods {
    let (tx, rx) = watch::channel(Arc::new(BoundPods::default()));
    let (mirror_tx, mirror_rx) = watch::channel(Arc::new(MirrorPods::default()));
    let pods: Api<Pod> = Api::all(client);
    let config = watcher::Config::default().fields(&format!("spec.nodeName={node_name}"));
    let node = node_name.to_string();
    tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher::watcher(pods, config).default_backoff());
        let mut current = BoundPods::default();
        let mut mirrors = MirrorPods::default();
        let mut listing: Option<BTreeMap<String, Arc<Pod>>> = None;
        let mut mirror_listing: Option<BTreeMap<String, Arc<Pod>>> = None;
        let mut failing = false;
        loop {
            let unread = async {
                tx.closed().await;
                mirror_tx.closed().await;
            };
            let event = tokio::select! {
                () = unread => return,
                event = events.next() => event,
            };
            let Some(event) = event else { return };
            let mut mirrors_changed = false;
            let changed = match event {
                Err(e) => {
                    if !failing {
                        tracing::warn!(node = %node, error = %e, "watching the node's pods failed; retrying with backoff");
                    }
                    failing = true;
                    continue;
                }
                Ok(Event::Init) => {
                    listing = Some(BTreeMap::new());
                    mirror_listing = Some(BTreeMap::new());
                    false
                }
                Ok(Event::InitApply(pod)) => {
                    let list = if is_mirror_pod(&pod) {
                        mirror_listing.as_mut()
                    } else {
                        listing.as_mut()
                    };
                    if let (Some(list), Some(uid)) = (list, pod_uid(&pod)) {
                        list.insert(uid, Arc::new(pod));
                    }
                    false
                }
                Ok(Event::InitDone) => {
                    current.relisted(listing.take().unwrap_or_default());
                    mirrors.pods = mirror_listing.take().unwrap_or_default();
                    mirrors.synced = true;
                    mirrors_changed = true;
                    tracing::info!(node = %node, pods = current.pods.len(), mirror_pods = mirrors.pods.len(), "listed the pods bound to the node");
                    true
                }
                Ok(Event::Apply(pod)) if !is_mirror_pod(&pod) => {
                    current.apply(pod);
                    true
                }
                Ok(Event::Delete(pod)) if !is_mirror_pod(&pod) => {
                    current.delete(pod, Instant::now());
                    true
                }
                Ok(Event::Apply(pod)) => {
                    if let Some(uid) = pod_uid(&pod) {
                        mirrors.pods.insert(uid, Arc::new(pod));
                        mirrors_changed = true;
                    }
                    false
                }
                Ok(Event::Delete(pod)) => {
                    if let Some(uid) = pod_uid(&pod) {
                        mirrors_changed = mirrors.pods.remove(&uid).is_some();
                    }
                    false
                }
            };
            if failing {
                tracing::info!(node = %node, "watching the node's pods again");
                failing = false;
            }
            if changed && current.synced {
                tx.send_replace(Arc::new(current.clone()));
            }
            if mirrors_changed && mirrors.synced {
                mirror_tx.send_replace(Arc::new(mirrors.clone()));
            }
        }
    });
    NodePods {
        bound: rx,
        mirrors: mirror_rx,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(uid: &str, mirror: bool) -> Pod {
        Pod {
            metadata: ObjectMeta {
                uid: Some(uid.into()),
                annotations: mirror.then(|| {
                    [(ANNOTATION_CONFIG_MIRROR.to_string(), "h".to_string())]
                        .into_iter()
                        .collect()
                }),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    #[test]
    fn a_deleted_pod_moves_to_gone_and_is_forgotten_after_a_while() {
        let mut set = BoundPods::default();
        set.apply(pod("a", false));
        let t0 = Instant::now();
        set.delete(pod("a", false), t0);
        assert!(set.pods.is_empty());
        assert!(set.gone.contains_key("a"));
        set.apply(pod("b", false));
        set.delete(pod("b", false), t0 + GONE_KEPT + Duration::from_secs(1));
        assert!(!set.gone.contains_key("a"), "kept too long");
        assert!(set.gone.contains_key("b"));
    }

    #[test]
    fn mirror_pods_are_recognised() {
        assert!(is_mirror_pod(&pod("m", true)));
        assert!(!is_mirror_pod(&pod("p", false)));
    }
}
