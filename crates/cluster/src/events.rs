//! Events to the API server as core/v1 Events (a 1.20 API server lets a node post
//! only those, not events.k8s.io/v1), through client-go's correlation
//! ([`EventCorrelator`]: aggregation, count + PATCH of a repeated event, the spam
//! filter). A PATCH whose object is gone (events expire after an hour) creates it
//! again, as client-go's `recordToSink` does.

use std::time::Duration;

use chrono::Utc;
use k8s_openapi::api::core::v1::Event;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use tokio::sync::mpsc;

use super::rate::ClientLimiter;
use podhost_model::event_correlator::{Correlated, EventCorrelator};

/// How often a post that did not reach the API server is tried (client-go: 12 tries,
/// 10 s apart, with jitter).
const TRIES: usize = 12;
const RETRY_AFTER: Duration = Duration::from_secs(10);

/// Posts each event of `events` until the channel closes, under a limiter of its own
/// (the kubelet's event client: `eventRecordQPS` 50, `eventBurst` 100).
pub async fn run(client: kube::Client, mut events: mpsc::UnboundedReceiver<Event>) {
    let mut correlator = EventCorrelator::default();
    let limiter = ClientLimiter::kubelet_default();
    while let Some(event) = events.recv().await {
        let decided = correlator.correlate(event, Utc::now());
        if decided == Correlated::Skip {
            tracing::debug!("event dropped by the spam filter");
            continue;
        }
        for attempt in 1..=TRIES {
            limiter.acquire().await;
            match send(&client, &decided).await {
                Ok(()) => break,
                Err(kube::Error::Api(status)) => {
                    // The server answered: trying again gets the same answer, and would
                    // hold every later event back (one queue, as client-go's sink).
                    if rejected_as_expected(&status) {
                        tracing::debug!(reason = %status.reason, message = %status.message, "event refused (its namespace is gone); dropped");
                    } else {
                        tracing::warn!(code = status.code, message = %status.message, "the API server refused an event; dropped");
                    }
                    break;
                }
                Err(e) if attempt < TRIES => {
                    tracing::debug!(error = %e, attempt, "posting an event failed; retrying");
                    tokio::time::sleep(RETRY_AFTER).await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "posting an event failed {TRIES} times; dropped");
                }
            }
        }
    }
}

/// Whether an API server's refusal of an event is the ordinary end of its pod's
/// namespace (deleted, or being deleted), not worth a warning: client-go drops those
/// quietly too.
fn rejected_as_expected(status: &kube::core::Status) -> bool {
    let namespace_gone = status.code == 404 && status.message.starts_with("namespaces ");
    let terminating =
        status.code == 403 && status.message.contains("because it is being terminated");
    namespace_gone || terminating
}

/// One create or patch; a patch of a vanished event creates it again.
pub async fn send(client: &kube::Client, decided: &Correlated) -> Result<(), kube::Error> {
    let (event, patch) = match decided {
        Correlated::Create(e) => (e, false),
        Correlated::Patch(e) => (e, true),
        Correlated::Skip => return Ok(()),
    };
    let namespace = event.metadata.namespace.as_deref().unwrap_or("default");
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    if patch && let Some(name) = &event.metadata.name {
        let body = serde_json::json!({
            "count": event.count,
            "lastTimestamp": event.last_timestamp,
            "message": event.message,
        });
        match api
            .patch(name, &PatchParams::default(), &Patch::Strategic(body))
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let mut fresh = event.clone();
    fresh.metadata.resource_version = None;
    match api.create(&PostParams::default(), &fresh).await {
        Ok(_) => Ok(()),
        // Already there (a retry of a create that was taken): nothing more to do.
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, message: &str) -> kube::core::Status {
        kube::core::Status {
            message: message.into(),
            code,
            ..Default::default()
        }
    }

    #[test]
    fn a_gone_namespace_is_an_expected_refusal_other_refusals_are_not() {
        assert!(rejected_as_expected(&status(
            404,
            r#"namespaces "e2e-1" not found"#
        )));
        assert!(rejected_as_expected(&status(
            403,
            r#"events "x" is forbidden: unable to create new content in namespace e2e-1 because it is being terminated"#
        )));
        assert!(!rejected_as_expected(&status(
            403,
            "events is forbidden: User cannot create"
        )));
        assert!(!rejected_as_expected(&status(422, "Event is invalid")));
    }
}
