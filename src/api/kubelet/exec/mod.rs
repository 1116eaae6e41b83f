//! `/exec/{namespace}/{pod}/{container}`: a command in a running container with its
//! stdin, stdout and stderr streamed to the caller over a websocket (the protocol
//! kubectl 1.30+ asks for first), and its exit code as the final status.

pub mod channel;
mod process;
pub mod request;
mod websocket;

use hyper::Request;
use hyper::Response;
use hyper::body::Incoming;

use super::KubeletApiState;
use crate::api::server::{Body, respond};
use request::ExecRequest;

const TEXT: &str = "text/plain; charset=utf-8";

pub fn exec(
    state: &KubeletApiState,
    namespace: &str,
    pod: &str,
    container: &str,
    req: Request<Incoming>,
) -> Response<Body> {
    let Some(request) = ExecRequest::parse(req.uri().query()) else {
        return respond(400, TEXT, b"you must specify at least 1 command\n".to_vec());
    };
    if !websocket::is_websocket(&req) {
        // SPDY/3.1 (older kubectl, or an API server that speaks it to the kubelet) is not
        // served: kubectl 1.30+ falls back to it only when this answer is not a 101.
        return respond(
            400,
            TEXT,
            b"this node serves exec over websockets (v5.channel.k8s.io, v4.channel.k8s.io) only; SPDY is not supported\n"
                .to_vec(),
        );
    }
    let (rec, restarts) = match super::routes::find_container(state, namespace, pod, container) {
        Ok(found) => found,
        Err(refused) => return super::routes::text(404, &refused.to_string()),
    };
    let running = crate::api::routes::container_status(&rec, container)
        .and_then(|c| c.state)
        .is_some_and(|s| s.running.is_some());
    if !running {
        return respond(
            400,
            TEXT,
            format!("container {container} is not running; exec needs a running container\n")
                .into_bytes(),
        );
    }
    let attempt = crate::model::convert::non_negative_u32(restarts);
    let container_id = crate::disk::container_id(rec.uid(), container, attempt);
    let libcontainer_root = state.layout.libcontainer_root();
    let exe = state.podhost_exe.clone();
    tracing::info!(pod = %format!("{namespace}/{pod}"), container, command = ?request.command, "kubelet API: exec");
    websocket::upgrade(req, move || {
        process::spawn(&exe, &libcontainer_root, &container_id, &request)
            .map(|child| websocket::Session { child, request })
            .map_err(|source| super::KubeletRequestError::ExecHelper { exe, source })
    })
}
