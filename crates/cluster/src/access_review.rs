//! The kubelet API's delegated authentication and authorization: a bearer token is
//! checked with a TokenReview, every caller's request with a SubjectAccessReview of
//! `nodes/<subresource>` (`--authentication-token-webhook`, `--authorization-mode
//! Webhook`, the kubelet's settings in a kubeadm cluster). The node's own credentials
//! may create both (the Node authorizer's node rules); a review that fails is an error
//! for the caller, never an answer.

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;

use super::ClusterError;
use podhost_model::kubelet_auth::{NodeAccess, UserInfo};

/// The user a token belongs to, or `None` when the API server says it authenticates
/// nobody.
pub async fn review_token(
    client: &kube::Client,
    token: &str,
) -> Result<Option<UserInfo>, ClusterError> {
    let reviews: Api<TokenReview> = Api::all(client.clone());
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: token.to_string(),
            audiences: None,
        },
        ..TokenReview::default()
    };
    let answer = reviews
        .create(&PostParams::default(), &review)
        .await
        .map_err(ClusterError::api("reviewing a bearer token (TokenReview)"))?;
    let Some(status) = answer.status else {
        return Ok(None);
    };
    if status.authenticated != Some(true) {
        return Ok(None);
    }
    let user = status.user.unwrap_or_default();
    Ok(Some(UserInfo {
        name: user.username.unwrap_or_default(),
        uid: user.uid.unwrap_or_default(),
        groups: user.groups.unwrap_or_default(),
        extra: user.extra.unwrap_or_default().into_iter().collect(),
    }))
}

/// Whether the API server lets `user` do `access`; the reason, when it gives one.
pub async fn review_access(
    client: &kube::Client,
    user: &UserInfo,
    access: &NodeAccess,
) -> Result<(bool, String), ClusterError> {
    let reviews: Api<SubjectAccessReview> = Api::all(client.clone());
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.name.clone()),
            uid: (!user.uid.is_empty()).then(|| user.uid.clone()),
            groups: Some(user.groups.clone()),
            extra: (!user.extra.is_empty()).then(|| user.extra.clone().into_iter().collect()),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(access.verb.clone()),
                group: Some(String::new()),
                version: Some("v1".into()),
                resource: Some(access.resource.into()),
                subresource: Some(access.subresource.into()),
                name: Some(access.name.clone()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let answer = reviews
        .create(&PostParams::default(), &review)
        .await
        .map_err(ClusterError::api(format!(
            "reviewing {}'s access to nodes/{} (SubjectAccessReview)",
            user.name, access.subresource
        )))?;
    let status = answer.status.unwrap_or_default();
    Ok((status.allowed, status.reason.unwrap_or_default()))
}
