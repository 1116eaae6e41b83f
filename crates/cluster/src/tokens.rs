//! Service account tokens for API pods' projected volumes, as the kubelet's token
//! manager gets them: a TokenRequest (`serviceaccounts/<sa>/token`) with the
//! projection's audience and expirationSeconds, bound to the pod (the token dies with
//! it; the Node authorizer and NodeRestriction let a node ask only for its own pods'
//! service accounts, bound to those pods), replaced at 80% of its life. A token that
//! cannot be renewed stays in place until it expires; the request is retried with
//! backoff.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;
use kube::api::PostParams;
use tokio::sync::watch;

use podhost_model::config_refs::{ObjectSet, ObjectState, TokenRef, token_refresh_at};
use podhost_model::k8s_time::from_k8s;

/// The first retry of a refused or failed request; doubled up to [`MAX_RETRY`].
const FIRST_RETRY: Duration = Duration::from_secs(1);
const MAX_RETRY: Duration = Duration::from_secs(60);

/// The TokenRequest for `r`.
pub fn token_request(r: &TokenRef) -> TokenRequest {
    TokenRequest {
        spec: Some(TokenRequestSpec {
            // None: the API server's own audiences.
            audiences: (!r.audience.is_empty()).then(|| vec![r.audience.clone()]),
            expiration_seconds: Some(r.expiration_seconds),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(r.pod_name.clone()),
                uid: Some(r.pod_uid.clone()),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Keeps `r`'s token in the set until the task is aborted.
pub async fn keep_token(client: kube::Client, r: TokenRef, tx: Arc<watch::Sender<Arc<ObjectSet>>>) {
    let api: Api<ServiceAccount> = Api::namespaced(client, &r.namespace);
    let mut retry = FIRST_RETRY;
    loop {
        let asked = Utc::now();
        let answer = api
            .create_token_request(
                &r.service_account,
                &PostParams::default(),
                &token_request(&r),
            )
            .await;
        let status = match answer {
            Ok(issued) => issued.status,
            Err(e) => {
                tracing::warn!(token = %r, error = %e, retry_in = ?retry, "requesting a service account token failed");
                tokio::time::sleep(retry).await;
                retry = (retry * 2).min(MAX_RETRY);
                continue;
            }
        };
        let issued = status.and_then(|s| Some((s.token?, s.expiration_timestamp?)));
        let Some((token, expires)) = issued else {
            tracing::warn!(token = %r, "the API server answered a TokenRequest without a token");
            tokio::time::sleep(retry).await;
            retry = (retry * 2).min(MAX_RETRY);
            continue;
        };
        retry = FIRST_RETRY;
        let expires = from_k8s(&expires);
        tx.send_if_modified(|set| {
            let mut next = (**set).clone();
            let Some(slot) = next.tokens.get_mut(&r) else {
                return false;
            };
            *slot = ObjectState::Present(token.clone());
            *set = Arc::new(next);
            true
        });
        let refresh = token_refresh_at(asked, expires);
        tracing::debug!(token = %r, %expires, %refresh, "service account token issued");
        let wait = (refresh - Utc::now()).to_std().unwrap_or(Duration::ZERO);
        tokio::time::sleep(wait.max(Duration::from_secs(1))).await;
    }
}
