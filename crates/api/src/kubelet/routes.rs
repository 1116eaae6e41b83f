//! The kubelet API's paths, behind the authentication and authorization gate.

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use k8s_openapi::List;
use k8s_openapi::api::core::v1::Pod;

use super::gate::{authenticate, authorize};
use super::{KubeletApiState, KubeletRequestError};
use crate::query::parse_query;
use crate::server::{Body, ok_json, respond};
use podhost_model::kubelet_auth::UserInfo;
use podhost_status::PodRecord;

const TEXT: &str = "text/plain; charset=utf-8";

pub(super) fn text(status: u16, message: &str) -> Response<Body> {
    let mut body = message.to_string();
    if !body.ends_with('\n') {
        body.push('\n');
    }
    respond(status, TEXT, body.into_bytes())
}

pub async fn handle(
    state: Arc<KubeletApiState>,
    certificate_user: Option<UserInfo>,
    req: Request<Incoming>,
) -> Response<Body> {
    let reviewer = state.reviewer.as_ref();
    let user = match authenticate(certificate_user, req.headers(), reviewer).await {
        Ok(user) => user,
        Err(refused) => return text(refused.status, &refused.message),
    };
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    if let Err(refused) = authorize(&user, method.as_str(), &path, &state.node_name, reviewer).await
    {
        return text(refused.status, &refused.message);
    }
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (&method, parts.as_slice()) {
        (&Method::GET, ["healthz"]) => text(200, "ok"),
        (&Method::GET, ["pods"]) => ok_json(&pod_list(&state)),
        (&Method::GET, ["containerLogs", namespace, pod, container]) => {
            let query = parse_query(req.uri().query());
            match find_container(&state, namespace, pod, container) {
                Ok((rec, restarts)) => {
                    // The kubelet's refusal is plain text, which kubectl shows as is
                    // ("Error from server (BadRequest): container … is waiting to start").
                    let previous = query.get("previous").is_some_and(|v| v == "true");
                    let status = crate::routes::container_status(&rec, container);
                    if let Err(message) = podhost_model::log_target::log_attempt(
                        status.as_ref(),
                        rec.name(),
                        container,
                        previous,
                    ) {
                        return text(400, &message.to_string());
                    }
                    crate::container_logs::container_logs(
                        &state.layout,
                        &rec,
                        container,
                        restarts,
                        &query,
                    )
                    .await
                }
                Err(refused) => text(404, &refused.to_string()),
            }
        }
        (&Method::GET | &Method::POST, ["exec", namespace, pod, container]) => {
            super::exec::exec(&state, namespace, pod, container, req)
        }
        // The API server may add the pod's UID; the name already picks the pod.
        (&Method::GET | &Method::POST, ["portForward", namespace, pod, ..]) => {
            match state.store.find_pod(Some(namespace), pod).ok() {
                Some(rec) => {
                    super::port_forward::port_forward(rec, state.port_forward.clone(), req)
                }
                None => text(
                    404,
                    &KubeletRequestError::NoSuchPod {
                        namespace: namespace.to_string(),
                        pod: pod.to_string(),
                    }
                    .to_string(),
                ),
            }
        }
        (&Method::GET, ["metrics"]) => {
            let accept = req
                .headers()
                .get(hyper::header::ACCEPT)
                .and_then(|v| v.to_str().ok());
            crate::stats_routes::daemon_metrics(&state.store, accept)
        }
        (
            &Method::GET,
            ["stats", "summary"] | ["metrics", "cadvisor"] | ["metrics", "resource"],
        ) => {
            let Some(stats) = &state.stats else {
                return text(503, "statistics are not collected by this server");
            };
            match parts.as_slice() {
                ["stats", "summary"] => crate::stats_routes::stats_summary(stats).await,
                ["metrics", "cadvisor"] => crate::stats_routes::metrics_cadvisor(stats).await,
                _ => crate::stats_routes::metrics_resource(stats).await,
            }
        }
        _ => text(404, &format!("404 page not found: {path}")),
    }
}

fn pod_list(state: &KubeletApiState) -> List<Pod> {
    state.store.pod_list()
}

/// The pod and the container's restart count; the 404 message in the kubelet's words
/// when either is missing.
pub(super) fn find_container(
    state: &KubeletApiState,
    namespace: &str,
    pod: &str,
    container: &str,
) -> Result<(PodRecord, i32), KubeletRequestError> {
    let Some(rec) = state.store.find_pod(Some(namespace), pod).ok() else {
        return Err(KubeletRequestError::NoSuchPod {
            namespace: namespace.to_string(),
            pod: pod.to_string(),
        });
    };
    let wanted = container.to_string();
    crate::routes::pick_container(&rec, Some(&wanted))?;
    let restarts = crate::routes::restart_count(&rec, container).unwrap_or(0);
    Ok((rec, restarts))
}
