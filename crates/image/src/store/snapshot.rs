//! Making a layer's snapshot in two steps: unpack into `snapshots/tmp-…`
//! ([`ImageStore::unpack_to_temp`], from the stored blob or from a download still
//! in progress), then check the diff_id, make it durable and rename it into place
//! ([`ImageStore::adopt_snapshot`]). Until then nothing is visible; a temp dir
//! left by a crash is removed at the next start.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::super::digest::sha256_hex;
use super::super::error::{ImageError, IoContext};
use super::super::fsutil::{fsync_dir, temp_name};
use super::super::unpack::{UnpackStats, resolve_implicit_dirs, unpack_layer};
use super::ImageStore;

/// A layer unpacked into a temp dir of the snapshots dir, not yet a snapshot.
/// Dropping it removes the dir.
#[derive(Debug)]
pub struct UnpackedLayer {
    /// `None` once adopted.
    tmp: Option<PathBuf>,
    /// The layer blob's digest, for messages.
    digest: String,
    stats: UnpackStats,
    started: Instant,
}

impl UnpackedLayer {
    /// The uncompressed content's digest.
    pub fn diff_id(&self) -> &str {
        &self.stats.diff_id
    }

    /// Whether adopting it needs the snapshots of the layers below to exist: it
    /// has directories it does not list, which may stand for a lower layer's
    /// symlink or directory (see `unpack::resolve_implicit_dirs`).
    pub fn needs_lowers(&self) -> bool {
        !self.stats.implicit_dirs.is_empty()
    }
}

impl Drop for UnpackedLayer {
    fn drop(&mut self) {
        if let Some(tmp) = self.tmp.take() {
            let _ = fs::remove_dir_all(tmp);
        }
    }
}

impl ImageStore {
    /// Unpacks layer `digest`'s (gzip or plain) tar read from `blob` into a new
    /// temp dir. Blocking.
    pub fn unpack_to_temp(
        &self,
        digest: &str,
        blob: impl Read + Send,
    ) -> Result<UnpackedLayer, ImageError> {
        let started = Instant::now();
        let tmp = self.snapshots.join(temp_name("snapshot"));
        fs::create_dir(&tmp).ctx("create directory", &tmp)?;
        match unpack_layer(blob, &tmp, digest) {
            Ok(stats) => Ok(UnpackedLayer {
                tmp: Some(tmp),
                digest: digest.to_string(),
                stats,
                started,
            }),
            Err(e) => {
                let _ = fs::remove_dir_all(&tmp);
                Err(e)
            }
        }
    }

    /// Makes `unpacked` the snapshot of chain `chain_id` if its content is
    /// `diff_id`: synced to disk, then renamed into place (a snapshot already
    /// there wins; this one is dropped). Returns the snapshot dir. Blocking.
    /// `parent_chains` are the chain IDs of the layers below, bottom first; their
    /// snapshots must exist if [`UnpackedLayer::needs_lowers`].
    pub fn adopt_snapshot(
        &self,
        unpacked: UnpackedLayer,
        diff_id: &str,
        chain_id: &str,
        parent_chains: &[String],
    ) -> Result<PathBuf, ImageError> {
        let dest = self.snapshots.join(sha256_hex(chain_id)?);
        let lowers = if unpacked.needs_lowers() {
            parent_chains
                .iter()
                .rev()
                .map(|c| {
                    let dir = self.snapshots.join(sha256_hex(c)?);
                    match dir.is_dir() {
                        true => Ok(dir),
                        false => Err(ImageError::io(
                            "find the snapshot of a lower layer",
                            &dir,
                            std::io::ErrorKind::NotFound.into(),
                        )),
                    }
                })
                .collect::<Result<Vec<_>, _>>()?
        } else {
            Vec::new()
        };
        self.adopt_at(unpacked, diff_id, &dest, &lowers)?;
        Ok(dest)
    }

    /// Unpacks the stored layer blob `digest` into a temp dir.
    pub fn unpack_stored(&self, digest: &str) -> Result<UnpackedLayer, ImageError> {
        let blob_path = self.blobs.path(digest)?;
        if !blob_path.is_file() {
            return Err(ImageError::MissingBlob {
                digest: digest.to_string(),
                source_path: blob_path,
            });
        }
        let blob = fs::File::open(&blob_path).ctx("open", &blob_path)?;
        self.unpack_to_temp(digest, blob)
    }

    /// Unpacks the stored layer blob `digest` and adopts it as `dest`, over
    /// `lowers` (the snapshot dirs below it, top first).
    pub(super) fn unpack_snapshot(
        &self,
        digest: &str,
        diff_id: &str,
        dest: &Path,
        lowers: &[PathBuf],
    ) -> Result<(), ImageError> {
        let unpacked = self.unpack_stored(digest)?;
        self.adopt_at(unpacked, diff_id, dest, lowers)
    }

    fn adopt_at(
        &self,
        mut unpacked: UnpackedLayer,
        diff_id: &str,
        dest: &Path,
        lowers: &[PathBuf],
    ) -> Result<(), ImageError> {
        if unpacked.stats.diff_id != diff_id {
            return Err(ImageError::DigestMismatch {
                what: format!("layer {} (uncompressed, diff_id)", unpacked.digest),
                expected: diff_id.to_string(),
                actual: unpacked.stats.diff_id.clone(),
            });
        }
        let Some(tmp) = unpacked.tmp.clone() else {
            return Ok(());
        };
        let fixes = resolve_implicit_dirs(&tmp, &unpacked.stats.implicit_dirs, lowers)
            .map_err(|e| ImageError::io("resolve directories against the lower layers", &tmp, e))?;
        for (dir, dest) in &fixes.redirected {
            tracing::info!(layer = unpacked.digest, dir = %dir.display(), to = %dest.display(),
                "a lower layer has a symlink there: entries moved to where it points");
        }
        let dir = fs::File::open(&tmp).ctx("open", &tmp)?;
        // Every file of the snapshot on disk before its name is.
        nix::unistd::syncfs(&dir).map_err(|e| ImageError::io("syncfs", &tmp, e.into()))?;
        match fs::rename(&tmp, dest) {
            Ok(()) => unpacked.tmp = None,
            Err(e) if dest.is_dir() => {
                tracing::debug!(dest = %dest.display(), error = %e, "snapshot appeared concurrently");
                return Ok(());
            }
            Err(e) => return Err(ImageError::io("rename into place", dest, e)),
        }
        fsync_dir(&self.snapshots)?;
        let stats = &unpacked.stats;
        tracing::info!(
            layer = unpacked.digest,
            entries = stats.entries,
            bytes = stats.bytes,
            whiteouts = stats.whiteouts,
            elapsed_ms = podhost_model::convert::millis(unpacked.started.elapsed()),
            "unpacked layer"
        );
        Ok(())
    }
}
