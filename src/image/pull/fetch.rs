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
use super::error::{Ctx, PullError};
use super::progress::{PullProgress, Reporter};

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

/// Downloads `blob` from the repository of `repo` into `store`.
pub(super) async fn download(
    client: &Client,
    repo: &Reference,
    store: &Arc<ImageStore>,
    blob: Blob<'_>,
    ctx: &Ctx,
) -> Result<(), PullError> {
    // The whole blob is asked for as the range "bytes=0-": a registry that serves
    // ranges answers 206, and oci_client then leaves the hashing to the BlobWriter
    // (the same check, done once instead of twice); one that does not answers 200
    // and the stream is verified by oci_client as well.
    let mut stream = match client
        .pull_blob_stream_partial(repo, blob.digest, 0, None)
        .await
        .map_err(|e| ctx.oci(&blob.what, e))?
    {
        BlobResponse::Full(s) | BlobResponse::Partial(s) => s,
    };
    if let Some(len) = stream.content_length.filter(|l| *l != blob.size) {
        return Err(PullError::Digest {
            what: blob.what,
            reference: ctx.reference.clone(),
            expected: format!("{} bytes", blob.size),
            actual: format!("{len} bytes (Content-Length)"),
        });
    }
    let writer = {
        let (store, digest, size) = (store.clone(), blob.digest.to_string(), blob.size);
        tokio::task::spawn_blocking(move || store.blob_writer(&digest, size))
            .await
            .map_err(|e| ctx.internal(e))?
            .map_err(|e| ctx.store(e))?
    };
    let (tx, rx) = mpsc::channel::<Vec<Bytes>>(4);
    let write_task = tokio::task::spawn_blocking(move || write_all(writer, rx));
    let pumped = pump(&mut stream, tx, &blob, ctx).await;
    let written = write_task.await.map_err(|e| ctx.internal(e))?;
    match (pumped, written) {
        (Err(Stop::Failed(e)), _) => Err(e),
        (_, Err(e)) => Err(ctx.blob_store(&blob.what, e)),
        (Err(Stop::WriterGone), Ok(_)) => Err(ctx.internal("the blob writer stopped early")),
        (Ok(()), Ok(writer)) => tokio::task::spawn_blocking(move || writer.commit())
            .await
            .map_err(|e| ctx.internal(e))?
            .map(|_| ())
            .map_err(|e| ctx.blob_store(&blob.what, e)),
    }
}

/// Why [`pump`] stopped early.
enum Stop {
    /// The download failed.
    Failed(PullError),
    /// The writer thread is gone (its own error says why).
    WriterGone,
}

/// Moves the stream's chunks to the writer thread, counting bytes against the
/// descriptor size and reporting progress. Dropping `tx` ends the writer's loop.
async fn pump(
    stream: &mut oci_client::client::SizedStream,
    tx: mpsc::Sender<Vec<Bytes>>,
    blob: &Blob<'_>,
    ctx: &Ctx,
) -> Result<(), Stop> {
    let mut done = 0u64;
    let mut reported = 0u64;
    let mut batch: Vec<Bytes> = Vec::new();
    let mut batched = 0usize;
    while let Some(item) = stream.next().await {
        let chunk = item.map_err(|e| Stop::Failed(ctx.io(&blob.what, e)))?;
        done += chunk.len() as u64;
        if done > blob.size {
            return Err(Stop::Failed(PullError::Digest {
                what: blob.what.clone(),
                reference: ctx.reference.clone(),
                expected: format!("{} bytes", blob.size),
                actual: format!("more than {} bytes", blob.size),
            }));
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

/// The writer thread: writes every batch until the channel closes.
fn write_all(
    mut writer: BlobWriter,
    mut rx: mpsc::Receiver<Vec<Bytes>>,
) -> Result<BlobWriter, ImageError> {
    while let Some(batch) = rx.blocking_recv() {
        for chunk in batch {
            writer.write_chunk(&chunk)?;
        }
    }
    Ok(writer)
}
