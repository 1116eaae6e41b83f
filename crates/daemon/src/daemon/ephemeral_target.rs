//! The API's `POST /pods/NAME/ephemeral` reaches the pod's sync loop through the
//! workers' registry: the one place that knows both.

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::EphemeralContainer;

use crate::worker::ephemeral::{EphemeralError, EphemeralRegistry};
use podhost_api::{EphemeralRefused, EphemeralTarget};

impl EphemeralTarget for EphemeralRegistry {
    fn add(
        &self,
        uid: &str,
        pod: &str,
        container: EphemeralContainer,
    ) -> BoxFuture<'_, Result<(), EphemeralRefused>> {
        let (uid, pod) = (uid.to_string(), pod.to_string());
        Box::pin(async move {
            EphemeralRegistry::add(self, &uid, &pod, container)
                .await
                .map_err(|e| EphemeralRefused {
                    status: match e {
                        EphemeralError::NoSuchPod { .. } | EphemeralError::UnknownTarget { .. } => {
                            404
                        }
                        EphemeralError::Terminating { .. }
                        | EphemeralError::NameTaken { .. }
                        | EphemeralError::TargetNotRunning { .. } => 409,
                        EphemeralError::Invalid { .. } => 400,
                        EphemeralError::Gone { .. } | EphemeralError::Record { .. } => 500,
                    },
                    message: e.to_string(),
                })
        })
    }
}
