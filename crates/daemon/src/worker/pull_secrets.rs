//! The logins a pod's image pulls use before the node's: its `imagePullSecrets`, read
//! where its other Secrets are read (`config_source`: an API pod's from the API server,
//! a static pod's from `--config-dir`). What cannot be used is said on the pod as a
//! Warning and the pull goes on with the rest; a Secret whose document is malformed
//! fails the pull, as the kubelet's does.

use std::collections::BTreeSet;

use super::context::{Ctx, PodInfo};
use super::error::WorkerError;
use podhost_model::config_refs::{ObjectKind, ObjectRef};
use podhost_model::pull_secrets::{
    DockerKeyring, FAILED_TO_RETRIEVE_REASON, INVALID_REASON, pod_pull_secrets, pull_secret_names,
};
use podhost_status::EventKind;

/// The logins of the pod's image pull secrets, for a pull of `image`. An API pod's
/// Secrets are waited for (their watches' first answer, at most
/// [`FIRST_ANSWER_WAIT`](super::config_source::FIRST_ANSWER_WAIT)): one still unknown
/// then counts as one that cannot be retrieved, as the kubelet counts it.
pub async fn pod_logins(
    ctx: &Ctx,
    pod: &PodInfo,
    image: &str,
) -> Result<DockerKeyring, WorkerError> {
    let names = pull_secret_names(&pod.pod);
    if names.is_empty() {
        return Ok(DockerKeyring::default());
    }
    let refs: BTreeSet<ObjectRef> = names
        .iter()
        .map(|name| ObjectRef {
            kind: ObjectKind::Secret,
            namespace: pod.namespace.clone(),
            name: name.clone(),
        })
        .collect();
    let limit = super::config_source::FIRST_ANSWER_WAIT;
    if !super::config_source::wait_for_objects(ctx, pod, &refs, limit).await {
        tracing::warn!(pod = %pod.name, ?limit,
            "the pod's image pull secrets are not all known yet; pulling without those");
    }
    let objects = super::config_source::current(ctx, pod);
    let found = pod_pull_secrets(&pod.pod, objects.lookup());
    let object = format!("pod/{}", pod.name);
    if let Some(message) = found.missing_message() {
        ctx.store.pod_event(
            &pod.uid,
            EventKind::Warning,
            FAILED_TO_RETRIEVE_REASON,
            &object,
            message,
        );
    }
    for warning in &found.warnings {
        ctx.store.pod_event(
            &pod.uid,
            EventKind::Warning,
            INVALID_REASON,
            &object,
            warning.to_string(),
        );
    }
    found.keyring.map_err(|source| WorkerError::PullSecret {
        image: image.to_string(),
        source,
    })
}
