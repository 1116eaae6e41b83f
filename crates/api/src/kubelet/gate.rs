//! Every request's authentication then authorization, as the kubelet's filter: a
//! verified client certificate's user, else a bearer token's (TokenReview); no
//! anonymous requests. Then a SubjectAccessReview of the request's `nodes`
//! subresource on this node.

use hyper::HeaderMap;

use super::reviewer::AccessReviewer;
use podhost_model::kubelet_auth::{UserInfo, bearer_token, node_access};

/// Why a request is not served: 401 (nobody), 403 (not allowed) or 500 (no answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub message: String,
}

impl Refusal {
    fn new(status: u16, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }
}

/// The caller: the certificate's user when one was verified, else the token's.
pub async fn authenticate(
    certificate_user: Option<UserInfo>,
    headers: &HeaderMap,
    reviewer: &dyn AccessReviewer,
) -> Result<UserInfo, Refusal> {
    if let Some(user) = certificate_user {
        return Ok(user);
    }
    let token = headers
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token)
        .ok_or_else(|| Refusal::new(401, "Unauthorized"))?;
    match reviewer.review_token(token).await {
        Ok(Some(user)) => Ok(user),
        Ok(None) => Err(Refusal::new(401, "Unauthorized")),
        Err(e) => {
            tracing::warn!(error = %e, "kubelet API: token review failed");
            Err(Refusal::new(401, "Unauthorized"))
        }
    }
}

/// `Ok` when the API server allows `user` the request's access to `node`; the message
/// of a refusal is the kubelet's.
pub async fn authorize(
    user: &UserInfo,
    method: &str,
    path: &str,
    node: &str,
    reviewer: &dyn AccessReviewer,
) -> Result<(), Refusal> {
    let access = node_access(method, path, node);
    match reviewer.review_access(user, &access).await {
        Ok((true, _)) => Ok(()),
        Ok((false, reason)) => {
            tracing::info!(user = %user.name, verb = %access.verb, subresource = access.subresource, %reason, "kubelet API: request forbidden");
            Err(Refusal::new(
                403,
                format!(
                    "Forbidden (user={}, verb={}, resource={}, subresource={})",
                    user.name, access.verb, access.resource, access.subresource
                ),
            ))
        }
        Err(e) => {
            tracing::warn!(error = %e, user = %user.name, "kubelet API: access review failed");
            Err(Refusal::new(
                500,
                format!(
                    "Authorization error (user={}, verb={}, resource={}, subresource={})",
                    user.name, access.verb, access.resource, access.subresource
                ),
            ))
        }
    }
}
