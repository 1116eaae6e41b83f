//! `/exec/{namespace}/{pod}/{container}`: a command in a running container with its
//! stdin, stdout and stderr (or its terminal, with `tty`) streamed to the caller over a
//! websocket (the protocol kubectl 1.30+ asks for first) or SPDY/3.1 (kubectl with
//! websockets off, and API servers before 1.30), and its exit code as the final status.

pub mod channel;
mod process;
mod pty;
pub mod request;
mod resize;
mod spdy;
mod websocket;

use hyper::Request;
use hyper::Response;
use hyper::body::Incoming;

use super::KubeletApiState;
use crate::server::{Body, respond};
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
    let spdy = super::spdy::handshake::is_spdy(&req);
    if !spdy && !websocket::is_websocket(&req) {
        return respond(
            400,
            TEXT,
            b"exec needs an upgrade: websocket (v5.channel.k8s.io, v4.channel.k8s.io, channel.k8s.io) or SPDY/3.1 (v4, v3, v2.channel.k8s.io)\n"
                .to_vec(),
        );
    }
    let (rec, restarts) = match super::routes::find_container(state, namespace, pod, container) {
        Ok(found) => found,
        Err(refused) => return super::routes::text(404, &refused.to_string()),
    };
    let running = crate::routes::container_status(&rec, container)
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
    let attempt = podhost_model::convert::non_negative_u32(restarts);
    let container_id = podhost_disk::container_id(rec.uid(), container, attempt);
    let libcontainer_root = state.layout.libcontainer_root();
    let exe = state.podhost_exe.clone();
    tracing::info!(pod = %format!("{namespace}/{pod}"), container, command = ?request.command, tty = request.tty, spdy, "kubelet API: exec");
    // Runs once the protocol is up (and, over SPDY, once the client's streams are open).
    let start = {
        let request = request.clone();
        move |size| async move {
            process::start(&exe, &libcontainer_root, &container_id, request, size)
                .await
                .map_err(|source| super::KubeletRequestError::ExecHelper { exe, source })
        }
    };
    if spdy {
        spdy::upgrade(req, request, start)
    } else {
        websocket::upgrade(req, request.tty, start)
    }
}
