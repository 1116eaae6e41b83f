//! Retries of registry requests that failed for a reason that may pass: the
//! connection could not be made, broke mid-body or timed out, or the registry
//! answered 5xx or 429. Answers that will not change (404, 401, a digest
//! mismatch, a bad manifest) fail the pull at once; the kubelet-style image pull
//! back-off then takes over.
//!
//! Without this, one reset connection in a 500 MiB layer failed the whole pull
//! and the next attempt came only after the back-off (10 s, then 20 s, ...).

use std::future::Future;
use std::io;
use std::time::{Duration, Instant};

use oci_client::errors::{DigestError, OciDistributionError, OciErrorCode};

use super::error::{Ctx, PullError};
use super::plain_http::answered_tls_in_plain_http;

/// Waits before the 2nd, 3rd and 4th attempt of one request.
pub(super) const BACKOFF: [Duration; 3] = [
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
];

/// A request that failed at the connection after this long is not made again here.
/// A registry that could not be resolved or reached within the resolver's or the
/// connect timeout (5 to 30 s an attempt) will not be reachable a second later, and
/// four such attempts kept a pod in `ContainerCreating` for minutes before it showed
/// `ErrImagePull`. The kubelet's image back-off tries again instead, as it does with
/// containerd, which does not repeat a failed dial either.
const SLOW_CONNECT_FAILURE: Duration = Duration::from_secs(5);

/// Whether a failed attempt is made again: a transient failure is, unless the
/// connection itself failed and took [`SLOW_CONNECT_FAILURE`] or longer to do so.
pub(super) fn worth_retrying(
    transient: bool,
    connect_failure: bool,
    attempt_took: Duration,
) -> bool {
    transient && !(connect_failure && attempt_took >= SLOW_CONNECT_FAILURE)
}

/// Whether `e` is a failure to resolve or connect to the registry (no answer at all).
pub(super) fn oci_is_connect_failure(e: &OciDistributionError) -> bool {
    match e {
        OciDistributionError::RequestError(r) => r.is_connect(),
        _ => false,
    }
}

/// Counts the attempts of one request and says how long to wait before the next.
#[derive(Debug)]
pub(super) struct Attempts {
    made: usize,
    started: Instant,
}

impl Attempts {
    pub(super) fn new() -> Attempts {
        Attempts {
            made: 0,
            started: Instant::now(),
        }
    }

    /// Records a failed attempt; the wait before the next one, or `None` when
    /// every attempt is used.
    pub(super) fn failed(&mut self) -> Option<Duration> {
        let wait = BACKOFF.get(self.made).copied();
        self.made += 1;
        wait
    }

    /// For the final error: "4 attempts over 3.5 s", "1 attempt over 30.0 s".
    pub(super) fn summary(&self) -> String {
        format!(
            "{} attempt{} over {:.1} s",
            self.made,
            if self.made == 1 { "" } else { "s" },
            self.started.elapsed().as_secs_f64()
        )
    }
}

/// Whether a failed `oci_client` request may succeed when made again.
pub(super) fn oci_is_transient(e: &OciDistributionError) -> bool {
    match e {
        OciDistributionError::RequestError(r) => reqwest_is_transient(r),
        OciDistributionError::ServerError { code, .. } => *code >= 500 || *code == 429,
        OciDistributionError::RegistryError { envelope, .. } => envelope
            .errors
            .iter()
            .any(|e| matches!(e.code, OciErrorCode::Toomanyrequests)),
        OciDistributionError::IoError(io) => io_is_transient(io),
        _ => false,
    }
}

/// Whether an error read from a blob stream may pass: any I/O error but a digest
/// mismatch (the content itself is wrong; fetching it again gives the same).
pub(super) fn io_is_transient(e: &io::Error) -> bool {
    match e.get_ref() {
        Some(inner) if inner.downcast_ref::<DigestError>().is_some() => false,
        Some(inner) => inner
            .downcast_ref::<reqwest::Error>()
            .is_none_or(reqwest_is_transient),
        None => true,
    }
}

fn reqwest_is_transient(r: &reqwest::Error) -> bool {
    // A server that does not speak TLS will not start to a second later.
    if answered_tls_in_plain_http(r) {
        return false;
    }
    if let Some(status) = r.status() {
        return status.is_server_error() || status.as_u16() == 429;
    }
    if r.is_connect() || r.is_timeout() || r.is_request() || r.is_body() {
        return true;
    }
    // `Response::bytes_stream` reports a body cut off midway as a decode error
    // wrapping the body error.
    r.is_decode()
        && std::error::Error::source(r)
            .and_then(|s| s.downcast_ref::<reqwest::Error>())
            .is_some_and(reqwest::Error::is_body)
}

/// Runs `request` until it succeeds, fails for good, or every attempt is used;
/// maps the last error with [`Ctx::oci`] (naming `what`), adding how often it was
/// tried when it was tried more than once.
pub(super) async fn oci<T, F, Fut>(ctx: &Ctx, what: &str, mut request: F) -> Result<T, PullError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, OciDistributionError>>,
{
    let mut attempts = Attempts::new();
    loop {
        let began = Instant::now();
        let e = match request().await {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        if oci_is_transient(&e) {
            if !worth_retrying(true, oci_is_connect_failure(&e), began.elapsed()) {
                attempts.failed();
                return Err(with_attempts(ctx.oci(what, e), &attempts));
            }
            if let Some(wait) = attempts.failed() {
                tracing::warn!(reference = %ctx.reference, what, error = %e,
                    retry_in_ms = podhost_model::convert::millis(wait), "registry request failed; retrying");
                tokio::time::sleep(wait).await;
                continue;
            }
            return Err(with_attempts(ctx.oci(what, e), &attempts));
        }
        return Err(ctx.oci(what, e));
    }
}

/// Adds "(N attempts over T s)" to a network or registry error.
pub(super) fn with_attempts(e: PullError, attempts: &Attempts) -> PullError {
    e.map_network_message(|m| format!("{m} ({})", attempts.summary()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_give_the_backoff_then_stop() {
        let mut a = Attempts::new();
        assert_eq!(a.failed(), Some(Duration::from_millis(500)));
        assert_eq!(a.failed(), Some(Duration::from_secs(1)));
        assert_eq!(a.failed(), Some(Duration::from_secs(2)));
        assert_eq!(a.failed(), None);
        assert!(
            a.summary().starts_with("4 attempts over "),
            "{}",
            a.summary()
        );
    }

    #[test]
    fn a_slow_connection_failure_is_left_to_the_image_back_off() {
        let fast = Duration::from_millis(20);
        let slow = SLOW_CONNECT_FAILURE;
        // A refused connection or a body cut short: tried again.
        assert!(worth_retrying(true, true, fast));
        assert!(worth_retrying(true, false, fast));
        // A long download cut midway is still resumed.
        assert!(worth_retrying(true, false, Duration::from_secs(120)));
        // A resolver or connect timeout: not again here.
        assert!(!worth_retrying(true, true, slow));
        assert!(!worth_retrying(true, true, Duration::from_secs(30)));
        // What is not transient never is.
        assert!(!worth_retrying(false, false, fast));
    }

    #[test]
    fn what_is_transient() {
        let server = |code| OciDistributionError::ServerError {
            code,
            url: "http://r/v2/".to_string(),
            message: String::new(),
        };
        assert!(oci_is_transient(&server(500)));
        assert!(oci_is_transient(&server(503)));
        assert!(oci_is_transient(&server(429)));
        assert!(!oci_is_transient(&server(404)));
        assert!(!oci_is_transient(&server(400)));
        assert!(!oci_is_transient(
            &OciDistributionError::UnauthorizedError {
                url: "http://r/v2/".to_string()
            }
        ));
        let reset = io::Error::new(io::ErrorKind::ConnectionReset, "reset by peer");
        assert!(io_is_transient(&reset));
        assert!(oci_is_transient(&OciDistributionError::IoError(reset)));
        let digest = io::Error::other(DigestError::VerificationError {
            expected: "sha256:aa".to_string(),
            actual: "sha256:bb".to_string(),
        });
        assert!(!io_is_transient(&digest));
    }
}
