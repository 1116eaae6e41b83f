//! The kubelet API asks the API server who a token is and what a user may do; the API
//! module only knows this trait (the daemon wires the cluster client in), so that it
//! does not depend on `cluster`.

use futures::future::BoxFuture;

use podhost_model::kubelet_auth::{NodeAccess, UserInfo};

/// A failed review (the API server unreachable, or refusing the node's own request).
pub type ReviewError = Box<dyn std::error::Error + Send + Sync>;

/// TokenReview and SubjectAccessReview.
pub trait AccessReviewer: Send + Sync + std::fmt::Debug {
    /// The token's user; `Ok(None)` when it authenticates nobody.
    fn review_token<'a>(
        &'a self,
        token: &'a str,
    ) -> BoxFuture<'a, Result<Option<UserInfo>, ReviewError>>;

    /// Whether `user` may do `access`, and the reason given.
    fn review_access<'a>(
        &'a self,
        user: &'a UserInfo,
        access: &'a NodeAccess,
    ) -> BoxFuture<'a, Result<(bool, String), ReviewError>>;
}
