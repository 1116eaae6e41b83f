//! Errors of the pod worker: what could not be done for which pod or container.

use crate::image::ImageError;
use crate::image::pull::PullError;

/// Why a worker step failed. The message is what a user sees in events and status.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The image is not in the store and its pull policy (or a `localhost/` name) forbids
    /// pulling it: load it (`podhost load`) or change the policy.
    #[error("Container image \"{image}\" is not present with pull policy of {policy}")]
    ImageNotPresent { image: String, policy: String },
    /// A `localhost/` image is local only and is not in the store.
    #[error("Container image is not present: {hint}")]
    LocalImageNotPresent { hint: String },
    /// The registry pull failed (the status shows ErrImagePull, then ImagePullBackOff).
    #[error("Failed to pull image \"{image}\": {source}")]
    Pull {
        image: String,
        #[source]
        source: PullError,
    },
    /// The store cannot resolve an image it should hold.
    #[error("image \"{image}\" cannot be used: {source}")]
    Resolve {
        image: String,
        #[source]
        source: ImageError,
    },
    /// A blocking task (image lookup, bundle preparation) panicked or was cancelled.
    #[error("{what} for container {container} did not finish: {source}")]
    Task {
        what: &'static str,
        container: String,
        #[source]
        source: tokio::task::JoinError,
    },
    /// The sandbox helper (`podhost sandbox`) could not be run or failed.
    #[error("the sandbox helper failed for pod {pod}: {message}")]
    Sandbox { pod: String, message: String },
    /// The sandbox helper could not be spawned.
    #[error("cannot run the sandbox helper for pod {pod}: {source}")]
    SandboxSpawn {
        pod: String,
        #[source]
        source: std::io::Error,
    },
}
