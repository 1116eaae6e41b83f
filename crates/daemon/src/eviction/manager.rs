//! The manager's loop: observe, assess, publish the node conditions, reclaim, evict one.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::NodeCondition as K8sCondition;
use tokio::sync::mpsc::UnboundedSender;

use super::pod_usage::pod_usage;
use super::signals::observe;
use super::{EvictionOrder, EvictionSettings, EvictionTargets};
use podhost_model::eviction::{
    EvictionState, NodeCondition, Observations, Resource, Threshold, eviction_grace,
    eviction_message, is_met, pick_victim,
};
use podhost_status::EventKind;

pub async fn run(
    mut live: tokio::sync::watch::Receiver<EvictionSettings>,
    targets: EvictionTargets,
    orders: UnboundedSender<EvictionOrder>,
) {
    let mut settings = live.borrow_and_update().clone();
    let targets = Arc::new(targets);
    let mut state = EvictionState::default();
    let mut evicted: HashSet<String> = HashSet::new();
    let mut tick = tokio::time::interval(settings.monitoring_period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    publish_conditions(&targets, &[], &[]);
    tracing::info!(
        thresholds = ?settings.thresholds.iter().map(|t| format!("{}<{:?} grace {:?}", t.signal, t.value, t.grace)).collect::<Vec<_>>(),
        period = ?settings.monitoring_period,
        "eviction manager started"
    );
    loop {
        tick.tick().await;
        if orders.is_closed() {
            return;
        }
        if live.has_changed().unwrap_or(false) {
            let new = live.borrow_and_update().clone();
            if new.monitoring_period != settings.monitoring_period {
                tick = tokio::time::interval(new.monitoring_period);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            }
            state.thresholds_changed();
            tracing::info!(
                thresholds = ?new.thresholds.iter().map(|t| format!("{}<{:?} grace {:?}", t.signal, t.value, t.grace)).collect::<Vec<_>>(),
                "eviction manager: settings changed"
            );
            settings = new;
        }
        let observations = observe_blocking(&targets).await;
        let now = chrono::Utc::now();
        let assessment = state.assess(
            &settings.thresholds,
            &observations,
            settings.pressure_transition_period,
            now,
        );
        publish_conditions(&targets, &assessment.conditions, &assessment.changes);
        let Some(threshold) = assessment.to_reclaim().cloned() else {
            continue;
        };
        let resource = threshold.signal.resource();
        tracing::info!(signal = %threshold.signal, ?resource, "eviction manager: attempting to reclaim");
        let observations = match resource {
            Resource::EphemeralStorage | Resource::Inodes => {
                match reclaim_node_level(&targets, &settings, &threshold, &evicted).await {
                    Some(after) => after,
                    None => continue,
                }
            }
            _ => observations,
        };
        evicted.retain(|uid| targets.store.get(uid).is_some());
        if let Some(order) = choose(&targets, &settings, &threshold, &observations, &evicted).await
        {
            tracing::warn!(pod = %order.name, uid = %order.uid, grace = ?order.grace, message = %order.message, "eviction manager: evicting pod");
            podhost_metrics::eviction(threshold.signal.name());
            evicted.insert(order.uid.clone());
            let uid = order.uid.clone();
            if orders.send(order).is_err() {
                return;
            }
            wait_for_cleanup(&targets, &uid).await;
        }
    }
}

/// The kubelet's `podCleanupTimeout` and poll period: after an eviction, the next
/// round waits (at most this long) until the pod's containers are all dead, so that
/// the round measures what the eviction freed and its reclaim can remove their layers,
/// instead of evicting a second pod for the pressure the first one still holds.
const CLEANUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
const CLEANUP_POLL: std::time::Duration = std::time::Duration::from_secs(1);

async fn wait_for_cleanup(targets: &Arc<EvictionTargets>, uid: &str) {
    let deadline = tokio::time::Instant::now() + CLEANUP_TIMEOUT;
    while tokio::time::Instant::now() < deadline {
        let (layout, pod) = (targets.layout.clone(), uid.to_string());
        let done = tokio::task::spawn_blocking(move || containers_all_dead(&layout, &pod))
            .await
            .unwrap_or(true);
        if done {
            return;
        }
        tokio::time::sleep(CLEANUP_POLL).await;
    }
    tracing::warn!(%uid, timeout = ?CLEANUP_TIMEOUT, "eviction manager: the evicted pod's containers are not all gone yet");
}

/// Whether every container start of the pod has exited and its shim is gone.
fn containers_all_dead(layout: &podhost_disk::Layout, uid: &str) -> bool {
    let dead = crate::gc::scan(layout)
        .iter()
        .filter(|d| d.pod_uid == uid)
        .count();
    let started: usize = std::fs::read_dir(layout.pod_dir(uid).join("containers"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| podhost_disk::attempts(&e.path()).len())
        .sum();
    dead >= started
}

async fn observe_blocking(targets: &Arc<EvictionTargets>) -> Observations {
    let sources = targets.sources.clone();
    tokio::task::spawn_blocking(move || observe(&sources))
        .await
        .unwrap_or_default()
}

/// Dead containers, then every unused image; `None` when that brought the signal back
/// past the threshold and its minimum reclaim (no pod needs to go), else the readings
/// after the reclaim.
async fn reclaim_node_level(
    targets: &Arc<EvictionTargets>,
    settings: &EvictionSettings,
    threshold: &Threshold,
    evicted: &HashSet<String>,
) -> Option<Observations> {
    // The pods this manager evicted count as evicted even before their workers have
    // published it: their dead containers' layers are what this round must free.
    let containers = targets.gc.containers_also_evicted(evicted).await;
    let images = targets.gc.unused_images().await;
    tracing::info!(
        dead_containers = containers.removed.len(),
        image_bytes = images.as_ref().map(|r| r.freed_bytes).unwrap_or(0),
        "eviction manager: node-level reclaim done"
    );
    let after = observe_blocking(targets).await;
    let still = settings
        .thresholds
        .iter()
        .filter(|t| t.signal.resource() == threshold.signal.resource())
        .any(|t| is_met(t, &after, true));
    if still {
        Some(after)
    } else {
        tracing::info!(signal = %threshold.signal, "eviction manager: able to reduce resource pressure without evicting pods");
        None
    }
}

/// The pod to evict for `threshold`, with its message and grace; critical pods are
/// passed over (logged, as the kubelet's "cannot evict a critical pod").
async fn choose(
    targets: &Arc<EvictionTargets>,
    settings: &EvictionSettings,
    threshold: &Threshold,
    observations: &Observations,
    evicted: &HashSet<String>,
) -> Option<EvictionOrder> {
    let active: Vec<_> = targets
        .store
        .pods()
        .into_iter()
        .filter(|r| !evicted.contains(r.uid()))
        .filter(|r| r.admitted.metadata.deletion_timestamp.is_none())
        .filter(|r| !r.is_terminal())
        .collect();
    let t = targets.clone();
    let pods: Vec<_> = active.iter().map(|r| r.admitted.clone()).collect();
    let usage = tokio::task::spawn_blocking(move || {
        pods.iter()
            .map(|p| pod_usage(p, &t.layout, &t.cgroups))
            .collect::<Vec<_>>()
    })
    .await
    .ok()?;
    let resource = threshold.signal.resource();
    let (victim, passed_over) = pick_victim(resource, usage);
    for p in &passed_over {
        tracing::warn!(pod = %p.name, uid = %p.uid, "eviction manager: cannot evict a critical pod");
    }
    let Some(victim) = victim else {
        tracing::warn!(signal = %threshold.signal, "eviction manager: no pod that can be evicted");
        return None;
    };
    let record = active.iter().find(|r| r.uid() == victim.uid)?;
    let pod_grace = podhost_model::grace::pod_grace(
        record
            .admitted
            .spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds),
    );
    let observation = observations.get(&threshold.signal)?;
    let message = eviction_message(
        resource,
        threshold.value.quantity(observation.capacity),
        observation.available,
        &victim,
    );
    Some(EvictionOrder {
        grace: eviction_grace(threshold, settings.max_pod_grace_period, pod_grace),
        uid: victim.uid,
        name: victim.name,
        message,
    })
}

/// The conditions into the status store (all three, True or False, as a node's
/// status lists them), and a node event for each change.
fn publish_conditions(
    targets: &EvictionTargets,
    now_true: &[NodeCondition],
    changes: &[podhost_model::eviction::ConditionChange],
) {
    let at = podhost_status::k8s_time(chrono::Utc::now());
    let previous = targets.store.node_conditions();
    let conditions = NodeCondition::ALL
        .into_iter()
        .map(|c| {
            let pressure = now_true.contains(&c);
            let status = if pressure { "True" } else { "False" };
            let kept = previous
                .iter()
                .find(|p| p.type_ == c.name() && p.status == status)
                .and_then(|p| p.last_transition_time.clone());
            K8sCondition {
                type_: c.name().to_string(),
                status: status.to_string(),
                reason: Some(c.condition_reason(pressure).to_string()),
                message: Some(c.message(pressure).to_string()),
                last_heartbeat_time: Some(at.clone()),
                last_transition_time: Some(kept.unwrap_or_else(|| at.clone())),
            }
        })
        .collect();
    targets.store.set_node_conditions(conditions);
    for change in changes {
        let reason = change.condition.event_reason(change.pressure);
        targets.store.node_event(
            EventKind::Normal,
            reason,
            format!("Node status is now: {reason}"),
        );
    }
}
