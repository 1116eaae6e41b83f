//! Ephemeral containers (`podhost debug`): added to a running pod through its sync loop,
//! started once in the pod's namespaces (and the target container's pid namespace), never
//! restarted, stopped with the pod. Their specs are kept in the pod's dir so that a
//! restarted daemon adopts them like any other container.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::api::core::v1::{Container, EphemeralContainer};
use tokio::sync::{mpsc, oneshot};

use super::context::Ctx;
use podhost_disk::{read_json, write_json_atomic};

/// The pod's ephemeral containers, in the order they were added.
pub const EPHEMERAL_FILE: &str = "ephemeral-containers.json";

/// Why an ephemeral container was not added.
#[derive(Debug, thiserror::Error)]
pub enum EphemeralError {
    /// No running worker has the pod.
    #[error("pod {pod} is not running on this node")]
    NoSuchPod { pod: String },
    /// The pod is terminating or has terminated.
    #[error("pod {pod} is terminating; ephemeral containers can only join a running pod")]
    Terminating { pod: String },
    /// A container of the pod already has the name.
    #[error("pod {pod} already has a container named {name:?}; choose another --name")]
    NameTaken { pod: String, name: String },
    /// `--target` names no container of the pod.
    #[error("pod {pod} has no container {target:?} to target")]
    UnknownTarget { pod: String, target: String },
    /// The target container does not run, so there is no pid namespace to join.
    #[error("container {target:?} of pod {pod} is not running; its pid namespace cannot be joined")]
    TargetNotRunning { pod: String, target: String },
    /// The spec cannot be used.
    #[error("invalid ephemeral container for pod {pod}: {why}")]
    Invalid { pod: String, why: String },
    /// The pod's worker went away before answering.
    #[error("pod {pod} ended before the ephemeral container was added")]
    Gone { pod: String },
    /// The spec could not be kept on disk.
    #[error("cannot record the ephemeral container of pod {pod}: {source}")]
    Record {
        pod: String,
        #[source]
        source: podhost_disk::DiskError,
    },
}

/// One request to a pod's sync loop.
pub struct EphemeralRequest {
    /// Boxed: an unbounded channel allocates its messages in blocks of 32, so every
    /// pod's channel would hold 32 whole `EphemeralContainer`s (~75 KiB) even when idle.
    pub container: Box<EphemeralContainer>,
    pub reply: oneshot::Sender<Result<(), EphemeralError>>,
}

/// The sync loops that take ephemeral containers, by pod UID.
#[derive(Debug, Clone, Default)]
pub struct EphemeralRegistry {
    loops: Arc<Mutex<HashMap<String, mpsc::UnboundedSender<EphemeralRequest>>>>,
}

impl EphemeralRegistry {
    /// The pod's sync loop takes requests from now on.
    pub fn register(&self, uid: &str) -> mpsc::UnboundedReceiver<EphemeralRequest> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.lock().insert(uid.to_string(), tx);
        rx
    }

    pub fn unregister(&self, uid: &str) {
        self.lock().remove(uid);
    }

    /// Adds `container` to the pod `uid` (named `pod` in errors) and waits until its
    /// sync loop accepted or refused it.
    pub async fn add(
        &self,
        uid: &str,
        pod: &str,
        container: EphemeralContainer,
    ) -> Result<(), EphemeralError> {
        let tx = self.lock().get(uid).cloned();
        let Some(tx) = tx else {
            return Err(EphemeralError::NoSuchPod { pod: pod.into() });
        };
        let (reply, answer) = oneshot::channel();
        let gone = || EphemeralError::Gone { pod: pod.into() };
        tx.send(EphemeralRequest {
            container: Box::new(container),
            reply,
        })
        .map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, mpsc::UnboundedSender<EphemeralRequest>>> {
        self.loops.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The ephemeral container as a container spec (the fields are the same).
pub fn as_container(e: &EphemeralContainer) -> Result<Container, serde_json::Error> {
    serde_json::from_value(serde_json::to_value(e)?)
}

/// The pod's recorded ephemeral containers (none when there is no record).
pub fn load(ctx: &Ctx, uid: &str) -> Vec<EphemeralContainer> {
    let path = ctx.layout.pod_dir(uid).join(EPHEMERAL_FILE);
    match read_json::<Vec<EphemeralContainer>>(&path) {
        Ok(list) => list.unwrap_or_default(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the pod's ephemeral containers; ignoring them");
            Vec::new()
        }
    }
}

/// Records the pod's ephemeral containers (atomically).
pub fn save(
    ctx: &Ctx,
    uid: &str,
    pod: &str,
    list: &[EphemeralContainer],
) -> Result<(), EphemeralError> {
    let path = ctx.layout.pod_dir(uid).join(EPHEMERAL_FILE);
    write_json_atomic(&path, &list).map_err(|source| EphemeralError::Record {
        pod: pod.into(),
        source,
    })
}
