//! The layer phase of a pull: one task per distinct layer blob, at most
//! [`PARALLEL_LAYERS`](super::PARALLEL_LAYERS) at once. A task downloads its blob
//! (unless stored) under the digest's in-flight lock while the config is still
//! being fetched, then waits for the [`Plan`] (the snapshots each blob makes,
//! from the config's diff_ids) and unpacks them.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use oci_client::{Client, Reference};
use oci_spec::image::{ImageConfiguration, ImageManifest};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use super::super::{ImageError, ImageStore, chain_ids};
use super::cancel::{Cancel, CancelSender, stopped};
use super::error::{Ctx, DocumentError, PullError};
use super::fetch::{self, Blob};
use super::progress::{PullProgress, Reporter};
use super::streamed;
use super::{PARALLEL_LAYERS, Puller};

/// One distinct layer blob of the image being pulled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LayerJob {
    /// `sha256:` digest.
    pub digest: String,
    /// Size from the manifest.
    pub size: u64,
    /// In the store before the pull started.
    pub cached: bool,
}

/// One position of a layer blob in the image: the snapshot it makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Position {
    pub diff_id: String,
    pub chain_id: String,
    /// The chain IDs of the layers below, bottom first.
    pub parents: Vec<String>,
}

/// Layer digest → every position it has in the image.
pub(super) type Snapshots = HashMap<String, Vec<Position>>;

/// What the layer tasks wait for before unpacking.
#[derive(Debug, Clone)]
pub(super) enum Plan {
    /// The config is being fetched.
    Pending,
    /// The snapshots to unpack.
    Ready(Arc<Snapshots>),
    /// The config could not be used (the pull reports why).
    Failed,
}

/// The distinct layer blobs of `manifest`, in order, and whether each is stored.
/// Blocking (stats).
pub(super) fn jobs(
    manifest: &ImageManifest,
    store: &ImageStore,
) -> Result<Vec<LayerJob>, ImageError> {
    let mut jobs: Vec<LayerJob> = Vec::new();
    for layer in manifest.layers() {
        let digest = layer.digest().to_string();
        if jobs.iter().any(|j| j.digest == digest) {
            continue;
        }
        jobs.push(LayerJob {
            cached: store.has_blob(&digest)?,
            digest,
            size: layer.size(),
        });
    }
    Ok(jobs)
}

/// The snapshots of `manifest`'s layers from its config (`config_bytes`).
pub(super) fn snapshots(
    manifest: &ImageManifest,
    config_bytes: &[u8],
) -> Result<Snapshots, DocumentError> {
    let config = ImageConfiguration::from_reader(config_bytes).map_err(DocumentError::Config)?;
    let diff_ids = config.rootfs().diff_ids();
    let layers = manifest.layers();
    if diff_ids.len() != layers.len() {
        return Err(DocumentError::DiffIdCount {
            diff_ids: diff_ids.len(),
            layers: layers.len(),
        });
    }
    let chains = chain_ids(diff_ids);
    let mut out = Snapshots::new();
    for (i, (layer, diff_id)) in layers.iter().zip(diff_ids).enumerate() {
        out.entry(layer.digest().to_string())
            .or_default()
            .push(Position {
                diff_id: diff_id.clone(),
                chain_id: chains[i].clone(),
                parents: chains[..i].to_vec(),
            });
    }
    Ok(out)
}

/// Everything a layer task shares with the pull.
#[derive(Clone)]
pub(super) struct Shared {
    pub puller: Puller,
    pub client: Client,
    pub repo: Reference,
    pub report: Reporter,
    pub ctx: Arc<Ctx>,
    pub plan: watch::Receiver<Plan>,
    /// Raised when the pull has failed: the tasks stop and clean up.
    pub cancel: Cancel,
}

/// Starts one task per job. Dropping the set aborts them; [`join`] instead
/// stops them cooperatively, so that nothing of theirs outlives the pull.
pub(super) fn spawn(jobs: Vec<LayerJob>, shared: &Shared) -> JoinSet<Result<(), PullError>> {
    let permits = Arc::new(Semaphore::new(PARALLEL_LAYERS));
    let mut tasks = JoinSet::new();
    for job in jobs {
        let (shared, permits) = (shared.clone(), permits.clone());
        tasks.spawn(async move {
            let mut cancel = shared.cancel.clone();
            let _permit = tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(stopped(&shared.ctx)),
                permit = permits.acquire_owned() => permit.map_err(|e| shared.ctx.internal(e))?,
            };
            layer(job, shared).await
        });
    }
    tasks
}

/// Waits for every task and returns the first failure. After a failure the
/// others are told to stop (`cancel`) and are still waited for: their temp files
/// are gone when this returns.
pub(super) async fn join(
    mut tasks: JoinSet<Result<(), PullError>>,
    cancel: &CancelSender,
    ctx: &Ctx,
) -> Result<(), PullError> {
    let mut first = None;
    while let Some(result) = tasks.join_next().await {
        let failed = match result {
            Ok(Ok(())) => continue,
            Ok(Err(e)) => e,
            Err(e) => ctx.internal(e),
        };
        if first.is_none() {
            cancel.cancel();
            first = Some(failed);
        }
    }
    first.map_or(Ok(()), Err)
}

/// One layer: download unless stored (unpacking it as it arrives), then adopt or
/// unpack its snapshot(s), all under the digest's in-flight lock.
async fn layer(job: LayerJob, mut shared: Shared) -> Result<(), PullError> {
    let inner = &shared.puller.inner;
    let ctx = &shared.ctx;
    let guard = inner.inflight.lock(&job.digest).await;
    let store = &inner.store;
    let mut streamed = None;
    if !store.has_blob(&job.digest).map_err(|e| ctx.store(e))? {
        inner.blob_fetches.fetch_add(1, Ordering::Relaxed);
        let blob = Blob {
            digest: &job.digest,
            size: job.size,
            what: format!("layer {}", job.digest),
            report: Some(&shared.report),
        };
        let (tee, unpacking) = streamed::start(store.clone(), job.digest.clone());
        let downloaded = fetch::download(
            &shared.client,
            &shared.repo,
            store,
            blob,
            Some(&tee),
            ctx,
            &shared.cancel,
        )
        .await;
        if let Err(e) = downloaded {
            // The unpack stops at the broken stream; its temp dir is gone when the
            // pull reports the failure.
            drop(tee);
            let _ = unpacking.await;
            return Err(e);
        }
        tee.finish();
        streamed = Some(unpacking);
    } else if !job.cached {
        // A concurrent pull stored it meanwhile.
        shared
            .report
            .send(PullProgress::Layer {
                digest: job.digest.clone(),
                done: job.size,
                total: job.size,
            })
            .await;
    }
    let plan = shared
        .plan
        .wait_for(|p| !matches!(p, Plan::Pending))
        .await
        .map_err(|_| ctx.internal("the pull ended before its config was read"))?
        .clone();
    let Plan::Ready(snapshots) = plan else {
        if let Some(task) = streamed {
            let _ = task.await;
        }
        return Err(ctx.internal("the image config could not be read"));
    };
    let mut unpacked = match streamed {
        Some(task) => match task.await {
            Ok(Ok(u)) => Some(u),
            Ok(Err(e)) => {
                // Unpacked again from the stored blob below, which reports a
                // problem of the layer itself properly.
                tracing::debug!(layer = %job.digest, error = %e, "unpack during download failed");
                None
            }
            Err(e) => return Err(ctx.internal(e)),
        },
        None => None,
    };
    let mut guard = Some(guard);
    for pos in snapshots.get(&job.digest).cloned().unwrap_or_default() {
        if store
            .has_snapshot(&pos.chain_id)
            .map_err(|e| ctx.store(e))?
        {
            continue;
        }
        shared
            .report
            .send(PullProgress::Unpacking {
                digest: job.digest.clone(),
            })
            .await;
        let ready = match unpacked.take() {
            Some(u) => {
                inner.streamed_snapshots.fetch_add(1, Ordering::Relaxed);
                u
            }
            None => {
                let (store, digest) = (store.clone(), job.digest.clone());
                tokio::task::spawn_blocking(move || store.unpack_stored(&digest))
                    .await
                    .map_err(|e| ctx.internal(e))?
                    .map_err(|e| ctx.store(e))?
            }
        };
        if ready.needs_lowers() {
            // Let other pulls have this blob meanwhile: one of them may be making
            // a snapshot this one waits for.
            drop(guard.take());
            wait_for_snapshots(store, &pos.parents, ctx, shared.cancel.clone()).await?;
        }
        let store = store.clone();
        tokio::task::spawn_blocking(move || {
            store.adopt_snapshot(ready, &pos.diff_id, &pos.chain_id, &pos.parents)
        })
        .await
        .map_err(|e| ctx.internal(e))?
        .map_err(|e| ctx.store(e))?;
    }
    Ok(())
}

/// Waits until the snapshots of `chains` exist (made by this pull's other layer
/// tasks, or another pull's). Stops when the pull has failed: a lower layer
/// that failed will never come.
async fn wait_for_snapshots(
    store: &ImageStore,
    chains: &[String],
    ctx: &Ctx,
    mut cancel: Cancel,
) -> Result<(), PullError> {
    for chain in chains {
        while !store.has_snapshot(chain).map_err(|e| ctx.store(e))? {
            tokio::select! {
                () = tokio::time::sleep(std::time::Duration::from_millis(20)) => {}
                () = cancel.cancelled() => return Err(stopped(ctx)),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(c: char) -> String {
        format!("sha256:{}", c.to_string().repeat(64))
    }

    fn manifest(layers: &[String]) -> ImageManifest {
        let layers: Vec<String> = layers
            .iter()
            .map(|l| {
                format!(
                    r#"{{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"{l}","size":3}}"#
                )
            })
            .collect();
        let json = format!(
            r#"{{"schemaVersion":2,"config":{{"mediaType":"application/vnd.oci.image.config.v1+json",
            "digest":"{}","size":2}},"layers":[{}]}}"#,
            d('c'),
            layers.join(",")
        );
        ImageManifest::from_reader(json.as_bytes()).unwrap()
    }

    fn config(diff_ids: &[String]) -> Vec<u8> {
        format!(
            r#"{{"architecture":"amd64","os":"linux","rootfs":{{"type":"layers","diff_ids":{}}}}}"#,
            serde_json::to_string(diff_ids).unwrap()
        )
        .into_bytes()
    }

    #[test]
    fn a_repeated_layer_blob_makes_two_snapshots() {
        let m = manifest(&[d('a'), d('b'), d('a')]);
        let diff = [d('1'), d('2'), d('1')];
        let s = snapshots(&m, &config(&diff)).unwrap();
        let chains = chain_ids(&diff);
        let at = |i: usize| Position {
            diff_id: diff[i].clone(),
            chain_id: chains[i].clone(),
            parents: chains[..i].to_vec(),
        };
        assert_eq!(s[&d('a')], vec![at(0), at(2)]);
        assert_eq!(s[&d('b')], vec![at(1)]);
    }

    #[test]
    fn diff_id_count_must_match() {
        let m = manifest(&[d('a'), d('b')]);
        let err = snapshots(&m, &config(&[d('1')])).unwrap_err().to_string();
        assert!(
            err.contains("1 diff_ids but the manifest 2 layers"),
            "{err}"
        );
        assert!(snapshots(&m, b"nope").is_err());
    }

    #[test]
    fn jobs_are_distinct_and_know_what_is_stored() {
        let root = tempfile::tempdir().unwrap();
        let store = ImageStore::open(root.path()).unwrap();
        let m = manifest(&[d('a'), d('b'), d('a')]);
        let j = jobs(&m, &store).unwrap();
        assert_eq!(j.len(), 2);
        assert_eq!(
            (j[0].digest.clone(), j[0].size, j[0].cached),
            (d('a'), 3, false)
        );
        assert_eq!(j[1].digest, d('b'));
    }
}
