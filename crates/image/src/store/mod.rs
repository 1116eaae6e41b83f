//! [`ImageStore`]: loads OCI layouts/archives, unpacks their layers into shared
//! snapshots and resolves references for the runtime.
//!
//! On disk, under the root dir:
//! ```text
//! images/blobs/sha256/<hex>   content-addressed blobs, verified before rename
//! images/index.json           references → manifest digest, last-used time
//! images/lock                 flock for index.json updates
//! images/gc.lock              GC barrier: shared by loads/pulls/resolves, exclusive
//!                             while image GC deletes (see `image::gc`)
//! images/tmp/                 blob and index writes in progress
//! snapshots/<chainid-hex>/    one unpacked layer each (an overlay lower dir)
//! snapshots/tmp-…             snapshots being unpacked
//! ```

use std::path::{Path, PathBuf};
use std::time::Instant;

use chrono::{DateTime, Utc};
use oci_spec::image::{ImageConfiguration, ImageManifest};
use serde::{Deserialize, Serialize};

use super::blobs::Blobs;
use super::digest::{chain_ids, sha256_hex};
use super::error::ImageError;
use super::fsutil::{ensure_dir, remove_stale_temps};
use super::layout::{FoundImage, Source, host_platform};
use super::reference::{digest_part, is_bare_digest, normalize_reference};
use super::refs::{RefEntry, RefFile};

mod snapshot;

pub use snapshot::UnpackedLayer;

/// How close two uses of an image may be before the later one is not recorded.
pub const TOUCH_GRANULARITY: chrono::TimeDelta = chrono::TimeDelta::seconds(60);

/// The content-addressed image store under a root dir (`--root-dir`).
///
/// All methods do blocking file I/O (a load unpacks whole layers): call them from
/// `tokio::task::spawn_blocking` in async code. Several `ImageStore`s (threads or
/// processes, e.g. the daemon and `podhost load`) may use one root dir at once.
#[derive(Debug, Clone)]
pub struct ImageStore {
    root_dir: PathBuf,
    blobs: Blobs,
    refs: RefFile,
    snapshots: PathBuf,
}

/// An image ready for the runtime.
#[derive(Debug, Clone)]
pub struct ResolvedImage {
    /// The normalized reference (or the digest, when resolved by digest and no
    /// reference names it).
    pub reference: String,
    /// `sha256:` digest of the platform-specific image manifest.
    pub manifest_digest: String,
    /// Snapshot directories, BOTTOM layer first (reverse them for overlay lowerdir).
    pub layers: Vec<PathBuf>,
    /// The image configuration (Env, Cmd, Entrypoint, User, WorkingDir, …).
    pub config: ImageConfiguration,
}

/// One reference in the store, for `podhost images` and image GC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageSummary {
    /// The normalized reference.
    pub reference: String,
    /// `sha256:` digest of its manifest.
    pub digest: String,
    /// Manifest + config + compressed layer sizes, in bytes.
    pub size: u64,
    /// When a container last used it (see [`ImageStore::touch`]).
    pub last_used: Option<DateTime<Utc>>,
    /// When the reference first named this manifest (image GC's minimum age).
    #[serde(default)]
    pub first_detected: Option<DateTime<Utc>>,
    /// Pinned: never garbage-collected (see [`ImageStore::set_pinned`]).
    #[serde(default)]
    pub pinned: bool,
}

impl ImageStore {
    /// Opens (creating if needed) the store under `root_dir` and removes temp
    /// files and half-unpacked snapshots left by writers that are gone.
    pub fn open(root_dir: &Path) -> Result<ImageStore, ImageError> {
        let images = images_dir(root_dir);
        let blob_dir = images.join("blobs").join("sha256");
        let tmp = images.join("tmp");
        let snapshots = root_dir.join("snapshots");
        for dir in [&blob_dir, &tmp, &snapshots] {
            ensure_dir(dir)?;
        }
        let mut removed = remove_stale_temps(&tmp)?;
        removed.extend(remove_stale_temps(&snapshots)?);
        for path in &removed {
            tracing::info!(path = %path.display(), "removed leftover temp from an interrupted write");
        }
        Ok(ImageStore {
            root_dir: root_dir.to_path_buf(),
            blobs: Blobs::new(blob_dir, tmp.clone()),
            refs: RefFile::new(&images, tmp),
            snapshots,
        })
    }

    /// The root dir this store lives in.
    pub fn root_dir(&self) -> &Path {
        &self.root_dir
    }

    /// Its blobs and references: `<root>/images`.
    pub fn images_dir(&self) -> PathBuf {
        images_dir(&self.root_dir)
    }

    /// Loads an OCI image layout directory or an oci-archive (a tar of a layout,
    /// optionally gzipped): verifies and stores its blobs, unpacks a snapshot for
    /// every layer, then records its references. Returns the references loaded
    /// from `path`, normalized and sorted. Loading the same content again is a
    /// no-op apart from the index update.
    pub fn load(&self, path: &Path) -> Result<Vec<String>, ImageError> {
        self.load_named(path, None)
    }

    /// [`load`](Self::load), with `name` (`podhost load --name REF`) naming the
    /// source's one image (or the one REF or its tag names; only that one is
    /// loaded) whatever its annotations say. Without `name`, a manifest named by a
    /// bare tag or short name gets a `localhost/` reference (see `image::naming`).
    pub fn load_named(&self, path: &Path, name: Option<&str>) -> Result<Vec<String>, ImageError> {
        let started = Instant::now();
        tracing::info!(source = %path.display(), ?name, "loading images");
        // Held from the first blob written to the index update: GC deletes nothing meanwhile.
        let _gc_barrier = self.content_guard()?;
        let source = Source::open(path, &self.blobs)?;
        let found = source.images(&self.blobs, &host_platform(), name)?;
        for image in &found {
            self.import_image(&source, image)?;
        }
        let now = Utc::now();
        self.refs.update(|index| {
            for image in &found {
                let previous = index.images.get(&image.reference);
                let entry = RefEntry::renewed(previous, &image.manifest, image.index.clone(), now);
                index.images.insert(image.reference.clone(), entry);
            }
            Ok(((), true))
        })?;
        let refs: Vec<String> = found.into_iter().map(|i| i.reference).collect();
        tracing::info!(source = %path.display(), ?refs, elapsed_ms = podhost_model::convert::millis(started.elapsed()),
            "loaded images");
        Ok(refs)
    }

    /// Fetches the config and layer blobs of one image and unpacks its snapshots.
    fn import_image(&self, source: &Source, image: &FoundImage) -> Result<(), ImageError> {
        let manifest = self.read_manifest(&image.manifest)?;
        source.fetch(&self.blobs, manifest.config())?;
        for layer in manifest.layers() {
            source.fetch(&self.blobs, layer)?;
        }
        let config = self.read_config(&manifest, &image.manifest)?;
        self.ensure_snapshots(&image.reference, &manifest, &config)?;
        tracing::info!(reference = %image.reference, manifest = %image.manifest,
            layers = manifest.layers().len(), from = %source.path().display(), "imported image");
        Ok(())
    }

    /// Resolves a reference (normalized here) or a `sha256:` manifest digest to
    /// the image's snapshots and config. A snapshot that has gone missing is
    /// unpacked again from its blob.
    pub fn resolve(&self, reference: &str) -> Result<ResolvedImage, ImageError> {
        // Image GC evaluates leases and deletes under the barrier's exclusive side.
        let _gc_barrier = self.content_guard()?;
        let (name, manifest_digest) = self.lookup(reference)?;
        let manifest = self.read_manifest(&manifest_digest)?;
        let config = self.read_config(&manifest, &manifest_digest)?;
        let layers = self.ensure_snapshots(&name, &manifest, &config)?;
        Ok(ResolvedImage {
            reference: name,
            manifest_digest,
            layers,
            config,
        })
    }

    /// Records that `reference` (a reference or a manifest digest: every reference
    /// naming that digest) was just used. A use within [`TOUCH_GRANULARITY`] of the
    /// recorded one changes nothing: every container start touches its image, and a
    /// rewrite of the index (two fsyncs) per start bought nothing image GC can see — it
    /// ranks by minutes (the kubelet keeps this time in memory only).
    pub fn touch(&self, reference: &str) -> Result<(), ImageError> {
        let (name, digest) = self.lookup(reference)?;
        // A bare digest, or a name@digest that is not itself in the index, touches
        // every reference of that manifest.
        let by_digest = is_bare_digest(&normalize_reference(reference));
        let now = Utc::now();
        self.refs.update(|index| {
            let by_digest = by_digest || !index.images.contains_key(&name);
            let mut changed = false;
            for (r, entry) in index.images.iter_mut() {
                let recent = entry
                    .last_used
                    .is_some_and(|t| now.signed_duration_since(t) < TOUCH_GRANULARITY);
                if (*r == name || (by_digest && entry.manifest == digest)) && !recent {
                    entry.last_used = Some(now);
                    changed = true;
                }
            }
            Ok(((), changed))
        })
    }

    /// Every reference in the store, sorted.
    pub fn list(&self) -> Result<Vec<ImageSummary>, ImageError> {
        let index = self.refs.read()?;
        let mut out = Vec::with_capacity(index.images.len());
        for (reference, entry) in index.images {
            let size = match self.read_manifest(&entry.manifest) {
                Ok(m) => {
                    let blobs: u64 = m.layers().iter().map(|l| l.size()).sum();
                    self.blobs.size(&entry.manifest).unwrap_or(0) + m.config().size() + blobs
                }
                Err(e) => {
                    tracing::warn!(%reference, error = %e, "cannot read manifest for size");
                    0
                }
            };
            out.push(ImageSummary {
                reference,
                size,
                last_used: entry.last_used,
                first_detected: Some(entry.first_detected()),
                pinned: entry.pinned,
                digest: entry.manifest,
            });
        }
        Ok(out)
    }

    /// `(reference, manifest digest)` for a reference, `name@digest` or bare digest.
    fn lookup(&self, reference: &str) -> Result<(String, String), ImageError> {
        let normalized = normalize_reference(reference);
        let index = self.refs.read()?;
        if let Some(entry) = index.images.get(&normalized) {
            return Ok((normalized, entry.manifest.clone()));
        }
        let not_found = || ImageError::NotFound {
            reference: normalized.clone(),
        };
        let digest = if is_bare_digest(&normalized) {
            normalized.as_str()
        } else if let Some(d) = digest_part(&normalized) {
            d
        } else {
            return Err(not_found());
        };
        sha256_hex(digest).map_err(|_| not_found())?;
        // A digest names a manifest directly, or the index a manifest was chosen from.
        let hit = index
            .images
            .iter()
            .find(|(_, e)| e.manifest == digest || e.index.as_deref() == Some(digest));
        match hit {
            Some((name, entry)) => {
                let name = if is_bare_digest(&normalized) {
                    name.clone()
                } else {
                    normalized.clone()
                };
                Ok((name, entry.manifest.clone()))
            }
            None => Err(not_found()),
        }
    }

    fn read_manifest(&self, digest: &str) -> Result<ImageManifest, ImageError> {
        let data = self.blobs.read_json_bytes(digest)?;
        ImageManifest::from_reader(&data[..]).map_err(|e| ImageError::BadJson {
            what: format!("image manifest {digest}"),
            reason: super::error::with_causes(&e),
        })
    }

    fn read_config(
        &self,
        manifest: &ImageManifest,
        manifest_digest: &str,
    ) -> Result<ImageConfiguration, ImageError> {
        let digest = manifest.config().digest().to_string();
        let data = self.blobs.read_json_bytes(&digest)?;
        let config =
            ImageConfiguration::from_reader(&data[..]).map_err(|e| ImageError::BadJson {
                what: format!("image config {digest}"),
                reason: super::error::with_causes(&e),
            })?;
        let diff_ids = config.rootfs().diff_ids();
        if diff_ids.len() != manifest.layers().len() {
            return Err(ImageError::BadJson {
                what: format!("image {manifest_digest}"),
                reason: format!(
                    "the config lists {} diff_ids but the manifest {} layers",
                    diff_ids.len(),
                    manifest.layers().len()
                ),
            });
        }
        for d in diff_ids {
            sha256_hex(d)?;
        }
        Ok(config)
    }

    /// Makes sure every layer has its snapshot; returns their dirs, bottom first.
    fn ensure_snapshots(
        &self,
        reference: &str,
        manifest: &ImageManifest,
        config: &ImageConfiguration,
    ) -> Result<Vec<PathBuf>, ImageError> {
        let diff_ids = config.rootfs().diff_ids();
        let chains = chain_ids(diff_ids);
        let total = chains.len();
        let mut dirs = Vec::with_capacity(total);
        for (i, ((layer, diff_id), chain)) in manifest
            .layers()
            .iter()
            .zip(diff_ids)
            .zip(&chains)
            .enumerate()
        {
            let dir = self.snapshots.join(sha256_hex(chain)?);
            if !dir.is_dir() {
                let digest = layer.digest().to_string();
                tracing::info!(%reference, layer = %digest, n = i + 1, of = total, size = layer.size(),
                    "unpacking layer");
                let lowers: Vec<PathBuf> = dirs.iter().rev().cloned().collect();
                self.unpack_snapshot(&digest, diff_id, &dir, &lowers)?;
            }
            dirs.push(dir);
        }
        Ok(dirs)
    }
}

/// What registry pulls (`image::pull`) need: blobs are streamed in through a
/// verifying [`BlobWriter`](super::blob_writer::BlobWriter), layers unpacked as soon
/// as they arrive, and the reference recorded last by [`ImageStore::commit`].
impl ImageStore {
    /// True if the blob `digest` (`sha256:<hex>`) is in the store.
    pub fn has_blob(&self, digest: &str) -> Result<bool, ImageError> {
        self.blobs.contains(digest)
    }

    /// A writer for blob `digest` of exactly `size` bytes; see
    /// [`BlobWriter`](super::blob_writer::BlobWriter). Blocking I/O.
    pub fn blob_writer(
        &self,
        digest: &str,
        size: u64,
    ) -> Result<super::blob_writer::BlobWriter, ImageError> {
        self.blobs.writer(digest, size)
    }

    /// The content of a small (JSON, at most 16 MiB) stored blob.
    pub fn read_blob(&self, digest: &str) -> Result<Vec<u8>, ImageError> {
        self.blobs.read_json_bytes(digest)
    }

    /// True if the snapshot of chain id `chain_id` is unpacked.
    pub fn has_snapshot(&self, chain_id: &str) -> Result<bool, ImageError> {
        Ok(self.snapshots.join(sha256_hex(chain_id)?).is_dir())
    }

    /// Records a pulled image: stores the manifest (and the index it was chosen
    /// from, `(digest, bytes)`) verified, checks that its config and layer blobs
    /// are present, unpacks any missing snapshot (as `load` does) and points
    /// `reference` (normalized here) at the manifest.
    pub fn commit(
        &self,
        reference: &str,
        manifest_digest: &str,
        manifest: &[u8],
        index: Option<(&str, &[u8])>,
    ) -> Result<(), ImageError> {
        let reference = normalize_reference(reference);
        // GC deletes nothing between the checks below and the index update. (A pull
        // should hold its own `content_guard()` from its first blob on.)
        let _gc_barrier = self.content_guard()?;
        let what = format!("manifest of {reference}");
        self.blobs.ingest(
            manifest,
            manifest_digest,
            Some(manifest.len() as u64),
            &what,
        )?;
        if let Some((digest, data)) = index {
            let what = format!("image index of {reference}");
            self.blobs
                .ingest(data, digest, Some(data.len() as u64), &what)?;
        }
        let parsed = self.read_manifest(manifest_digest)?;
        let config = self.read_config(&parsed, manifest_digest)?;
        self.ensure_snapshots(&reference, &parsed, &config)?;
        let now = Utc::now();
        self.refs.update(|refs| {
            let previous = refs.images.get(&reference);
            let index = index.map(|(d, _)| d.to_string());
            let entry = RefEntry::renewed(previous, manifest_digest, index, now);
            refs.images.insert(reference.clone(), entry);
            Ok(((), true))
        })?;
        tracing::info!(%reference, manifest = manifest_digest, layers = parsed.layers().len(),
            "recorded pulled image");
        Ok(())
    }
}

/// What image GC (`image::gc`) needs: removing and pinning references, the
/// filesystem's usage, and the GC barrier.
impl ImageStore {
    /// Deletes a reference (normalized here; a bare `sha256:` digest deletes every
    /// reference to that manifest). Its blobs and snapshots stay until image GC (or
    /// `image::gc::collect_unreferenced`) finds nothing else names them.
    pub fn remove(&self, reference: &str) -> Result<(), ImageError> {
        let normalized = normalize_reference(reference);
        let removed = self.refs.update(|index| {
            let before = index.images.len();
            if index.images.remove(&normalized).is_none() && is_bare_digest(&normalized) {
                index.images.retain(|_, e| {
                    e.manifest != normalized && e.index.as_deref() != Some(&normalized)
                });
            }
            let removed = before - index.images.len();
            Ok((removed, removed > 0))
        })?;
        if removed == 0 {
            return Err(ImageError::NotFound {
                reference: normalized,
            });
        }
        tracing::info!(reference = %normalized, removed, "removed image reference");
        Ok(())
    }

    /// Pins (or unpins) a reference: image GC never deletes a pinned image.
    pub fn set_pinned(&self, reference: &str, pinned: bool) -> Result<(), ImageError> {
        let normalized = normalize_reference(reference);
        let found = self
            .refs
            .update(|index| match index.images.get_mut(&normalized) {
                Some(e) if e.pinned == pinned => Ok((true, false)),
                Some(e) => {
                    e.pinned = pinned;
                    Ok((true, true))
                }
                None => Ok((false, false)),
            })?;
        if !found {
            return Err(ImageError::NotFound {
                reference: normalized,
            });
        }
        Ok(())
    }

    /// Capacity and available bytes of the filesystem holding the store (statvfs).
    pub fn image_fs_usage(&self) -> Result<super::gc::FsUsage, ImageError> {
        super::gc::FsUsage::of(&self.root_dir)
    }

    /// Holds image GC off (a shared flock on `images/gc.lock`) until dropped: while
    /// held, no blob or snapshot is deleted. Take it before writing content that a
    /// reference will name (a pull: from its first blob to `commit`); `load`,
    /// `commit` and `resolve` take it themselves. Blocks while a GC pass deletes.
    pub fn content_guard(&self) -> Result<super::gc::ContentGuard, ImageError> {
        super::gc::content_guard(&self.root_dir)
    }

    /// The reference index, for image GC.
    pub(super) fn ref_file(&self) -> &RefFile {
        &self.refs
    }
}

/// Where the store of `root_dir` keeps its blobs and references (snapshots are beside,
/// in `<root>/snapshots`).
pub fn images_dir(root_dir: &Path) -> PathBuf {
    root_dir.join("images")
}
