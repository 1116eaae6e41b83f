//! `POST /pods/NAME/portforward?port=N[&uid=UID]` (`podhost port-forward`): one TCP
//! connection into a pod per request. The daemon connects first, so that a refused
//! port is an ordinary error answer naming the pod, the port and the reason; only then
//! is the request answered with `101 Switching Protocols`, and from there the bytes of
//! the unix-socket connection and of the pod's TCP connection are spliced both ways,
//! each direction's end (a half-close) passed on to the other side.

use std::collections::HashMap;

use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

use super::request_error::RequestError;
use super::server::{ApiState, Body, error, respond};
use podhost_status::PodRecord;

/// The `Upgrade:` protocol of a port-forward request: raw TCP bytes after the answer.
pub const PORT_FORWARD_UPGRADE: &str = "tcp";

/// Each direction's copy buffer, on both ends of the forward (512 KiB per connection in
/// each process). With tokio's default 8 KiB a large download through the forward's two
/// extra hops ran at 19% of the pod's loopback; with 256 KiB at 51-58%
/// (`scripts/bench-port-forward.sh`).
pub const PORT_FORWARD_BUFFER: usize = 256 << 10;

/// Handles one port-forward request for the pod `rec`.
pub async fn port_forward(
    state: &ApiState,
    rec: PodRecord,
    query: &HashMap<String, String>,
    mut req: Request<Incoming>,
) -> Response<Body> {
    let checked = check_request(&rec, query, &req).and_then(|()| parse_port(query.get("port")));
    let port = match checked {
        Ok(p) => p,
        Err(e) => return error(e.status(), e.to_string()),
    };
    let mut pod_stream = match state.port_forward.connect(&rec, port).await {
        Ok(s) => s,
        Err(refused) => return error(refused.status, refused.message),
    };
    let upgrade = hyper::upgrade::on(&mut req);
    let (pod, uid) = (rec.name().to_string(), rec.uid().to_string());
    tokio::spawn(async move {
        let mut client = match upgrade.await {
            Ok(u) => TokioIo::new(u),
            Err(e) => {
                tracing::warn!(pod, port, error = %e, "port-forward: the client's upgrade failed");
                return;
            }
        };
        let spliced = tokio::io::copy_bidirectional_with_sizes(
            &mut client,
            &mut pod_stream,
            PORT_FORWARD_BUFFER,
            PORT_FORWARD_BUFFER,
        );
        match spliced.await {
            Ok((to_pod, from_pod)) => {
                tracing::debug!(
                    pod,
                    uid,
                    port,
                    to_pod,
                    from_pod,
                    "port-forward connection ended"
                )
            }
            Err(e) => {
                tracing::debug!(pod, uid, port, error = %e, "port-forward connection broke")
            }
        }
    });
    let mut answer = respond(101, "application/octet-stream", Vec::new());
    let headers = answer.headers_mut();
    headers.insert(
        hyper::header::CONNECTION,
        hyper::header::HeaderValue::from_static("Upgrade"),
    );
    headers.insert(
        hyper::header::UPGRADE,
        hyper::header::HeaderValue::from_static(PORT_FORWARD_UPGRADE),
    );
    headers.remove(hyper::header::CONTENT_TYPE);
    answer
}

/// The request asks for an upgrade, names the pod's current instance (when `uid=` is
/// given) and the pod runs.
fn check_request(
    rec: &PodRecord,
    query: &HashMap<String, String>,
    req: &Request<Incoming>,
) -> Result<(), RequestError> {
    let upgrade = req
        .headers()
        .get(hyper::header::UPGRADE)
        .and_then(|v| v.to_str().ok());
    if !upgrade.is_some_and(|u| u.eq_ignore_ascii_case(PORT_FORWARD_UPGRADE)) {
        return Err(RequestError::NoUpgrade {
            protocol: PORT_FORWARD_UPGRADE,
        });
    }
    if let Some(wanted) = query.get("uid").filter(|u| u.as_str() != rec.uid()) {
        return Err(RequestError::PodReplaced {
            pod: rec.name().to_string(),
            wanted: wanted.clone(),
            now: rec.uid().to_string(),
        });
    }
    let phase = rec.phase().unwrap_or("Pending");
    if phase != "Running" {
        return Err(RequestError::PodNotRunning {
            pod: rec.name().to_string(),
            phase: phase.to_string(),
        });
    }
    Ok(())
}

/// `port=N`: a TCP port, 1 to 65535.
fn parse_port(value: Option<&String>) -> Result<u16, RequestError> {
    match value.map(|v| v.parse::<u16>()) {
        Some(Ok(p)) if p > 0 => Ok(p),
        _ => Err(RequestError::BadPort {
            value: value.cloned().unwrap_or_default(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_port;

    #[test]
    fn ports_are_one_to_65535() {
        assert_eq!(parse_port(Some(&"80".into())).ok(), Some(80));
        assert_eq!(parse_port(Some(&"65535".into())).ok(), Some(65535));
        for bad in ["0", "65536", "-1", "http", ""] {
            let e = parse_port(Some(&bad.into())).unwrap_err().to_string();
            assert!(e.contains("1-65535"), "{bad}: {e}");
        }
        let e = parse_port(None).unwrap_err();
        assert_eq!(e.status(), 400);
        assert!(e.to_string().contains("port=\"\""), "{e}");
    }
}
