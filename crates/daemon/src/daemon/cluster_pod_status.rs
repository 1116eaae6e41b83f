//! Cluster mode's pod status sync, as the kubelet's status manager: the status of every
//! pod of the API server is patched when it changed (followed from the status store,
//! not polled), failed writes are retried every 10 s, and writes share one token
//! bucket (the kubelet's 50 QPS, burst 100). When a pod's worker has released it, its
//! final status is written — terminal, as the kubelet's `TerminatePod` makes it — and a
//! pod the API server is deleting is then deleted with grace 0 and its UID as
//! precondition.
//!
//! A static pod's status goes to its mirror pod, as the kubelet's status manager
//! translates a static pod's UID to its mirror pod's: the mirror pod of the same name
//! carrying the static pod's config hash, patched with the mirror pod's UID as
//! precondition (a mirror pod created again gets the status anew, as it starts
//! Pending). A static pod without a mirror pod yet is skipped until one appears. Static
//! pods keep their phase rules: no terminal status is made up for them.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use tokio::sync::{mpsc, watch};

use super::api_pods::is_api_pod;
use super::manager::ApiPodEnd;
use podhost_cluster::pod_status::{PodWrite, delete_terminated, patch_status};
use podhost_cluster::pods::{BoundPods, MirrorPods};
use podhost_cluster::rate::ClientLimiter;
use podhost_model::status_reconcile::agrees;
use podhost_status::StatusStore;

/// The kubelet's status manager re-syncs every 10 s; failed writes wait that long.
pub const RETRY_EVERY: Duration = Duration::from_secs(10);

/// Status writes of different pods sent at once (HTTP/2 streams of one connection).
pub const MAX_WRITES_IN_FLIGHT: usize = 16;

/// One pod's status as the API server last took it.
#[derive(Debug)]
struct Written {
    /// The store record's version it was read from.
    version: u64,
    status: Option<PodStatus>,
    /// When it was written: the API's copy is compared with it only once the watch
    /// has had time to bring the written version.
    at: Instant,
}

/// A pending write about one pod.
#[derive(Debug, Clone)]
struct Pending {
    /// A static pod's status for its mirror pod (else an API pod's own).
    mirror: bool,
    namespace: String,
    name: String,
    version: u64,
    status: PodStatus,
}

struct Sync {
    client: kube::Client,
    store: Arc<StatusStore>,
    written: HashMap<String, Written>,
    /// Static pods' statuses as written, by their mirror pod's UID.
    mirror_written: HashMap<String, Written>,
    mirrors: watch::Receiver<Arc<MirrorPods>>,
    /// The API's copies of the pods, to reconcile against.
    bound: watch::Receiver<Arc<BoundPods>>,
    /// Pods whose object is gone or replaced: nothing more is written about them.
    gone: HashMap<String, Instant>,
    /// Workers' ends whose final writes failed, retried.
    ends: Vec<ApiPodEnd>,
    limiter: ClientLimiter,
    /// Whether the last write failed (to log a failure once, and the recovery).
    failing: bool,
}

/// Runs for the daemon's life.
pub async fn run(
    client: kube::Client,
    store: Arc<StatusStore>,
    mut ends: mpsc::UnboundedReceiver<ApiPodEnd>,
    mirrors: watch::Receiver<Arc<MirrorPods>>,
    bound: watch::Receiver<Arc<BoundPods>>,
    limiter: ClientLimiter,
) {
    let mut changes = store.subscribe();
    let mut s = Sync {
        client,
        store,
        written: HashMap::new(),
        mirror_written: HashMap::new(),
        mirrors,
        bound,
        gone: HashMap::new(),
        ends: Vec::new(),
        limiter,
        failing: false,
    };
    let mut retry = tokio::time::interval(RETRY_EVERY);
    retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
                s.write_changes().await;
            }
            // A mirror pod appeared (or was created again): it gets its static pod's
            // status now. Its sender lives as long as the pod watch.
            Ok(()) = s.mirrors.changed() => s.write_changes().await,
            // A readiness gate's condition changed in the API server.
            Ok(()) = s.bound.changed() => {
                let gates = s.bound.borrow().pods.values().any(|p| has_readiness_gates(p));
                if gates {
                    s.write_changes().await;
                }
            }
            Some(end) = ends.recv() => s.finish(end).await,
            _ = retry.tick() => {
                let pending = std::mem::take(&mut s.ends);
                for end in pending {
                    s.finish(end).await;
                }
                s.reconcile();
                s.write_changes().await;
                let now = Instant::now();
                s.gone.retain(|_, at| now.duration_since(*at) < Duration::from_secs(600));
            }
        }
    }
}

impl Sync {
    /// Forgets what was written about pods whose copy in the API server no longer
    /// agrees with it (someone else changed it), so that the next round writes their
    /// status again — the kubelet's `needsReconcile`.
    fn reconcile(&mut self) {
        let now = Instant::now();
        let settled = |w: &Written| now.duration_since(w.at) >= RETRY_EVERY;
        let bound = self.bound.borrow().clone();
        let mirrors = self.mirrors.borrow().clone();
        for (written, copies) in [
            (&mut self.written, &bound.pods),
            (&mut self.mirror_written, &mirrors.pods),
        ] {
            written.retain(|uid, w| {
                let (Some(ours), Some(api)) = (w.status.as_ref(), copies.get(uid)) else {
                    return true;
                };
                let api = api.status.clone().unwrap_or_default();
                if !settled(w) || agrees(ours, &api) {
                    return true;
                }
                tracing::info!(%uid, phase = ?api.phase, "the API server's copy of the pod status was changed by someone else; writing it again");
                false
            });
        }
    }

    /// Patches every API pod, and every static pod's mirror pod, whose status changed
    /// since it was last written.
    async fn write_changes(&mut self) {
        let mirrors = self.mirrors.borrow_and_update().clone();
        // A static pod's mirror: the mirror pod of its name carrying its hash.
        let mirror_of: HashMap<(String, String), (String, String)> = mirrors
            .states()
            .into_iter()
            .map(|m| ((m.namespace, m.name), (m.hash, m.uid)))
            .collect();
        let bound = self.bound.borrow_and_update().clone();
        let mut pending: BTreeMap<String, Pending> = BTreeMap::new();
        let mut mirrored = std::collections::HashSet::new();
        let (written, mirror_written, gone) =
            (&mut self.written, &mut self.mirror_written, &self.gone);
        self.store.visit(|rec| {
            let namespace = rec.admitted.metadata.namespace.clone().unwrap_or_default();
            let (target, mirror) = if is_api_pod(&rec.admitted) {
                (rec.uid().to_string(), false)
            } else {
                match mirror_of.get(&(namespace.clone(), rec.name().to_string())) {
                    Some((hash, uid)) if hash == rec.uid() => (uid.clone(), true),
                    _ => return,
                }
            };
            if gone.contains_key(&target) {
                return;
            }
            if mirror {
                mirrored.insert(target.clone());
            }
            let written = if mirror {
                &mut *mirror_written
            } else {
                &mut *written
            };
            // A pod with readiness gates is written again when their conditions change
            // in the API server, though its record did not.
            let api_copy = (!mirror).then(|| bound.pods.get(&target)).flatten();
            let gated = api_copy.is_some_and(|p| has_readiness_gates(p));
            let previous = written.get_mut(&target);
            if let Some(w) = &previous
                && w.version == rec.version()
                && !gated
            {
                return;
            }
            let status = match api_copy {
                Some(api) if gated => with_readiness_gates(
                    rec.status.clone(),
                    api,
                    previous.as_ref().and_then(|w| w.status.as_ref()),
                ),
                _ => rec.status.clone(),
            };
            // Only events changed (or the gates did not): nothing to write.
            if let Some(w) = previous
                && w.status.as_ref() == Some(&status)
            {
                w.version = rec.version();
                return;
            }
            pending.insert(
                target,
                Pending {
                    mirror,
                    namespace,
                    name: rec.name().to_string(),
                    version: rec.version(),
                    status,
                },
            );
        });
        // Mirror pods gone, or whose static pod is gone: nothing more to remember.
        self.mirror_written.retain(|uid, _| mirrored.contains(uid));
        // Pods are written side by side (each pod once per round, so its own writes
        // stay in order): with one write at a time, a burst of pod starts queued its
        // Running statuses behind each other's round trips.
        let mut in_flight = FuturesUnordered::new();
        let mut answers = Vec::with_capacity(pending.len());
        for (uid, p) in pending {
            self.limiter.acquire().await;
            let client = self.client.clone();
            in_flight.push(async move {
                let result = patch_status(&client, &p.namespace, &p.name, &uid, &p.status).await;
                (uid, p, result)
            });
            if in_flight.len() >= MAX_WRITES_IN_FLIGHT
                && let Some(answer) = in_flight.next().await
            {
                answers.push(answer);
            }
        }
        while let Some(answer) = in_flight.next().await {
            answers.push(answer);
        }
        for (uid, p, result) in answers {
            self.settle(&uid, p, result);
        }
    }

    /// Writes one pod's status; returns whether it is now on the API server (or the
    /// pod is gone there, which ends its writes too).
    async fn write(&mut self, uid: &str, p: Pending) -> bool {
        self.limiter.acquire().await;
        let result = patch_status(&self.client, &p.namespace, &p.name, uid, &p.status).await;
        self.settle(uid, p, result)
    }

    /// Takes in the answer to one status write; returns whether it is done with.
    fn settle(
        &mut self,
        uid: &str,
        p: Pending,
        result: Result<PodWrite, podhost_cluster::ClusterError>,
    ) -> bool {
        match result {
            Ok(PodWrite::Done) => {
                self.recovered();
                let written = if p.mirror {
                    &mut self.mirror_written
                } else {
                    &mut self.written
                };
                written.insert(
                    uid.to_string(),
                    Written {
                        version: p.version,
                        status: Some(p.status),
                        at: Instant::now(),
                    },
                );
                true
            }
            Ok(PodWrite::Gone) => {
                self.recovered();
                tracing::debug!(pod = %p.name, %uid, "pod gone from the API server: its status is no longer written");
                self.gone.insert(uid.to_string(), Instant::now());
                self.written.remove(uid);
                self.mirror_written.remove(uid);
                true
            }
            Err(e) => {
                if !self.failing {
                    tracing::warn!(pod = %p.name, %uid, error = %e, "pod status not written; retrying every 10 s");
                }
                self.failing = true;
                false
            }
        }
    }

    fn recovered(&mut self) {
        if self.failing {
            tracing::info!("pod statuses are written to the API server again");
            self.failing = false;
        }
    }

    /// A worker released its pod: the final status, then the deletion if the API
    /// server is deleting the pod. Kept for the next retry when a write fails.
    async fn finish(&mut self, end: ApiPodEnd) {
        let status = podhost_model::terminal_status::terminal_status(
            end.last
                .as_ref()
                .map(|rec| rec.status.clone())
                .unwrap_or_default(),
        );
        let already = self
            .written
            .get(&end.uid)
            .is_some_and(|w| w.status.as_ref() == Some(&status));
        if !self.gone.contains_key(&end.uid) && !already {
            let p = Pending {
                mirror: false,
                namespace: end.namespace.clone(),
                name: end.name.clone(),
                version: end.last.as_ref().map_or(0, |r| r.version()),
                status,
            };
            if !self.write(&end.uid, p).await {
                self.ends.push(end);
                return;
            }
        }
        if end.delete && !self.gone.contains_key(&end.uid) {
            self.limiter.acquire().await;
            match delete_terminated(&self.client, &end.namespace, &end.name, &end.uid).await {
                Ok(_) => {
                    tracing::info!(pod = %end.name, namespace = %end.namespace, uid = %end.uid, "terminated pod deleted from the API server");
                }
                Err(e) => {
                    tracing::warn!(pod = %end.name, uid = %end.uid, error = %e, "terminated pod not deleted; retrying in 10 s");
                    self.ends.push(end);
                    return;
                }
            }
        }
        self.written.remove(&end.uid);
        self.gone.insert(end.uid, Instant::now());
    }
}

/// The pod's readiness gates (none for most pods).
fn readiness_gates(pod: &Pod) -> &[k8s_openapi::api::core::v1::PodReadinessGate] {
    pod.spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_deref())
        .unwrap_or_default()
}

fn has_readiness_gates(pod: &Pod) -> bool {
    !readiness_gates(pod).is_empty()
}

/// The node's status of `api` with its readiness gates applied (their conditions are
/// the API server's copy's).
fn with_readiness_gates(status: PodStatus, api: &Pod, previous: Option<&PodStatus>) -> PodStatus {
    let conditions = api
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    podhost_model::readiness_gates::apply(
        status,
        readiness_gates(api),
        conditions,
        previous,
        podhost_model::k8s_time::to_k8s(chrono::Utc::now()),
    )
}
