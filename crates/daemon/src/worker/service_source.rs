//! The service variables of a pod's containers: from cluster mode's Services watch,
//! for API pods and static pods alike (the kubelet gives both); none standalone.
//! An API pod's containers wait for the first list of the Services, as the kubelet's
//! (`serviceHasSynced`): a pod read right after a restart would otherwise start
//! without `KUBERNETES_SERVICE_HOST`. A static pod never waits (nor in the kubelet):
//! it must run even when the API server cannot be reached.

use std::time::Duration;

use super::context::{Ctx, PodInfo};
use podhost_model::service_env::{ServiceEnvError, service_env, service_links_enabled};

/// The service variables of `pod`'s containers now; `Err` for an API pod while the
/// Services have not been listed yet.
pub fn service_vars(ctx: &Ctx, pod: &PodInfo) -> Result<Vec<(String, String)>, ServiceEnvError> {
    let Some(rx) = &ctx.api_services else {
        return Ok(Vec::new());
    };
    let set = rx.borrow().clone();
    if !set.synced && podhost_source::is_api_pod(&pod.pod) {
        return Err(ServiceEnvError::NotSynced);
    }
    Ok(service_env(
        &set,
        &pod.namespace,
        service_links_enabled(&pod.pod),
    ))
}

/// Waits, at most `limit`, until the Services have been listed once if `pod` is an API
/// pod in cluster mode; `Err` (the kubelet's message) when they still have not.
pub async fn wait_for_services(
    ctx: &Ctx,
    pod: &PodInfo,
    limit: Duration,
) -> Result<(), ServiceEnvError> {
    let Some(rx) = &ctx.api_services else {
        return Ok(());
    };
    if !podhost_source::is_api_pod(&pod.pod) {
        return Ok(());
    }
    let mut rx = rx.clone();
    let synced = matches!(
        tokio::time::timeout(limit, rx.wait_for(|set| set.synced)).await,
        Ok(Ok(_))
    );
    // Else the watch ended (the daemon is stopping) or the time is up; it may have
    // been listed in the moment between.
    match synced || rx.borrow().synced {
        true => Ok(()),
        false => Err(ServiceEnvError::NotSynced),
    }
}
