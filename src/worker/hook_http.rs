//! The httpGet hook handler. Wired to the probe module's HTTP client when it lands.

use k8s_openapi::api::core::v1::HTTPGetAction;

use super::context::{Ctx, PodInfo};

/// Performs `get` for a hook; `Some(why)` when it failed.
pub async fn http_get(_ctx: &Ctx, _pod: &PodInfo, get: &HTTPGetAction) -> Option<String> {
    Some(format!(
        "httpGet hooks are not available yet (path {:?})",
        get.path
    ))
}
