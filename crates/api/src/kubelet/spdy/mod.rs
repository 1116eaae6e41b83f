//! SPDY/3.1, the stream multiplexing `kubectl exec` and `kubectl port-forward` still
//! speak when websockets are off (or the API server in between is older): the kubelet
//! answers `Upgrade: SPDY/3.1` with a 101 and then serves SPDY/3 frames on the
//! connection. `frame` and `headers` are pure encoding; `session` does the I/O.

pub mod frame;
pub mod handshake;
pub mod headers;
pub mod session;
pub mod window;

/// Why a SPDY connection ends early.
#[derive(Debug, thiserror::Error)]
pub enum SpdyError {
    #[error(transparent)]
    Frame(#[from] frame::FrameError),
    #[error(transparent)]
    Headers(#[from] headers::HeaderError),
    #[error("the connection's writer is gone (the client went away)")]
    WriterGone,
}

/// The `Upgrade` token of a SPDY connection.
pub const UPGRADE: &str = "SPDY/3.1";
