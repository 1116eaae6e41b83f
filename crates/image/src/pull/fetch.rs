//! Downloads one blob into the store: the HTTP body feeds a [`BlobWriter`] on a
//! blocking thread, which hashes and counts it and renames it into place only if
//! digest and size match the descriptor.
//! Bytes beyond the descriptor's size abort the download at once, so a bad
//! registry cannot fill the disk. Nothing partial is ever visible in the store.

use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use oci_client::client::BlobResponse;
use oci_client::{Client, Reference};
use tokio::sync::mpsc;

use super::super::{BlobWriter, ImageError, ImageStore};
use super::cancel::{Cancel, stopped};
use super::error::{Ctx, PullError};
use super::progress::{PullProgress, Reporter};
use super::retry::{
    Attempts, io_is_transient, oci_is_connect_failure, oci_is_transient, with_attempts,
    worth_retrying,
};
use super::streamed::{Tee, TeeSender};

/// Chunks are handed to the writer thread in batches of about this many bytes.
const BATCH: usize = 256 * 1024;
/// A `Layer` progress event at most every this many bytes (and at the end).
const REPORT_EVERY: u64 = 512 * 1024;

/// One blob to download.
pub(super) struct Blob<'a> {
    /// `sha256:` digest.
    pub digest: &'a str,
    /// Size from the descriptor.
    pub size: u64,
    /// For messages: "config sha256:…", "layer sha256:…".
    pub what: String,
    /// Where to send `Layer` progress, for layers.
    pub report: Option<&'a Reporter>,
}

/// Downloads `blob` from the repository of `repo` into `store`. A transient
/// failure (see [`retry`](super::retry)) is retried after a pause; a download cut
/// off midway resumes from the bytes already written when the registry serves
/// ranges (it starts over when it does not).
/// Every chunk written also goes to `tee`, if given (see [`streamed`](super::streamed)).
/// When `cancel` is raised the download stops at its next chunk; its temp file
/// is gone when this returns.
pub(super) async fn download(
    client: &Client,
    repo: &Reference,
    store: &Arc<ImageStore>,
    blob: Blob<'_>,
    tee: Option<&Tee>,
    ctx: &Ctx,
    cancel: &Cancel,
) -> Result<(), PullError> {
    let mut attempts = Attempts::new();
    let mut partial: Option<BlobWriter> = None;
    loop {
        let began = std::time::Instant::now();
        let tried = attempt(client, repo, store, &blob, tee, ctx, partial.take(), cancel).await;
        let failure = match tried {
            Ok(()) => return Ok(()),
            Err(f) => f,
        };
        let retry = worth_retrying(failure.transient, failure.connect_failure, began.elapsed());
        let wait = match (failure.transient, retry) {
            (true, true) => attempts.failed(),
            (true, false) => {
                attempts.failed();
                None
            }
            (false, _) => None,
        };
        let Some(wait) = wait else {
            return Err(match failure.transient {
                true => with_attempts(failure.error, &attempts),
                false => failure.error,
            });
        };
        let kept = failure.kept.as_ref().map_or(0, BlobWriter::written);
        tracing::warn!(reference = %ctx.reference, what = %blob.what, error = %failure.error,
            bytes_kept = kept, retry_in_ms = podhost_model::convert::millis(wait),
            "blob download failed; retrying");
        partial = failure.kept;
        let mut cancelled = cancel.clone();
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = cancelled.cancelled() => {
                // The kept bytes' temp file goes with `partial`, before the pull returns.
                drop(partial);
                return Err(stopped(ctx));
            }
        }
    }
}

/// A failed [`attempt`].
struct Failure {
    error: PullError,
    /// Worth another attempt.
    transient: bool,
    /// The registry could not be resolved or connected to (see `worth_retrying`).
    connect_failure: bool,
    /// The bytes written so far, to resume from.
    kept: Option<BlobWriter>,
}

impl Failure {
    fn fatal(error: PullError) -> Failure {
        Failure {
            error,
            transient: false,
            connect_failure: false,
            kept: None,
        }
    }
}

/// One request for the blob, from the end of `partial` (or from its start).
#[allow(clippy::too_many_arguments)]
async fn attempt(
    client: &Client,
    repo: &Reference,
    store: &Arc<ImageStore>,
    blob: &Blob<'_>,
    tee: Option<&Tee>,
    ctx: &Ctx,
    partial: Option<BlobWriter>,
    cancel: &Cancel,
) -> Result<(), Failure> {
    let offset = partial.as_ref().map_or(0, BlobWriter::written);
    // The blob is asked for as the range "bytes=<offset>-": a registry that serves
    // ranges answers 206, and oci_client then leaves the hashing to the BlobWriter
    // (the same check, done once instead of twice); one that does not answers 200
    // with the whole blob, which oci_client verifies as well.
    let mut cancelled = cancel.clone();
    let response = tokio::select! {
        biased;
        // Nothing runs on a thread yet: `partial` and its temp file go right here.
        () = cancelled.cancelled() => return Err(Failure::fatal(stopped(ctx))),
        response = client.pull_blob_stream_partial(repo, blob.digest, offset, None) => response,
    };
    let response = response.map_err(|e| Failure {
        transient: oci_is_transient(&e),
        connect_failure: oci_is_connect_failure(&e),
        error: ctx.oci(&blob.what, e),
        kept: None,
    });
    let (mut stream, writer) = match response {
        // A failed request leaves the bytes written so far intact.
        Err(f) => {
            return Err(Failure { kept: partial, ..f });
        }
        Ok(BlobResponse::Partial(s)) if offset > 0 => (s, partial),
        Ok(BlobResponse::Full(s) | BlobResponse::Partial(s)) => {
            if offset > 0 {
                tracing::info!(what = %blob.what, offset,
                    "the registry does not serve ranges; downloading the blob again");
                if let Some(tee) = tee {
                    tee.abandon();
                }
            }
            (s, None)
        }
    };
    let expected_len = blob.size - writer.as_ref().map_or(0, BlobWriter::written);
    if let Some(len) = stream.content_length.filter(|l| *l != expected_len) {
        return Err(Failure::fatal(PullError::Digest {
            what: blob.what.clone(),
            reference: ctx.reference.clone(),
            expected: format!("{expected_len} bytes"),
            actual: format!("{len} bytes (Content-Length)"),
        }));
    }
    let writer = match writer {
        Some(w) => w,
        None => {
            let (store, digest, size) = (store.clone(), blob.digest.to_string(), blob.size);
            tokio::task::spawn_blocking(move || store.blob_writer(&digest, size))
                .await
                .map_err(|e| Failure::fatal(ctx.internal(e)))?
                .map_err(|e| Failure::fatal(ctx.store(e)))?
        }
    };
    let already = writer.written();
    let (tx, rx) = mpsc::channel::<Vec<Bytes>>(4);
    let tee = tee.and_then(Tee::sender);
    let write_task = tokio::task::spawn_blocking(move || write_all(writer, rx, tee));
    let pumped = pump(&mut stream, tx, blob, ctx, already, cancel.clone()).await;
    let written = write_task
        .await
        .map_err(|e| Failure::fatal(ctx.internal(e)))?;
    match (pumped, written) {
        (_, Err(e)) => Err(Failure::fatal(ctx.blob_store(&blob.what, e))),
        (Err(Stop::Failed(failure)), Ok(writer)) => Err(Failure {
            kept: failure.transient.then_some(writer),
            ..*failure
        }),
        (Err(Stop::WriterGone), Ok(_)) => Err(Failure::fatal(
            ctx.internal("the blob writer stopped early"),
        )),
        (Ok(()), Ok(writer)) => tokio::task::spawn_blocking(move || writer.commit())
            .await
            .map_err(|e| Failure::fatal(ctx.internal(e)))?
            .map(|_| ())
            .map_err(|e| Failure::fatal(ctx.blob_store(&blob.what, e))),
    }
}

/// Why [`pump`] stopped early.
enum Stop {
    /// The download failed (its writer is handed back by the writer thread).
    Failed(Box<Failure>),
    /// The writer thread is gone (its own error says why).
    WriterGone,
}

/// Moves the stream's chunks to the writer thread, counting bytes against the
/// descriptor size and reporting progress. Dropping `tx` ends the writer's loop.
/// `done` starts at the bytes the writer already holds (a resumed download).
/// A raised `cancel` stops it before the next chunk.
async fn pump(
    stream: &mut oci_client::client::SizedStream,
    tx: mpsc::Sender<Vec<Bytes>>,
    blob: &Blob<'_>,
    ctx: &Ctx,
    mut done: u64,
    mut cancel: Cancel,
) -> Result<(), Stop> {
    let mut reported = done;
    let mut batch: Vec<Bytes> = Vec::new();
    let mut batched = 0usize;
    loop {
        let next = tokio::select! {
            biased;
            () = cancel.cancelled() => {
                return Err(Stop::Failed(Box::new(Failure::fatal(stopped(ctx)))));
            }
            next = stream.next() => next,
        };
        let Some(item) = next else { break };
        let chunk = match item {
            Ok(chunk) => chunk,
            Err(e) => {
                // What arrived before the error is still written (and kept to resume).
                if !batch.is_empty() {
                    tx.send(batch).await.map_err(|_| Stop::WriterGone)?;
                }
                return Err(Stop::Failed(Box::new(Failure {
                    transient: io_is_transient(&e),
                    connect_failure: false,
                    error: ctx.io(&blob.what, e),
                    kept: None,
                })));
            }
        };
        done += chunk.len() as u64;
        if done > blob.size {
            return Err(Stop::Failed(Box::new(Failure::fatal(PullError::Digest {
                what: blob.what.clone(),
                reference: ctx.reference.clone(),
                expected: format!("{} bytes", blob.size),
                actual: format!("more than {} bytes", blob.size),
            }))));
        }
        batched += chunk.len();
        batch.push(chunk);
        if batched >= BATCH {
            batched = 0;
            tx.send(std::mem::take(&mut batch))
                .await
                .map_err(|_| Stop::WriterGone)?;
        }
        // The last event (done == total) is sent below, after the loop.
        let due = done - reported >= REPORT_EVERY && done < blob.size;
        if let Some(report) = blob.report.filter(|_| due) {
            reported = done;
            report.try_send(PullProgress::Layer {
                digest: blob.digest.to_string(),
                done,
                total: blob.size,
            });
        }
    }
    if !batch.is_empty() {
        tx.send(batch).await.map_err(|_| Stop::WriterGone)?;
    }
    if let Some(report) = blob.report {
        report
            .send(PullProgress::Layer {
                digest: blob.digest.to_string(),
                done,
                total: blob.size,
            })
            .await;
    }
    Ok(())
}

/// The writer thread: writes every batch until the channel closes, and passes
/// each chunk on to `tee` while its unpacker takes them.
fn write_all(
    mut writer: BlobWriter,
    mut rx: mpsc::Receiver<Vec<Bytes>>,
    mut tee: Option<TeeSender>,
) -> Result<BlobWriter, ImageError> {
    while let Some(batch) = rx.blocking_recv() {
        for chunk in batch {
            writer.write_chunk(&chunk)?;
            if tee.as_ref().is_some_and(|t| !t.send(&chunk)) {
                tee = None;
            }
        }
    }
    Ok(writer)
}
