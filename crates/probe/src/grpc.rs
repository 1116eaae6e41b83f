//! grpc: the standard health check, `grpc.health.v1.Health/Check`, over HTTP/2
//! (cleartext, or TLS without verification for `mode: TLS`); SERVING is success.
//!
//! The two protobuf messages are one optional field each, so they are encoded here by
//! hand on hyper's HTTP/2 client rather than pulling in a gRPC and protobuf stack.

use std::time::Duration;

use bytes::{Buf, Bytes};
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{CONTENT_TYPE, TE, USER_AGENT};
use hyper::{Request, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite};

use super::error::RpcError;
use super::{HandlerTarget, net, tls};
use podhost_model::probe::Outcome;

const METHOD: &str = "/grpc.health.v1.Health/Check";
/// A health answer is a few bytes; anything beyond this is not one.
const MAX_RESPONSE: usize = 64 * 1024;

/// `HealthCheckRequest{service}` in a gRPC message frame (uncompressed, length-prefixed).
pub fn request_frame(service: &str) -> Bytes {
    let mut message = Vec::new();
    if !service.is_empty() {
        message.push(0x0a); // field 1, length-delimited
        push_varint(&mut message, service.len() as u64);
        message.extend_from_slice(service.as_bytes());
    }
    let mut frame = Vec::with_capacity(5 + message.len());
    frame.push(0); // not compressed
    frame.extend_from_slice(
        &u32::try_from(message.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    frame.extend_from_slice(&message);
    Bytes::from(frame)
}

fn push_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push(u8::try_from(n & 0x7f).unwrap_or_default() | 0x80);
        n >>= 7;
    }
    out.push(u8::try_from(n).unwrap_or_default());
}

fn read_varint(buf: &mut &[u8]) -> Option<u64> {
    let mut n = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.first()?;
        buf.advance(1);
        n |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(n);
        }
    }
    None
}

/// The `status` of a `HealthCheckResponse` frame (0 when absent, as protobuf's default).
pub fn response_status(frame: &[u8]) -> Option<u64> {
    let (header, rest) = frame.split_at_checked(5)?;
    if header[0] != 0 {
        return None; // compressed: never asked for
    }
    let len = usize::try_from(u32::from_be_bytes([
        header[1], header[2], header[3], header[4],
    ]))
    .ok()?;
    let mut msg = rest.get(..len)?;
    let mut status = 0;
    while !msg.is_empty() {
        let key = read_varint(&mut msg)?;
        match (key >> 3, key & 7) {
            (1, 0) => status = read_varint(&mut msg)?,
            (_, 0) => {
                read_varint(&mut msg)?;
            }
            (_, 2) => {
                let n = usize::try_from(read_varint(&mut msg)?).ok()?;
                msg = msg.get(n..)?;
            }
            (_, 1) => msg = msg.get(8..)?,
            (_, 5) => msg = msg.get(4..)?,
            _ => return None,
        }
    }
    Some(status)
}

fn status_name(status: u64) -> String {
    match status {
        0 => "UNKNOWN".into(),
        1 => "SERVING".into(),
        2 => "NOT_SERVING".into(),
        3 => "SERVICE_UNKNOWN".into(),
        n => n.to_string(),
    }
}

/// gRPC status codes as Go's `codes.Code` prints them.
fn code_name(code: &str) -> &str {
    const NAMES: [&str; 17] = [
        "OK",
        "Canceled",
        "Unknown",
        "InvalidArgument",
        "DeadlineExceeded",
        "NotFound",
        "AlreadyExists",
        "PermissionDenied",
        "ResourceExhausted",
        "FailedPrecondition",
        "Aborted",
        "OutOfRange",
        "Unimplemented",
        "Internal",
        "Unavailable",
        "DataLoss",
        "Unauthenticated",
    ];
    code.parse::<usize>()
        .ok()
        .and_then(|i| NAMES.get(i))
        .copied()
        .unwrap_or(code)
}

/// Checks `service` ("" = the server as a whole) on the pod's `port`.
pub async fn check(
    target: &HandlerTarget,
    port: u16,
    service: Option<&str>,
    tls: bool,
    timeout: Option<Duration>,
) -> Outcome {
    let stream = match net::open(target, None, port, timeout).await {
        Ok(s) => s,
        Err(Outcome::Failure(e)) => {
            return Outcome::Failure(format!(
                "timeout: failed to connect service \"{}:{port}\": {e}",
                target.pod_address()
            ));
        }
        Err(o) => return o,
    };
    let service = service.unwrap_or_default();
    if tls {
        match tls::connect(stream, &target.pod_address().to_string(), b"h2").await {
            Ok(s) => call(s, target.pod_address(), port, service).await,
            Err(o) => o,
        }
    } else {
        call(stream, target.pod_address(), port, service).await
    }
}

async fn call<I>(io: I, pod: std::net::IpAddr, port: u16, service: &str) -> Outcome
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let failed = |e: &dyn std::fmt::Display| {
        Outcome::Failure(format!("error: health rpc probe failed: {e}"))
    };
    let (mut sender, connection) =
        match hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(io)).await {
            Ok(x) => x,
            Err(e) => return failed(&e),
        };
    let driver = tokio::spawn(connection);
    let uri = format!("http://{}{METHOD}", std::net::SocketAddr::new(pod, port));
    let request = Request::post(uri)
        .header(CONTENT_TYPE, "application/grpc")
        .header(TE, "trailers")
        .header(USER_AGENT, podhost_model::probe::USER_AGENT)
        .body(Full::new(request_frame(service)));
    let outcome = match request {
        Ok(request) => exchange(&mut sender, request)
            .await
            .unwrap_or_else(|e| failed(&e)),
        Err(e) => Outcome::Unknown(format!("invalid gRPC request: {e}")),
    };
    driver.abort();
    outcome
}

async fn exchange(
    sender: &mut hyper::client::conn::http2::SendRequest<Full<Bytes>>,
    request: Request<Full<Bytes>>,
) -> Result<Outcome, RpcError> {
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| RpcError::Body(e.to_string()))?;
    if response.status() != StatusCode::OK {
        return Err(RpcError::HttpStatus(response.status()));
    }
    let head = response.headers().clone();
    let collected = Limited::new(response.into_body(), MAX_RESPONSE)
        .collect()
        .await
        .map_err(|e| RpcError::Body(e.to_string()))?;
    let trailers = collected.trailers().cloned().unwrap_or_default();
    let data = collected.to_bytes();
    // A trailers-only answer carries grpc-status in the headers.
    let field = |name: &str| {
        trailers
            .get(name)
            .or_else(|| head.get(name))
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    match field("grpc-status").as_deref() {
        Some("0") => {}
        Some(code) => {
            return Err(RpcError::Status {
                code: code_name(code).to_string(),
                message: field("grpc-message").unwrap_or_default(),
            });
        }
        None => return Err(RpcError::NoStatus),
    }
    match response_status(&data) {
        Some(1) => Ok(Outcome::Success),
        Some(s) => Ok(Outcome::Failure(format!(
            "service unhealthy (responded with \"{}\")",
            status_name(s)
        ))),
        None => Err(RpcError::NotHealthResponse),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_frames() {
        assert_eq!(&request_frame("")[..], &[0, 0, 0, 0, 0]);
        assert_eq!(
            &request_frame("db")[..],
            &[0, 0, 0, 0, 4, 0x0a, 2, b'd', b'b']
        );
    }

    #[test]
    fn response_status_is_field_one() {
        assert_eq!(response_status(&[0, 0, 0, 0, 2, 0x08, 1]), Some(1));
        assert_eq!(
            response_status(&[0, 0, 0, 0, 0]),
            Some(0),
            "absent = UNKNOWN"
        );
        // An unknown length-delimited field before it is skipped.
        assert_eq!(
            response_status(&[0, 0, 0, 0, 5, 0x12, 1, b'x', 0x08, 2]),
            Some(2)
        );
        assert_eq!(
            response_status(&[1, 0, 0, 0, 2, 0x08, 1]),
            None,
            "compressed"
        );
        assert_eq!(response_status(&[0, 0, 0, 0, 9, 0x08]), None, "short");
    }

    #[test]
    fn varints_round_trip() {
        for n in [0u64, 1, 127, 128, 300, u64::from(u32::MAX)] {
            let mut v = Vec::new();
            push_varint(&mut v, n);
            assert_eq!(read_varint(&mut v.as_slice()), Some(n));
        }
    }
}
