//! Registry pulls into the [`ImageStore`]: [`Puller::pull`].
//!
//! A pull resolves the reference to one image manifest (an index or manifest
//! list is resolved to this host's platform; OCI and Docker v2 schema 2 media
//! types), fetches the config, then downloads the layers in parallel (at most
//! [`PARALLEL_LAYERS`] at once) and unpacks each into its snapshot as soon as it
//! is stored, and finally records the reference ([`ImageStore::commit`]).
//! Every blob is checked against its digest and size before it becomes visible;
//! a blob already in the store is not downloaded again, so an interrupted pull
//! resumes where it stopped; concurrent pulls of one `Puller` download each blob
//! once (a lock per digest).

mod auth;
mod client;
mod error;
mod fetch;
mod inflight;
mod manifest;
mod progress;
mod target;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use oci_client::Client;
use oci_spec::image::ImageConfiguration;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;

pub use error::PullError;
pub use progress::{ProgressState, PullProgress, render_progress};

use super::{ImageStore, chain_ids};
use error::Ctx;
use fetch::Blob;
use progress::Reporter;
use target::Target;

/// Layers downloaded (and unpacked) at once by one pull.
pub const PARALLEL_LAYERS: usize = 4;

/// How pulls reach registries.
#[derive(Debug, Clone, Default)]
pub struct PullOptions {
    /// Registries (`host:port`, as written in references) spoken to over plain
    /// HTTP instead of HTTPS.
    pub insecure_registries: Vec<String>,
    /// A docker `config.json` with credentials (`auths`, `credHelpers`,
    /// `credsStore`). `None` or a missing file: anonymous access.
    pub credentials_file: Option<PathBuf>,
}

/// Pulls images from registries into a store. Cheap to clone; clones share
/// the registry client and the in-flight downloads.
#[derive(Clone)]
pub struct Puller {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<ImageStore>,
    opts: PullOptions,
    clients: client::Clients,
    inflight: inflight::InFlight,
    blob_fetches: AtomicU64,
}

impl std::fmt::Debug for Puller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Puller")
            .field("root_dir", &self.inner.store.root_dir())
            .field("opts", &self.inner.opts)
            .finish_non_exhaustive()
    }
}

/// One distinct layer blob of the image being pulled.
#[derive(Debug, Clone)]
struct LayerJob {
    digest: String,
    size: u64,
    /// `(diff_id, chain_id)` of every position the blob has in the image.
    snapshots: Vec<(String, String)>,
    /// In the store before the pull started.
    cached: bool,
}

impl Puller {
    /// A puller writing into `store`.
    pub fn new(store: Arc<ImageStore>, opts: PullOptions) -> Puller {
        Puller {
            inner: Arc::new(Inner {
                clients: client::Clients::new(opts.insecure_registries.clone()),
                store,
                opts,
                inflight: inflight::InFlight::default(),
                blob_fetches: AtomicU64::new(0),
            }),
        }
    }

    /// Blob downloads started so far by this puller and its clones (config and
    /// layers; manifests are not counted). For tests and metrics.
    pub fn blob_fetches(&self) -> u64 {
        self.inner.blob_fetches.load(Ordering::Relaxed)
    }

    /// Pulls `reference` (normalized first: `busybox` is
    /// `docker.io/library/busybox:latest`) into the store and returns the
    /// normalized reference, which then resolves with [`ImageStore::resolve`].
    /// Progress goes to `progress` if given (see [`PullProgress`]).
    pub async fn pull(
        &self,
        reference: &str,
        progress: Option<mpsc::Sender<PullProgress>>,
    ) -> Result<String, PullError> {
        let started = Instant::now();
        let target = Target::parse(reference)?;
        let report = Reporter::new(progress);
        let creds_file = self.inner.opts.credentials_file.clone();
        let registry = target.registry.clone();
        let creds =
            tokio::task::spawn_blocking(move || auth::lookup(creds_file.as_deref(), &registry))
                .await
                .map_err(|e| PullError::Internal {
                    reference: target.reference.clone(),
                    reason: e.to_string(),
                })?
                .map_err(|reason| PullError::Credentials {
                    reference: target.reference.clone(),
                    registry: target.registry.clone(),
                    path: self.inner.opts.credentials_file.clone().unwrap_or_default(),
                    reason,
                })?;
        let ctx = Arc::new(Ctx {
            reference: target.reference.clone(),
            registry: target.registry.clone(),
            credentials: match &self.inner.opts.credentials_file {
                Some(p) => p.display().to_string(),
                None => "a docker config.json (none is configured)".to_string(),
            },
            sent: creds.sent.clone(),
        });
        tracing::info!(reference = %target.reference, "pulling image");
        let client = self.inner.clients.get(&target.registry, &creds.auth);

        let resolved = manifest::resolve(&client, &target, &creds.auth, &ctx).await?;
        // Image GC deletes nothing from the first blob written to the commit.
        let store = self.inner.store.clone();
        let _gc_barrier = tokio::task::spawn_blocking(move || store.content_guard())
            .await
            .map_err(|e| ctx.internal(e))?
            .map_err(|e| ctx.store(e))?;
        let repo = target.at_digest(&resolved.digest);
        let config_desc = resolved.manifest.config();
        let config_digest = config_desc.digest().to_string();
        let config_blob = Blob {
            digest: &config_digest,
            size: config_desc.size(),
            what: format!("config {config_digest}"),
            report: None,
        };
        self.ensure_blob(&client, &repo, config_blob, &ctx).await?;
        let jobs = self.plan(&resolved.manifest, &config_digest, &ctx).await?;

        let total_bytes = jobs.iter().filter(|j| !j.cached).map(|j| j.size).sum();
        report
            .send(PullProgress::Resolved {
                reference: target.reference.clone(),
                digest: resolved.digest.clone(),
                layers: jobs.len(),
                total_bytes,
            })
            .await;
        for job in jobs.iter().filter(|j| j.cached) {
            report
                .send(PullProgress::LayerCached {
                    digest: job.digest.clone(),
                })
                .await;
        }
        self.layers(jobs, &client, &repo, &report, &ctx).await?;

        let store = self.inner.store.clone();
        let (name, digest) = (target.reference.clone(), resolved.digest.clone());
        let (bytes, index) = (resolved.bytes.clone(), resolved.index.clone());
        tokio::task::spawn_blocking(move || {
            let index = index.as_ref().map(|(d, b)| (d.as_str(), &b[..]));
            store.commit(&name, &digest, &bytes, index)
        })
        .await
        .map_err(|e| ctx.internal(e))?
        .map_err(|e| ctx.store(e))?;
        report
            .send(PullProgress::Done {
                reference: target.reference.clone(),
                digest: resolved.digest.clone(),
            })
            .await;
        tracing::info!(reference = %target.reference, manifest = %resolved.digest,
            index = ?resolved.index.as_ref().map(|(d, _)| d),
            elapsed_ms = started.elapsed().as_millis() as u64, "pulled image");
        Ok(target.reference)
    }

    /// The distinct layer blobs of `manifest`, with their snapshots (from the
    /// stored config's diff_ids) and whether each is already stored.
    async fn plan(
        &self,
        manifest: &oci_spec::image::ImageManifest,
        config_digest: &str,
        ctx: &Ctx,
    ) -> Result<Vec<LayerJob>, PullError> {
        let store = self.inner.store.clone();
        let layers: Vec<(String, u64)> = manifest
            .layers()
            .iter()
            .map(|l| (l.digest().to_string(), l.size()))
            .collect();
        let config_digest = config_digest.to_string();
        let ctx2 = ctx.clone();
        tokio::task::spawn_blocking(move || {
            let data = store.read_blob(&config_digest).map_err(|e| ctx2.store(e))?;
            let config = ImageConfiguration::from_reader(&data[..])
                .map_err(|e| ctx2.bad(format!("cannot parse image config {config_digest}: {e}")))?;
            let diff_ids = config.rootfs().diff_ids();
            if diff_ids.len() != layers.len() {
                return Err(ctx2.bad(format!(
                    "the config lists {} diff_ids but the manifest {} layers",
                    diff_ids.len(),
                    layers.len()
                )));
            }
            let chains = chain_ids(diff_ids);
            let mut jobs: Vec<LayerJob> = Vec::new();
            let mut by_digest: HashMap<String, usize> = HashMap::new();
            for ((digest, size), (diff_id, chain)) in
                layers.into_iter().zip(diff_ids.iter().zip(chains))
            {
                let snapshot = (diff_id.clone(), chain);
                if let Some(&i) = by_digest.get(&digest) {
                    jobs[i].snapshots.push(snapshot);
                    continue;
                }
                let cached = store.has_blob(&digest).map_err(|e| ctx2.store(e))?;
                by_digest.insert(digest.clone(), jobs.len());
                jobs.push(LayerJob {
                    digest,
                    size,
                    snapshots: vec![snapshot],
                    cached,
                });
            }
            Ok(jobs)
        })
        .await
        .map_err(|e| ctx.internal(e))?
    }

    /// Downloads and unpacks every layer, [`PARALLEL_LAYERS`] at once. The first
    /// failure cancels the others.
    async fn layers(
        &self,
        jobs: Vec<LayerJob>,
        client: &Client,
        repo: &oci_client::Reference,
        report: &Reporter,
        ctx: &Arc<Ctx>,
    ) -> Result<(), PullError> {
        let permits = Arc::new(Semaphore::new(PARALLEL_LAYERS));
        let mut tasks = JoinSet::new();
        for job in jobs {
            let (this, client, repo) = (self.clone(), client.clone(), repo.clone());
            let (report, ctx, permits) = (report.clone(), ctx.clone(), permits.clone());
            tasks.spawn(async move {
                let _permit = permits.acquire_owned().await.map_err(|e| ctx.internal(e))?;
                this.layer(job, &client, &repo, &report, &ctx).await
            });
        }
        while let Some(result) = tasks.join_next().await {
            result.map_err(|e| ctx.internal(e))??;
        }
        Ok(())
    }

    /// One layer: download unless stored, then unpack its snapshot(s), all under
    /// the digest's in-flight lock.
    async fn layer(
        &self,
        job: LayerJob,
        client: &Client,
        repo: &oci_client::Reference,
        report: &Reporter,
        ctx: &Ctx,
    ) -> Result<(), PullError> {
        let _guard = self.inner.inflight.lock(&job.digest).await;
        let store = &self.inner.store;
        if !store.has_blob(&job.digest).map_err(|e| ctx.store(e))? {
            self.inner.blob_fetches.fetch_add(1, Ordering::Relaxed);
            let blob = Blob {
                digest: &job.digest,
                size: job.size,
                what: format!("layer {}", job.digest),
                report: Some(report),
            };
            fetch::download(client, repo, store, blob, ctx).await?;
        } else if !job.cached {
            // A concurrent pull stored it meanwhile.
            report
                .send(PullProgress::Layer {
                    digest: job.digest.clone(),
                    done: job.size,
                    total: job.size,
                })
                .await;
        }
        for (diff_id, chain) in job.snapshots {
            if store.has_snapshot(&chain).map_err(|e| ctx.store(e))? {
                continue;
            }
            report
                .send(PullProgress::Unpacking {
                    digest: job.digest.clone(),
                })
                .await;
            let (store, digest) = (store.clone(), job.digest.clone());
            tokio::task::spawn_blocking(move || {
                store.ensure_layer_snapshot(&digest, &diff_id, &chain)
            })
            .await
            .map_err(|e| ctx.internal(e))?
            .map_err(|e| ctx.store(e))?;
        }
        Ok(())
    }

    /// Downloads a (config) blob unless it is stored, under its in-flight lock.
    async fn ensure_blob(
        &self,
        client: &Client,
        repo: &oci_client::Reference,
        blob: Blob<'_>,
        ctx: &Ctx,
    ) -> Result<(), PullError> {
        let _guard = self.inner.inflight.lock(blob.digest).await;
        let store = &self.inner.store;
        if store.has_blob(blob.digest).map_err(|e| ctx.store(e))? {
            return Ok(());
        }
        self.inner.blob_fetches.fetch_add(1, Ordering::Relaxed);
        fetch::download(client, repo, store, blob, ctx).await
    }
}
