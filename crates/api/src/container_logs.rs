//! A container's CRI log as an HTTP answer: read once, or followed until the container
//! ends. Shared by the unix API's `/pods/NAME/log` and the kubelet API's
//! `/containerLogs/NS/POD/CONTAINER`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::Response;
use hyper::body::Frame;

use super::request_error::RequestError;
use super::server::{Body, error};
use podhost_disk::Layout;
use podhost_disk::records::EXIT_FILE;
use podhost_logs::reader::{ReadOptions, follow, read_log};
use podhost_model::log_target::log_attempt;
use podhost_status::PodRecord;

/// The log of `container` (its current attempt, `restarts` being its restart count,
/// or the one before with `previous=true`), read or followed with the query's options.
pub async fn container_logs(
    layout: &Layout,
    rec: &PodRecord,
    container: &str,
    restarts: i32,
    query: &HashMap<String, String>,
) -> Response<Body> {
    let current = restarts;
    let previous = query.get("previous").is_some_and(|v| v == "true");
    // A container without a log to show answers as the kubelet does (400, saying why:
    // "is waiting to start: ContainerCreating"), not with a bare not-found.
    let status = super::routes::container_status(rec, container);
    if let Err(message) = log_attempt(status.as_ref(), rec.name(), container, previous) {
        return error(400, message.to_string());
    }
    let attempt = if previous { current - 1 } else { current };
    let Ok(attempt) = u32::try_from(attempt) else {
        return error(
            400,
            format!(
                "previous terminated container \"{container}\" in pod \"{}\" not found",
                rec.name()
            ),
        );
    };
    let ns = rec
        .admitted
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let path = layout.container_log(&ns, rec.name(), rec.uid(), container, attempt);
    let opts = match log_options(query) {
        Ok(o) => o,
        Err(e) => return error(e.status(), e.to_string()),
    };
    if !path.exists() {
        return error(
            404,
            format!(
                "no logs yet for container \"{container}\" in pod \"{}\" ({})",
                rec.name(),
                path.display()
            ),
        );
    }
    let follow_mode = query.get("follow").is_some_and(|v| v == "true") && !previous;
    if !follow_mode {
        let mut out = Vec::new();
        return match tokio::task::spawn_blocking(move || {
            read_log(&path, &opts, &mut out).map(|_| out)
        })
        .await
        {
            Ok(Ok(out)) => chunked_text(out),
            Ok(Err(e)) => error(500, e.to_string()),
            Err(e) => error(500, e.to_string()),
        };
    }
    let exit_file: PathBuf = layout
        .attempt_dir(rec.uid(), container, attempt)
        .join(EXIT_FILE);
    let (tx, rx) = tokio::sync::mpsc::channel::<Vec<u8>>(16);
    tokio::spawn(async move {
        // kubectl logs -f ends when the container it follows has terminated.
        let stop = async move {
            while !exit_file.exists() && exit_file.parent().is_some_and(|p| p.exists()) {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        };
        if let Err(e) = follow(path, opts, tx, stop).await {
            tracing::warn!(error = %e, "log follow ended");
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| {
            (
                Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from(chunk))),
                rx,
            )
        })
    });
    let mut resp = Response::new(StreamBody::new(stream).boxed());
    if let Ok(v) = "text/plain".parse() {
        resp.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    resp
}

/// A log read whole, answered as the kubelet's flushing writer answers it: chunked,
/// the data flushed before the body ends. kube-apiserver's websocket log stream
/// (`wsstream`'s `messageCopy`) drops a read that returns the last data together with
/// the end of the body, which Go's client does when both are in one TLS record (always,
/// for a body of known length): a websocket client got the log empty. Ending the body
/// after a pause (one scheduler turn, in which hyper flushes what it has) puts its end
/// in a record of its own.
fn chunked_text(out: Vec<u8>) -> Response<Body> {
    use futures::StreamExt;
    const FRAME: usize = 32 * 1024;
    let all = Bytes::from(out);
    let frames: Vec<Result<Frame<Bytes>, std::convert::Infallible>> = (0..all.len())
        .step_by(FRAME)
        .map(|at| Ok(Frame::data(all.slice(at..(at + FRAME).min(all.len())))))
        .collect();
    let end = futures::stream::once(tokio::task::yield_now()).filter_map(|()| async { None });
    let body = futures::stream::iter(frames).chain(end);
    let mut resp = Response::new(BodyExt::boxed(StreamBody::new(body)));
    if let Ok(v) = "text/plain".parse() {
        resp.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    resp
}

/// The read options of a log request: `tail` (or kubectl's `tailLines`), `timestamps`,
/// `sinceSeconds`, `sinceTime` (RFC 3339), `limitBytes`.
fn log_options(query: &HashMap<String, String>) -> Result<ReadOptions, RequestError> {
    let num = |key: &str| -> Result<Option<u64>, RequestError> {
        query
            .get(key)
            .map(|v| {
                v.parse::<u64>().map_err(|source| RequestError::NotANumber {
                    key: key.to_string(),
                    value: v.clone(),
                    source,
                })
            })
            .transpose()
    };
    let tail = match num("tail")? {
        Some(t) => Some(t),
        None => num("tailLines")?,
    };
    let since = match (num("sinceSeconds")?, query.get("sinceTime")) {
        (Some(_), Some(_)) => return Err(RequestError::TwoSinces),
        (Some(s), None) => {
            Some(chrono::Utc::now() - chrono::Duration::seconds(s.min(i64::MAX as u64) as i64))
        }
        (None, Some(t)) => Some(
            chrono::DateTime::parse_from_rfc3339(t)
                .map_err(|source| RequestError::BadSinceTime {
                    value: t.clone(),
                    source,
                })?
                .with_timezone(&chrono::Utc),
        ),
        (None, None) => None,
    };
    Ok(ReadOptions {
        tail: tail.map(podhost_model::convert::usize_saturating),
        timestamps: query.get("timestamps").is_some_and(|v| v == "true"),
        since,
        limit_bytes: num("limitBytes")?,
        ..Default::default()
    })
}
