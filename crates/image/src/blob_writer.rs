//! [`BlobWriter`]: writes one blob of known digest and size into the store from
//! a stream of chunks (a registry download). It hashes and counts as it writes,
//! refuses more bytes than announced, and [`BlobWriter::commit`] checks size and
//! sha256, fsyncs and renames the temp file into `images/blobs/sha256/`. A writer
//! dropped without a successful commit removes its temp file, so nothing partial
//! ever becomes visible.

use std::fs::{self, File};
use std::io::Write;
use std::path::PathBuf;

use sha2::{Digest as _, Sha256};

use super::digest::sha256_hex;
use super::error::{ImageError, IoContext};
use super::fsutil::{create_new, fsync_dir, temp_name};

/// A blob being written; see the module docs.
#[derive(Debug)]
pub struct BlobWriter {
    digest: String,
    size: u64,
    dir: PathBuf,
    tmp: PathBuf,
    /// `None` once committed (nothing to clean up).
    file: Option<File>,
    hasher: Sha256,
    written: u64,
}

impl BlobWriter {
    /// A writer for blob `digest` (`sha256:<hex>`) of exactly `size` bytes, with its
    /// temp file in `tmp_dir` (same filesystem as `blob_dir`).
    pub(crate) fn create(
        blob_dir: PathBuf,
        tmp_dir: PathBuf,
        digest: &str,
        size: u64,
    ) -> Result<BlobWriter, ImageError> {
        sha256_hex(digest)?;
        let tmp = tmp_dir.join(temp_name("pull"));
        let file = create_new(&tmp, 0o644)?;
        Ok(BlobWriter {
            digest: digest.to_string(),
            size,
            dir: blob_dir,
            tmp,
            file: Some(file),
            hasher: Sha256::new(),
            written: 0,
        })
    }

    /// The digest this writer stores.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Appends `data`. Fails (and writes nothing) if the blob would grow beyond
    /// the size it was announced with.
    pub fn write_chunk(&mut self, data: &[u8]) -> Result<(), ImageError> {
        let total = self.written + data.len() as u64;
        if total > self.size {
            return Err(ImageError::DigestMismatch {
                what: format!("blob {}", self.digest),
                expected: format!("{} bytes", self.size),
                actual: format!("more than {} bytes", self.size),
            });
        }
        let Some(file) = self.file.as_mut() else {
            return Ok(());
        };
        file.write_all(data).ctx("write", &self.tmp)?;
        self.hasher.update(data);
        self.written = total;
        Ok(())
    }

    /// Checks size and digest, fsyncs and renames the blob into place; returns
    /// its path. A blob that is already present (a concurrent writer) is kept.
    pub fn commit(mut self) -> Result<PathBuf, ImageError> {
        let dest = self.dir.join(sha256_hex(&self.digest)?);
        if self.written != self.size {
            return Err(ImageError::DigestMismatch {
                what: format!("blob {}", self.digest),
                expected: format!("{} bytes", self.size),
                actual: format!("{} bytes", self.written),
            });
        }
        let actual = format!(
            "sha256:{}",
            hex::encode(std::mem::take(&mut self.hasher).finalize())
        );
        if actual != self.digest {
            return Err(ImageError::DigestMismatch {
                what: format!("blob {}", self.digest),
                expected: self.digest.clone(),
                actual,
            });
        }
        if let Some(file) = self.file.as_ref() {
            file.sync_all().ctx("fsync", &self.tmp)?;
        }
        self.file = None;
        if let Err(e) = fs::rename(&self.tmp, &dest) {
            let _ = fs::remove_file(&self.tmp);
            return Err(ImageError::io("rename into place", &dest, e));
        }
        fsync_dir(&self.dir)?;
        tracing::debug!(digest = %self.digest, size = self.size, "stored blob");
        Ok(dest)
    }
}

impl Drop for BlobWriter {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::digest::sha256_of;
    use super::*;

    fn dirs() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let root = tempfile::tempdir().unwrap();
        let blobs = root.path().join("sha256");
        let tmp = root.path().join("tmp");
        fs::create_dir_all(&blobs).unwrap();
        fs::create_dir_all(&tmp).unwrap();
        (root, blobs, tmp)
    }

    #[test]
    fn chunks_are_verified_and_committed() {
        let (_root, blobs, tmp) = dirs();
        let d = sha256_of(b"hello world");
        let mut w = BlobWriter::create(blobs.clone(), tmp.clone(), &d, 11).unwrap();
        w.write_chunk(b"hello ").unwrap();
        w.write_chunk(b"world").unwrap();
        assert_eq!(w.written(), 11);
        let p = w.commit().unwrap();
        assert_eq!(fs::read(p).unwrap(), b"hello world");
        assert_eq!(fs::read_dir(&tmp).unwrap().count(), 0);
    }

    #[test]
    fn oversize_short_and_wrong_content_leave_nothing() {
        let (_root, blobs, tmp) = dirs();
        let d = sha256_of(b"data");
        let mut w = BlobWriter::create(blobs.clone(), tmp.clone(), &d, 4).unwrap();
        let err = w.write_chunk(b"data!").unwrap_err();
        assert!(err.to_string().contains("more than 4 bytes"), "{err}");
        drop(w);

        let mut w = BlobWriter::create(blobs.clone(), tmp.clone(), &d, 4).unwrap();
        w.write_chunk(b"dat").unwrap();
        assert!(matches!(
            w.commit().unwrap_err(),
            ImageError::DigestMismatch { .. }
        ));

        let mut w = BlobWriter::create(blobs.clone(), tmp.clone(), &d, 4).unwrap();
        w.write_chunk(b"datb").unwrap();
        let err = w.commit().unwrap_err();
        assert!(err.to_string().contains(&d), "{err}");

        assert_eq!(fs::read_dir(&blobs).unwrap().count(), 0);
        assert_eq!(fs::read_dir(&tmp).unwrap().count(), 0);
    }
}
