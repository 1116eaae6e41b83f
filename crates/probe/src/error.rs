//! podhost's own failures while running a handler (they make an `Unknown` outcome).

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("cannot reach the pod's network namespace: {0}")]
    Namespace(#[from] podhost_runtime::RuntimeError),
    #[error("cannot resolve {host}: {source}")]
    Resolve {
        host: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot run `podhost exec-helper` ({exe}): {source}")]
    Helper {
        exe: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid HTTP request for {url}: {message}")]
    Request { url: String, message: String },
}

/// Why a gRPC health call did not produce an answer (the probe fails with it).
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    #[error("{0}")]
    Transport(#[from] hyper::Error),
    #[error("HTTP status {0}")]
    HttpStatus(hyper::StatusCode),
    #[error("reading the answer: {0}")]
    Body(String),
    #[error("rpc error: code = {code} desc = {message}")]
    Status { code: String, message: String },
    #[error("rpc error: no grpc-status in the answer")]
    NoStatus,
    #[error("rpc error: the answer is not a HealthCheckResponse")]
    NotHealthResponse,
}
