//! Request bodies: JSON of bounded size. Every body the API takes is a small JSON
//! object (a path or an image reference); a larger one is refused before it is read
//! into memory, so no client can make the daemon buffer gigabytes.

use http_body_util::{BodyExt, Limited};
use hyper::Request;
use hyper::body::Incoming;
use serde::de::DeserializeOwned;

use super::server::{Body, error};

/// The largest request body the API reads.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Reads the body of `req` as the JSON of a `what` ("load request"); an error answer
/// (413 too large, 400 unreadable or not that JSON) otherwise.
pub async fn read_json<T: DeserializeOwned>(
    req: Request<Incoming>,
    what: &str,
) -> Result<T, hyper::Response<Body>> {
    let too_large = || {
        error(
            413,
            format!(
                "the {what} body is larger than {MAX_BODY_BYTES} bytes; send only the JSON object the API expects"
            ),
        )
    };
    let declared = req
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return Err(too_large());
    }
    let bytes = match Limited::new(req.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => return Err(too_large()),
        Err(e) => return Err(error(400, format!("cannot read the {what} body: {e}"))),
    };
    serde_json::from_slice(&bytes).map_err(|e| error(400, format!("bad {what}: {e}")))
}
