//! Request routing and handlers.

use std::path::PathBuf;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use k8s_openapi::List;
use k8s_openapi::api::core::v1::{ContainerStatus, EphemeralContainer, Pod};

use super::query::parse_query;
use super::request_error::RequestError;
use super::server::{ApiState, Body, error, ndjson_response, ok_json, respond};
use super::types::{DaemonInfo, ExecTarget, LoadRequest, LoadResponse};
use podhost_disk::container_id;
use podhost_status::PodRecord;

pub async fn handle(state: Arc<ApiState>, req: Request<Incoming>) -> Response<Body> {
    let path = req.uri().path().to_string();
    let query = parse_query(req.uri().query());
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let method = req.method().clone();
    match (method, parts.as_slice()) {
        (Method::GET, ["healthz"]) => respond(200, "text/plain", b"ok".to_vec()),
        (Method::GET, ["info"]) => ok_json(&daemon_info(&state)),
        (Method::GET, ["pods"]) if super::pod_watch::wants_watch(&query) => {
            super::pod_watch::watch_pods(&state, query.get("namespace").cloned())
        }
        (Method::GET, ["pods"]) => ok_json(&pod_list(&state, query.get("namespace"))),
        (Method::GET, ["namespaces", namespace, "pods"])
            if super::pod_watch::wants_watch(&query) =>
        {
            super::pod_watch::watch_pods(&state, Some(namespace.to_string()))
        }
        (Method::GET, ["namespaces", namespace, "pods"]) => {
            ok_json(&pod_list(&state, Some(&namespace.to_string())))
        }
        (method, ["pods", name, rest @ ..]) => {
            let namespace = query.get("namespace").cloned();
            let at = PodAt {
                namespace: namespace.as_deref(),
                name,
                rest,
            };
            pod_route(&state, method, at, &query, req).await
        }
        (method, ["namespaces", namespace, "pods", name, rest @ ..]) => {
            let at = PodAt {
                namespace: Some(namespace),
                name,
                rest,
            };
            pod_route(&state, method, at, &query, req).await
        }
        (Method::GET, ["events"]) => ok_json(&all_events(
            &state,
            query.get("namespace").map(String::as_str),
            query.get("for").map(String::as_str),
        )),
        (Method::GET, ["namespaces", namespace, "events"]) => ok_json(&all_events(
            &state,
            Some(namespace),
            query.get("for").map(String::as_str),
        )),
        (Method::GET, ["node"]) => ok_json(&node(&state)),
        (Method::GET, ["node", "conditions"]) => ok_json(&state.store.node_conditions()),
        (Method::GET, ["images"]) => match state.images.list() {
            Ok(list) => ok_json(&list),
            Err(e) => error(500, e.to_string()),
        },
        (Method::POST, ["images", "load"]) => load(&state, req).await,
        (Method::POST, ["images", "pull"]) => pull(&state, req).await,
        (Method::POST, ["images", "remove"]) => remove_image(&state, req).await,
        (Method::POST, ["gc"]) => gc(&state).await,
        (Method::GET, ["stats", "summary"]) => {
            super::stats_routes::stats_summary(&state.stats).await
        }
        (Method::GET, ["metrics", "cadvisor"]) => {
            super::stats_routes::metrics_cadvisor(&state.stats).await
        }
        (_, _) => error(404, format!("no such API path: {path}")),
    }
}

/// The node with its current conditions.
fn node(state: &ApiState) -> k8s_openapi::api::core::v1::Node {
    let mut node = (*state.node).clone();
    let conditions = state.store.node_conditions();
    if !conditions.is_empty() {
        node.status.get_or_insert_default().conditions = Some(conditions);
    }
    node
}

/// Which root dir and image store this daemon serves.
fn daemon_info(state: &ApiState) -> DaemonInfo {
    DaemonInfo {
        root_dir: state.images.root_dir().display().to_string(),
        image_store: state.images.images_dir().display().to_string(),
    }
}

/// A pod's path: `/pods/NAME/REST…` (`?namespace=NS`, or any one namespace) or
/// `/namespaces/NS/pods/NAME/REST…`, as the API server's.
struct PodAt<'a> {
    namespace: Option<&'a str>,
    name: &'a str,
    rest: &'a [&'a str],
}

/// The requests about one pod; an ambiguous name is refused (409) with its candidates.
async fn pod_route(
    state: &ApiState,
    method: Method,
    at: PodAt<'_>,
    query: &std::collections::HashMap<String, String>,
    req: Request<Incoming>,
) -> Response<Body> {
    let known = matches!(
        (&method, at.rest),
        (&Method::GET, [] | ["events" | "exec" | "log"])
            | (&Method::POST, ["ephemeral" | "portforward"])
    );
    if !known {
        return error(404, format!("no such API path: {}", req.uri().path()));
    }
    let rec = match state.store.find_pod(at.namespace, at.name) {
        Ok(rec) => rec,
        Err(e) => return error(e.status(), e.to_string()),
    };
    match at.rest {
        [] => ok_json(&rec.to_pod()),
        ["events"] => ok_json(&rec.events_with_namespace()),
        ["exec"] => exec_target(state, rec, query.get("container")),
        ["log"] => logs(state, rec, query).await,
        ["ephemeral"] => add_ephemeral(state, rec, req).await,
        _ => super::port_forward::port_forward(state, rec, query, req).await,
    }
}

/// Node events and every pod's events — those of pods that went in the last hour
/// too — oldest first; only `namespace`'s (the node's count as `default`'s, as the API
/// server keeps them), only those `about` an object (`pod/NAME`, `node/NAME`).
fn all_events(
    state: &ApiState,
    namespace: Option<&str>,
    about: Option<&str>,
) -> Vec<podhost_status::Event> {
    let mut all = state.store.node_events();
    all.extend(state.store.departed_events());
    for rec in state.store.pods() {
        all.extend(rec.events_with_namespace());
    }
    all.retain(|e| namespace.is_none_or(|ns| e.listed_namespace() == ns));
    all.retain(|e| about.is_none_or(|object| e.is_about(object)));
    all.sort_by_key(|e| e.time);
    all
}

/// A `v1.PodList` (apiVersion/kind set by the List type) of every pod, or of the pods
/// of `namespace`.
fn pod_list(state: &ApiState, namespace: Option<&String>) -> List<Pod> {
    let mut list = state.store.pod_list();
    if let Some(ns) = namespace {
        list.items
            .retain(|p| p.metadata.namespace.as_deref().unwrap_or("default") == ns);
    }
    list
}

/// The container to use: the named one (a container, init container or ephemeral
/// container), or the pod's first container (as kubectl defaults).
pub(super) fn pick_container(
    rec: &PodRecord,
    wanted: Option<&String>,
) -> Result<String, RequestError> {
    let names: Vec<String> = rec
        .admitted
        .spec
        .as_ref()
        .map(|s| {
            let init = s.init_containers.iter().flatten().map(|c| c.name.clone());
            let ephemeral = s
                .ephemeral_containers
                .iter()
                .flatten()
                .map(|c| c.name.clone());
            s.containers
                .iter()
                .map(|c| c.name.clone())
                .chain(init)
                .chain(ephemeral)
                .collect()
        })
        .unwrap_or_default();
    match wanted {
        Some(w) if names.contains(w) => Ok(w.clone()),
        Some(w) => Err(RequestError::UnknownContainer {
            container: w.clone(),
            pod: rec.name().to_string(),
            choices: names,
        }),
        None => names
            .first()
            .cloned()
            .ok_or_else(|| RequestError::NoContainers {
                pod: rec.name().to_string(),
            }),
    }
}

/// The status of `container`, whichever list it is in.
pub(super) fn container_status(rec: &PodRecord, container: &str) -> Option<ContainerStatus> {
    let status = &rec.status;
    status
        .container_statuses
        .iter()
        .chain(&status.init_container_statuses)
        .chain(&status.ephemeral_container_statuses)
        .flatten()
        .find(|c| c.name == container)
        .cloned()
}

pub(super) fn restart_count(rec: &PodRecord, container: &str) -> Option<i32> {
    container_status(rec, container).map(|c| c.restart_count)
}

fn exec_target(state: &ApiState, rec: PodRecord, wanted: Option<&String>) -> Response<Body> {
    let container = match pick_container(&rec, wanted) {
        Ok(c) => c,
        Err(e) => return error(e.status(), e.to_string()),
    };
    let cs = container_status(&rec, &container);
    let running = cs
        .as_ref()
        .and_then(|c| c.state.as_ref())
        .is_some_and(|s| s.running.is_some());
    let attempt =
        podhost_model::convert::non_negative_u32(cs.map(|c| c.restart_count).unwrap_or(0));
    ok_json(&ExecTarget {
        pod: rec.name().to_string(),
        container: container.clone(),
        libcontainer_root: state.layout.libcontainer_root().display().to_string(),
        container_id: container_id(rec.uid(), &container, attempt),
        running,
    })
}

async fn logs(
    state: &ApiState,
    rec: PodRecord,
    query: &std::collections::HashMap<String, String>,
) -> Response<Body> {
    match pick_container(&rec, query.get("container")) {
        Ok(container) => {
            let restarts = restart_count(&rec, &container).unwrap_or(0);
            super::container_logs::container_logs(&state.layout, &rec, &container, restarts, query)
                .await
        }
        Err(e) => error(e.status(), e.to_string()),
    }
}

/// Pulls an image, streaming progress as JSON lines (`PullProgress`), then a last line
/// `{"error": "..."}` if it failed.
async fn pull(state: &ApiState, req: Request<Incoming>) -> Response<Body> {
    let request: super::types::PullRequest = match super::body::read_json(req, "pull request").await
    {
        Ok(r) => r,
        Err(answer) => return answer,
    };
    let (progress_tx, mut progress_rx) = tokio::sync::mpsc::channel(64);
    let (tx, rx) = tokio::sync::mpsc::channel::<Vec<u8>>(64);
    let puller = state.puller.clone();
    let changed = state.images_changed.clone();
    tokio::spawn(async move {
        let forward_tx = tx.clone();
        let forward = tokio::spawn(async move {
            while let Some(p) = progress_rx.recv().await {
                let mut line = serde_json::to_vec(&p).unwrap_or_default();
                line.push(b'\n');
                if forward_tx.send(line).await.is_err() {
                    break;
                }
            }
        });
        let result = puller.pull(&request.reference, Some(progress_tx)).await;
        let _ = forward.await;
        match result {
            Ok(_) => changed.send_modify(|n| *n += 1),
            Err(e) => {
                let mut line = serde_json::to_vec(&serde_json::json!({ "error": e.to_string() }))
                    .unwrap_or_default();
                line.push(b'\n');
                let _ = tx.send(line).await;
            }
        }
    });
    ndjson_response(rx)
}

/// `podhost debug`: adds the body's ephemeral container to the named running pod.
async fn add_ephemeral(state: &ApiState, rec: PodRecord, req: Request<Incoming>) -> Response<Body> {
    let container: EphemeralContainer =
        match super::body::read_json(req, "ephemeral container").await {
            Ok(c) => c,
            Err(answer) => return answer,
        };
    if container.name.is_empty() || container.image.as_deref().unwrap_or_default().is_empty() {
        return error(400, "an ephemeral container needs a name and an image");
    }
    match state
        .ephemeral
        .add(rec.uid(), rec.name(), container.clone())
        .await
    {
        Ok(()) => ok_json(&container),
        Err(refused) => error(refused.status, refused.message),
    }
}

/// `podhost gc`: a container GC pass, then an image GC pass (same thresholds as the
/// periodic one).
async fn gc(state: &ApiState) -> Response<Body> {
    match state.gc.collect_now().await {
        Ok(outcome) => ok_json(&serde_json::json!({
            "containers_removed": outcome.containers_removed,
            "pod_dirs_removed": outcome.pod_dirs_removed,
            "log_dirs_removed": outcome.log_dirs_removed,
            "images_deleted": outcome.images.deleted,
            "bytes_freed": outcome.images.freed_bytes,
            "target_bytes": outcome.images.target_bytes,
            "shortfall_bytes": outcome.images.shortfall_bytes,
        })),
        Err(e) => error(500, format!("image GC failed: {e}")),
    }
}

/// `podhost rmi`: refuses an image that a pod uses, naming the pods (the rule is
/// `image::check_removable`'s).
async fn remove_image(state: &ApiState, req: Request<Incoming>) -> Response<Body> {
    let request: super::types::PullRequest =
        match super::body::read_json(req, "remove request").await {
            Ok(r) => r,
            Err(answer) => return answer,
        };
    let pods: Vec<podhost_image::PodImages> = state
        .store
        .pods()
        .into_iter()
        .map(|r| podhost_image::PodImages {
            pod: r.name().to_string(),
            references: r
                .admitted
                .spec
                .iter()
                .flat_map(|s| {
                    let init = s.init_containers.iter().flatten().map(|c| c.image.clone());
                    let ephemeral = s.ephemeral_containers.iter().flatten();
                    s.containers
                        .iter()
                        .map(|c| c.image.clone())
                        .chain(init)
                        .chain(ephemeral.map(|c| c.image.clone()))
                })
                .flatten()
                .collect(),
            image_ids: std::iter::once(&r.status)
                .flat_map(|s| {
                    s.container_statuses
                        .iter()
                        .chain(&s.init_container_statuses)
                        .chain(&s.ephemeral_container_statuses)
                        .flatten()
                })
                .map(|c| c.image_id.clone())
                .collect(),
        })
        .collect();
    let leased = state.leases.held();
    let reference =
        match podhost_image::check_removable(&state.images, &request.reference, &pods, &leased) {
            Ok(reference) => reference,
            Err(refused) => return error(409, refused.to_string()),
        };
    let images = state.images.clone();
    let r = reference.clone();
    match tokio::task::spawn_blocking(move || {
        images.remove(&r)?;
        podhost_image::gc::collect_unreferenced(&images)
    })
    .await
    {
        Ok(Ok(freed)) => {
            ok_json(&serde_json::json!({ "removed": reference, "bytes_freed": freed }))
        }
        Ok(Err(e)) => error(404, e.to_string()),
        Err(e) => error(500, e.to_string()),
    }
}

async fn load(state: &ApiState, req: Request<Incoming>) -> Response<Body> {
    let request: LoadRequest = match super::body::read_json(req, "load request").await {
        Ok(r) => r,
        Err(answer) => return answer,
    };
    let images = state.images.clone();
    let path = PathBuf::from(&request.path);
    let name = request.name;
    match tokio::task::spawn_blocking(move || images.load_named(&path, name.as_deref())).await {
        Ok(Ok(references)) => {
            state.images_changed.send_modify(|n| *n += 1);
            ok_json(&LoadResponse { references })
        }
        Ok(Err(e)) => error(400, e.to_string()),
        Err(e) => error(500, e.to_string()),
    }
}
