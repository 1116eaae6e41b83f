//! One GET of the manifest URL with the kubelet's 10 s timeout: the body of a 200 OK
//! answer (at most [`MAX_MANIFEST_BYTES`]), or why not. https uses the system's CA
//! roots (rustls-platform-verifier reads Debian's /etc/ssl/certs, or `SSL_CERT_FILE`).

use reqwest::StatusCode;

use super::{HTTP_TIMEOUT, UrlSource};
use crate::{MAX_MANIFEST_BYTES, ManifestError};

/// The client every poll uses (redirects followed, as Go's http.Client: up to 10).
pub(super) fn client(url: &str) -> Result<reqwest::Client, ManifestError> {
    reqwest::Client::builder()
        .timeout(HTTP_TIMEOUT)
        .user_agent(concat!("podhost/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ManifestError::UrlFetch {
            url: url.to_string(),
            reason: chain(&e),
        })
}

pub(super) async fn fetch(
    client: &reqwest::Client,
    source: &UrlSource,
) -> Result<Vec<u8>, ManifestError> {
    let url = || source.url.clone();
    let failed = |e: reqwest::Error| ManifestError::UrlFetch {
        url: url(),
        reason: chain(&e),
    };
    let mut response = client
        .get(&source.url)
        .headers(source.headers.clone())
        .send()
        .await
        .map_err(failed)?;
    let status = response.status();
    if status != StatusCode::OK {
        return Err(ManifestError::UrlStatus {
            url: url(),
            status: status.to_string(),
        });
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(failed)? {
        if (body.len() + chunk.len()) as u64 > MAX_MANIFEST_BYTES {
            return Err(ManifestError::UrlTooLarge {
                url: url(),
                limit: MAX_MANIFEST_BYTES,
            });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The error and its causes, `outer: inner: …` (reqwest's own text omits the cause,
/// e.g. "connection refused" or the certificate problem).
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}
