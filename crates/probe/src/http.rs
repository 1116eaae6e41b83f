//! httpGet: the kubelet's HTTP prober (pkg/probe/http). Success is a status in
//! 200..400; redirects are followed while they stay on the probe's host (at most 10),
//! a redirect elsewhere is the answer itself (a 3xx: success, as the kubelet's
//! "Probe terminated redirects" warning); the body is drained up to 10 KiB.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::header::{ACCEPT, CONNECTION, HOST, HeaderName, HeaderValue, LOCATION, USER_AGENT};
use hyper::{HeaderMap, Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

use super::uri::{self, Url};
use super::{HandlerTarget, ProbeError, net, tls};
use podhost_model::probe::{HttpAction, HttpScheme, Outcome};

/// Redirects followed before the probe fails (Go's http.Client).
const MAX_REDIRECTS: usize = 10;
/// What is read of a body (the kubelet's `maxRespBodyLength`).
const MAX_BODY: usize = 10 * 1024;

/// One response: its status, where it redirects, and the start of its body.
struct Answer {
    status: StatusCode,
    location: Option<String>,
    body: Vec<u8>,
}

/// Runs the httpGet `action`; every hop is made within the caller's overall timeout.
pub async fn get(
    target: &HandlerTarget,
    action: &HttpAction,
    timeout: Option<Duration>,
) -> Outcome {
    let mut url = Url {
        scheme: action.scheme,
        host: action
            .host
            .clone()
            .unwrap_or_else(|| target.pod_address().to_string()),
        port: action.port,
        path: action.path.clone(),
    };
    if url.bare_host().contains(':') && !url.host.starts_with('[') {
        url.host = format!("[{}]", url.host);
    }
    let first_host = url.bare_host().to_string();
    for hop in 0..=MAX_REDIRECTS {
        let answer = match once(target, &url, &action.headers, timeout).await {
            Ok(a) => a,
            Err(outcome) => return outcome,
        };
        let next = answer
            .location
            .as_deref()
            .filter(|_| answer.status.is_redirection())
            .map(|l| uri::resolve(&url, l));
        match next {
            Some(Some(next)) if next.bare_host() == first_host => {
                if hop == MAX_REDIRECTS {
                    return Outcome::Failure(format!(
                        "Get \"{next}\": stopped after {MAX_REDIRECTS} redirects"
                    ));
                }
                url = next;
            }
            // A redirect to another host is not followed: a success with the kubelet's
            // warning, which names the redirect's body.
            Some(Some(_)) => {
                return Outcome::Warning(format!(
                    "Probe terminated redirects, Response body: {}",
                    String::from_utf8_lossy(&answer.body)
                ));
            }
            _ => return classify(answer.status, &url),
        }
    }
    Outcome::Failure(format!("stopped after {MAX_REDIRECTS} redirects"))
}

fn classify(status: StatusCode, url: &Url) -> Outcome {
    let code = status.as_u16();
    if (200..400).contains(&code) {
        Outcome::Success
    } else {
        tracing::debug!(%url, code, "HTTP probe failed");
        Outcome::Failure(format!("HTTP probe failed with statuscode: {code}"))
    }
}

/// The request's headers: the kubelet's defaults, each replaced by the probe's own of
/// the same name (an empty Accept removes it).
fn headers(url: &Url, extra: &[(String, String)]) -> Result<HeaderMap, ProbeError> {
    let bad = |message: String| ProbeError::Request {
        url: url.to_string(),
        message,
    };
    let mut map = HeaderMap::new();
    let value =
        |v: &str| HeaderValue::from_str(v).map_err(|e| bad(format!("header value {v:?}: {e}")));
    map.insert(HOST, value(&url.authority())?);
    map.insert(USER_AGENT, value(podhost_model::probe::USER_AGENT)?);
    map.insert(ACCEPT, HeaderValue::from_static("*/*"));
    map.insert(CONNECTION, HeaderValue::from_static("close"));
    let mut replaced = Vec::new();
    for (name, v) in extra {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| bad(format!("header name {name:?}: {e}")))?;
        if !replaced.contains(&name) {
            map.remove(&name);
            replaced.push(name.clone());
        }
        if name == ACCEPT && v.is_empty() {
            continue;
        }
        map.append(name, value(v)?);
    }
    Ok(map)
}

/// One GET of `url`.
async fn once(
    target: &HandlerTarget,
    url: &Url,
    extra: &[(String, String)],
    timeout: Option<Duration>,
) -> Result<Answer, Outcome> {
    let headers = headers(url, extra).map_err(|e| Outcome::Unknown(e.to_string()))?;
    let mut request = Request::get(url.path.as_str())
        .body(Empty::<Bytes>::new())
        .map_err(|e| Outcome::Unknown(format!("invalid HTTP request for {url}: {e}")))?;
    *request.headers_mut() = headers;
    let stream = net::open(target, Some(url.bare_host()), url.port, timeout).await?;
    match url.scheme {
        HttpScheme::Http => send(stream, request, url).await,
        HttpScheme::Https => {
            let tls = tls::connect(stream, &url.host, b"http/1.1").await?;
            send(tls, request, url).await
        }
    }
}

/// Sends `request` over `io` (HTTP/1.1) and drains up to [`MAX_BODY`] of the answer.
async fn send<I>(io: I, request: Request<Empty<Bytes>>, url: &Url) -> Result<Answer, Outcome>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let failed = |e: &dyn std::fmt::Display| Outcome::Failure(format!("Get \"{url}\": {e}"));
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| failed(&e))?;
    let driver = tokio::spawn(connection);
    let answer = async {
        let response = sender.send_request(request).await.map_err(|e| failed(&e))?;
        let status = response.status();
        let location = response
            .headers()
            .get(LOCATION)
            .and_then(|l| l.to_str().ok())
            .map(str::to_string);
        let mut body = response.into_body();
        let mut kept = Vec::new();
        while kept.len() < MAX_BODY {
            match body.frame().await {
                Some(Ok(frame)) => {
                    if let Some(data) = frame.data_ref() {
                        let room = MAX_BODY - kept.len();
                        kept.extend_from_slice(&data[..data.len().min(room)]);
                    }
                }
                Some(Err(e)) => return Err(failed(&e)),
                None => break,
            }
        }
        Ok(Answer {
            status,
            location,
            body: kept,
        })
    }
    .await;
    driver.abort();
    answer
}
