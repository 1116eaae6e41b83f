//! Registry pulls into the [`ImageStore`]: [`Puller::pull`].
//!
//! A pull resolves the reference to one image manifest (an index or manifest
//! list is resolved to this host's platform; OCI and Docker v2 schema 2 media
//! types), then downloads the layers in parallel (at most [`PARALLEL_LAYERS`] at
//! once) while it fetches the config and stores the manifest, unpacks each layer
//! into its snapshot as soon as both it and the config are there, and finally
//! records the reference ([`ImageStore::commit`]).
//! Every blob is checked against its digest and size before it becomes visible;
//! a blob already in the store is not downloaded again, so an interrupted pull
//! resumes where it stopped; concurrent pulls of one `Puller` download each blob
//! once (a lock per digest).

mod auth;
mod cancel;
mod client;
mod error;
mod fetch;
mod inflight;
mod layers;
mod manifest;
mod plain_http;
mod progress;
mod retry;
mod streamed;
mod target;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use oci_client::Client;
use oci_client::secrets::RegistryAuth;
use oci_spec::image::ImageManifest;
use tokio::sync::{mpsc, watch};

pub use error::PullError;
pub use progress::{ProgressState, PullProgress, render_progress};

use super::ImageStore;
use error::Ctx;
use fetch::Blob;
use layers::{Plan, Snapshots};
use podhost_model::pull_secrets::DockerKeyring;
use progress::Reporter;
use target::Target;

/// Layers downloaded (and unpacked) at once by one pull.
pub const PARALLEL_LAYERS: usize = 4;

/// How pulls reach registries.
#[derive(Debug, Clone, Default)]
pub struct PullOptions {
    /// Registries (`host:port`, as written in references) spoken to over plain
    /// HTTP instead of HTTPS. A registry on this host's loopback needs no entry: it
    /// falls back to plain HTTP when it answers TLS in plain HTTP.
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
    streamed_snapshots: AtomicU64,
}

impl std::fmt::Debug for Puller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Puller")
            .field("root_dir", &self.inner.store.root_dir())
            .field("opts", &self.inner.opts)
            .finish_non_exhaustive()
    }
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
                streamed_snapshots: AtomicU64::new(0),
            }),
        }
    }

    /// Blob downloads started so far by this puller and its clones (config and
    /// layers; manifests are not counted). For tests and metrics.
    pub fn blob_fetches(&self) -> u64 {
        self.inner.blob_fetches.load(Ordering::Relaxed)
    }

    /// Snapshots made from a layer unpacked while it downloaded (the others were
    /// unpacked from the stored blob afterwards). For tests and metrics.
    pub fn streamed_snapshots(&self) -> u64 {
        self.inner.streamed_snapshots.load(Ordering::Relaxed)
    }

    /// Pulls `reference` (normalized first: `busybox` is
    /// `docker.io/library/busybox:latest`) into the store with the node's credentials
    /// and returns the normalized reference, which then resolves with
    /// [`ImageStore::resolve`]. Progress goes to `progress` if given (see
    /// [`PullProgress`]); its receiver must keep reading (or be dropped), or the pull
    /// waits for room.
    ///
    /// Dropping the returned future cancels the pull: nothing partial becomes
    /// visible, and the blobs already stored are reused by the next pull.
    pub async fn pull(
        &self,
        reference: &str,
        progress: Option<mpsc::Sender<PullProgress>>,
    ) -> Result<String, PullError> {
        self.pull_with(reference, &DockerKeyring::default(), progress)
            .await
    }

    /// [`pull`](Self::pull) with a pod's logins (its image pull secrets) first, as the
    /// kubelet pulls: each login of `pod_logins` for the image's repository in turn
    /// (the most specific location's first), then the node's credentials file. A
    /// login the registry refuses (unauthorized, or not found, as a registry may
    /// hide a private repository) makes the next one be tried; any other failure ends
    /// the pull. When the pod has logins for the registry and the node's file has
    /// none, no anonymous pull follows them (the kubelet's keyring gives none). The
    /// logins are used for this pull only: each is sent through a registry client of
    /// its own ([`client`]), so no token it obtained serves another pull.
    pub async fn pull_with(
        &self,
        reference: &str,
        pod_logins: &DockerKeyring,
        progress: Option<mpsc::Sender<PullProgress>>,
    ) -> Result<String, PullError> {
        let target = Target::parse(reference)?;
        let report = Reporter::new(progress);
        let repository = format!("{}/{}", target.registry, target.repository);
        let mut failures = Vec::new();
        for login in pod_logins.lookup(&repository) {
            let creds = auth::Credentials::from_login(login);
            let ctx = Arc::new(self.ctx(&target, &login.source, &creds));
            match self.pull_as(&target, &creds, ctx, &report).await {
                Ok(name) => return Ok(name),
                Err(e) if e.may_pass_with_other_credentials() => {
                    tracing::info!(reference = %target.reference, credentials = %login.source,
                        error = %e, "the registry refused these credentials; trying the next");
                    failures.push(e);
                }
                Err(e) => return Err(e),
            }
        }
        match self.node_credentials(&target).await {
            Ok((creds, ctx)) if failures.is_empty() || creds.auth != RegistryAuth::Anonymous => {
                match self.pull_as(&target, &creds, ctx, &report).await {
                    Ok(name) => return Ok(name),
                    Err(e) => failures.push(e),
                }
            }
            Ok(_) => {}
            Err(e) => failures.push(e),
        }
        Err(PullError::every_credential_failed(
            target.reference,
            failures,
        ))
    }

    /// Pulls `target` sending `creds` (described by `ctx` in errors).
    async fn pull_as(
        &self,
        target: &Target,
        creds: &auth::Credentials,
        ctx: Arc<Ctx>,
        report: &Reporter,
    ) -> Result<String, PullError> {
        let started = Instant::now();
        tracing::info!(reference = %target.reference, credentials = %ctx.credentials, "pulling image");
        let (client, resolved) = self.resolve(target, &creds.auth, &ctx).await?;
        let store = self.inner.store.clone();
        let manifest = resolved.manifest.clone();
        let (_gc_barrier, jobs) = tokio::task::spawn_blocking(move || {
            // Image GC deletes nothing from the first blob written to the commit.
            let guard = store.content_guard()?;
            Ok::<_, super::ImageError>((guard, layers::jobs(&manifest, &store)?))
        })
        .await
        .map_err(|e| ctx.internal(e))?
        .map_err(|e| ctx.store(e))?;
        let total_bytes = jobs.iter().filter(|j| !j.cached).map(|j| j.size).sum();
        let image_bytes = jobs.iter().map(|j| j.size).sum();
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

        // Layers download while the config is fetched and the manifest stored;
        // they unpack once the config says what their snapshots are.
        // A failure anywhere returns only after every part has stopped, so that
        // no temp file of this pull outlives its error.
        let (plan_tx, plan_rx) = watch::channel(Plan::Pending);
        let (cancel_tx, cancel) = cancel::channel();
        let shared = layers::Shared {
            puller: self.clone(),
            client: client.clone(),
            repo: target.at_digest(&resolved.digest),
            report: report.clone(),
            ctx: ctx.clone(),
            plan: plan_rx,
            cancel,
        };
        let tasks = layers::spawn(jobs, &shared);
        let manifest_stored = self.store_manifest(&resolved);
        let config = self.config_snapshots(&shared, &resolved.manifest).await;
        let config = match config {
            Ok(snapshots) => {
                plan_tx.send_replace(Plan::Ready(Arc::new(snapshots)));
                Ok(())
            }
            Err(e) => {
                plan_tx.send_replace(Plan::Failed);
                cancel_tx.cancel();
                Err(e)
            }
        };
        let layers = layers::join(tasks, &cancel_tx, &ctx).await;
        let manifest = manifest_stored
            .await
            .map_err(|e| ctx.internal(e))
            .and_then(|stored| stored.map_err(|e| ctx.store(e)));
        config.and(layers).and(manifest)?;

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
            elapsed_ms = podhost_model::convert::millis(started.elapsed()), "pulled image");
        podhost_metrics::image_pulled(started.elapsed(), image_bytes, total_bytes);
        Ok(target.reference.clone())
    }

    /// The client to pull `target` with and the manifest it resolves to. A registry
    /// on this host's loopback that answers TLS in plain HTTP is asked again in
    /// plain HTTP (see [`plain_http`]), and that client is the one returned.
    async fn resolve(
        &self,
        target: &Target,
        auth: &oci_client::secrets::RegistryAuth,
        ctx: &Ctx,
    ) -> Result<(Client, manifest::Resolved), PullError> {
        let client = self.client(target, auth)?;
        let (client, resolved) = match manifest::resolve(&client, target, auth, ctx).await {
            Err(PullError::PlainHttp { .. })
                if self.inner.clients.fall_back_to_plain_http(&target.registry) =>
            {
                let client = self.client(target, auth)?;
                let resolved = manifest::resolve(&client, target, auth, ctx).await;
                (client, resolved)
            }
            resolved => (client, resolved),
        };
        match resolved {
            Ok(r) => Ok((client, r)),
            Err(e @ PullError::Unauthorized { .. }) => {
                Err(token_service_reason(&client, target, auth, ctx)
                    .await
                    .unwrap_or(e))
            }
            Err(e) => Err(e),
        }
    }

    /// The shared registry client for `target`'s registry with `auth`.
    fn client(
        &self,
        target: &Target,
        auth: &oci_client::secrets::RegistryAuth,
    ) -> Result<Client, PullError> {
        self.inner
            .clients
            .get(&target.registry, auth)
            .map_err(|source| PullError::NoClient {
                reference: target.reference.clone(),
                source: Box::new(source),
            })
    }

    /// The node's credentials for the target's registry (`--image-credentials`), and
    /// the error context that describes them.
    async fn node_credentials(
        &self,
        target: &Target,
    ) -> Result<(auth::Credentials, Arc<Ctx>), PullError> {
        let file = self.inner.opts.credentials_file.clone();
        let (file2, registry) = (file.clone(), target.registry.clone());
        let creds = tokio::task::spawn_blocking(move || auth::lookup(file2.as_deref(), &registry))
            .await
            .map_err(|e| PullError::Internal {
                reference: target.reference.clone(),
                reason: e.to_string(),
            })?
            .map_err(|source| PullError::Credentials {
                reference: target.reference.clone(),
                registry: target.registry.clone(),
                path: file.clone().unwrap_or_default(),
                source: Box::new(source),
            })?;
        let source = match &file {
            Some(p) => p.display().to_string(),
            None => "a docker config.json (none is configured)".to_string(),
        };
        let ctx = Arc::new(self.ctx(target, &source, &creds));
        Ok((creds, ctx))
    }

    /// The error context of a pull of `target` sending `creds`, which come from `source`.
    fn ctx(&self, target: &Target, source: &str, creds: &auth::Credentials) -> Ctx {
        Ctx {
            reference: target.reference.clone(),
            registry: target.registry.clone(),
            credentials: source.to_string(),
            sent: creds.sent.clone(),
        }
    }

    /// Fetches the config (unless stored) and reads the layers' snapshots from it.
    async fn config_snapshots(
        &self,
        shared: &layers::Shared,
        manifest: &ImageManifest,
    ) -> Result<Snapshots, PullError> {
        let ctx = &shared.ctx;
        let desc = manifest.config();
        let digest = desc.digest().to_string();
        let blob = Blob {
            digest: &digest,
            size: desc.size(),
            what: format!("config {digest}"),
            report: None,
        };
        self.ensure_blob(&shared.client, &shared.repo, blob, ctx)
            .await?;
        let (store, manifest) = (self.inner.store.clone(), manifest.clone());
        let ctx2 = ctx.clone();
        tokio::task::spawn_blocking(move || {
            let data = store.read_blob(&digest).map_err(|e| ctx2.store(e))?;
            layers::snapshots(&manifest, &data)
                .map_err(|e| ctx2.document(format!("image config {digest}"), e))
        })
        .await
        .map_err(|e| ctx.internal(e))?
    }

    /// Stores the manifest (and index) blobs in the background, so that the
    /// commit finds them in place.
    fn store_manifest(
        &self,
        resolved: &manifest::Resolved,
    ) -> tokio::task::JoinHandle<Result<(), super::ImageError>> {
        let store = self.inner.store.clone();
        let mut docs = vec![(resolved.digest.clone(), resolved.bytes.clone())];
        docs.extend(resolved.index.clone());
        tokio::task::spawn_blocking(move || {
            for (digest, bytes) in docs {
                if !store.has_blob(&digest)? {
                    let mut writer = store.blob_writer(&digest, bytes.len() as u64)?;
                    writer.write_chunk(&bytes)?;
                    writer.commit()?;
                }
            }
            Ok(())
        })
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
        fetch::download(
            client,
            repo,
            store,
            blob,
            None,
            ctx,
            &cancel::Cancel::never(),
        )
        .await
    }
}

/// After a 401: asks the registry's token service (if it has one) for a token
/// directly, because `oci_client` drops the token service's refusal and then
/// reports only the registry's bare 401. `Some` is the error naming what the
/// token service said ("invalid username or password for \"alice\"").
async fn token_service_reason(
    client: &Client,
    target: &Target,
    auth: &oci_client::secrets::RegistryAuth,
    ctx: &Ctx,
) -> Option<PullError> {
    let reference = target.manifest_ref();
    match client
        .auth(&reference, auth, oci_client::RegistryOperation::Pull)
        .await
    {
        Err(e @ oci_client::errors::OciDistributionError::AuthenticationFailure(_)) => {
            Some(ctx.oci("manifest", e))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn puller_is_clone_send_sync() {
        fn check<T: Clone + Send + Sync + 'static>() {}
        check::<Puller>();
    }

    #[tokio::test]
    async fn a_bad_reference_fails_before_any_network() {
        let root = tempfile::tempdir().unwrap();
        let store = Arc::new(ImageStore::open(root.path()).unwrap());
        let puller = Puller::new(store, PullOptions::default());
        let err = puller.pull("Localhost:5000/UPPER", None).await.unwrap_err();
        assert!(matches!(err, PullError::BadReference { .. }), "{err}");
        assert_eq!(puller.blob_fetches(), 0);
    }
}
