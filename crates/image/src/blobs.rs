//! The content-addressed blob directory `images/blobs/sha256/<hex>`.
//! A blob is written to `images/tmp/`, fsynced, checked against its digest (and
//! size) and only then renamed into place, so a blob file is always complete and
//! correct.

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use super::blob_writer::BlobWriter;
use super::digest::{HashingReader, sha256_hex};
use super::error::{ImageError, IoContext};
use super::fsutil::{create_new, fsync_dir, temp_name};

/// Largest JSON document (index, manifest, config) the store will read.
const MAX_JSON: u64 = 16 << 20;

#[derive(Debug, Clone)]
pub(crate) struct Blobs {
    dir: PathBuf,
    tmp: PathBuf,
}

impl Blobs {
    /// `dir` is `images/blobs/sha256`, `tmp` is `images/tmp` (same filesystem).
    pub(crate) fn new(dir: PathBuf, tmp: PathBuf) -> Self {
        Blobs { dir, tmp }
    }

    /// Path of the blob with this digest (it may not exist).
    pub(crate) fn path(&self, digest: &str) -> Result<PathBuf, ImageError> {
        Ok(self.dir.join(sha256_hex(digest)?))
    }

    /// True if the blob is present.
    pub(crate) fn contains(&self, digest: &str) -> Result<bool, ImageError> {
        Ok(self.path(digest)?.is_file())
    }

    /// Stores the content of `reader` as blob `digest`, verifying digest and (if
    /// given) size before renaming it into place. `what` names the source for
    /// error messages. A blob already present is not rewritten (the reader is left
    /// unread).
    pub(crate) fn ingest(
        &self,
        reader: impl Read,
        digest: &str,
        size: Option<u64>,
        what: &str,
    ) -> Result<PathBuf, ImageError> {
        let dest = self.path(digest)?;
        if dest.is_file() {
            return Ok(dest);
        }
        let tmp = self.tmp.join(temp_name("blob"));
        let result = (|| {
            let mut file = create_new(&tmp, 0o644)?;
            let mut hashing = HashingReader::new(reader);
            copy(&mut hashing, &mut file, what, &tmp)?;
            let (actual, count) = hashing.finish().ctx("read", Path::new(what))?;
            if let Some(size) = size.filter(|s| *s != count) {
                return Err(ImageError::DigestMismatch {
                    what: format!("{what} ({digest})"),
                    expected: format!("{size} bytes"),
                    actual: format!("{count} bytes"),
                });
            }
            if actual != digest {
                return Err(ImageError::DigestMismatch {
                    what: what.to_string(),
                    expected: digest.to_string(),
                    actual,
                });
            }
            file.sync_all().ctx("fsync", &tmp)?;
            drop(file);
            fs::rename(&tmp, &dest).ctx("rename into place", &dest)?;
            fsync_dir(&self.dir)?;
            tracing::debug!(digest, size = count, "stored blob");
            Ok(dest.clone())
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result
    }

    /// Copies a blob file of an OCI layout into the store (verified).
    pub(crate) fn ingest_file(
        &self,
        src: &Path,
        digest: &str,
        size: Option<u64>,
    ) -> Result<PathBuf, ImageError> {
        if self.contains(digest)? {
            return self.path(digest);
        }
        let file = match fs::File::open(src) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(ImageError::MissingBlob {
                    digest: digest.to_string(),
                    source_path: src.parent().unwrap_or(src).to_path_buf(),
                });
            }
            Err(e) => return Err(ImageError::io("open", src, e)),
        };
        self.ingest(file, digest, size, &src.display().to_string())
    }

    /// Stores the content of `reader` under the sha256 computed while writing it,
    /// for sources that announce no digest (docker-archive layers). Returns
    /// `(digest, size)`. Content already present is not replaced.
    pub(crate) fn ingest_computed(
        &self,
        reader: impl Read,
        what: &str,
    ) -> Result<(String, u64), ImageError> {
        let tmp = self.tmp.join(temp_name("blob"));
        let result = (|| {
            let mut file = create_new(&tmp, 0o644)?;
            let mut hashing = HashingReader::new(reader);
            copy(&mut hashing, &mut file, what, &tmp)?;
            let (digest, count) = hashing.finish().ctx("read", Path::new(what))?;
            let dest = self.path(&digest)?;
            if dest.is_file() {
                drop(file);
                fs::remove_file(&tmp).ctx("remove", &tmp)?;
                return Ok((digest, count));
            }
            file.sync_all().ctx("fsync", &tmp)?;
            drop(file);
            fs::rename(&tmp, &dest).ctx("rename into place", &dest)?;
            fsync_dir(&self.dir)?;
            tracing::debug!(digest, size = count, "stored blob");
            Ok((digest, count))
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result
    }

    /// Reads a (small, JSON) blob whole.
    pub(crate) fn read_json_bytes(&self, digest: &str) -> Result<Vec<u8>, ImageError> {
        let path = self.path(digest)?;
        let file = fs::File::open(&path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => ImageError::MissingBlob {
                digest: digest.to_string(),
                source_path: self.dir.clone(),
            },
            _ => ImageError::io("open", &path, e),
        })?;
        let mut buf = Vec::new();
        file.take(MAX_JSON + 1)
            .read_to_end(&mut buf)
            .ctx("read", &path)?;
        if buf.len() as u64 > MAX_JSON {
            return Err(ImageError::BadJson {
                what: digest.to_string(),
                reason: format!("larger than {MAX_JSON} bytes"),
            });
        }
        Ok(buf)
    }

    /// Size in bytes of a stored blob.
    pub(crate) fn size(&self, digest: &str) -> Result<u64, ImageError> {
        let path = self.path(digest)?;
        Ok(fs::metadata(&path).ctx("stat", &path)?.len())
    }

    /// A writer that streams blob `digest` of `size` bytes into the store
    /// (registry pulls); see [`BlobWriter`].
    pub(crate) fn writer(&self, digest: &str, size: u64) -> Result<BlobWriter, ImageError> {
        BlobWriter::create(self.dir.clone(), self.tmp.clone(), digest, size)
    }
}

/// `io::copy` that tells a read error (source) from a write error (temp file).
fn copy(r: &mut impl Read, w: &mut impl Write, what: &str, tmp: &Path) -> Result<u64, ImageError> {
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ImageError::io("read", Path::new(what), e)),
        };
        w.write_all(&buf[..n]).ctx("write", tmp)?;
        total += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::super::digest::sha256_of;
    use super::*;

    fn blobs() -> (tempfile::TempDir, Blobs) {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("sha256");
        let tmp = root.path().join("tmp");
        fs::create_dir_all(&dir).unwrap();
        fs::create_dir_all(&tmp).unwrap();
        (root, Blobs::new(dir, tmp))
    }

    #[test]
    fn verified_ingest() {
        let (_root, b) = blobs();
        let d = sha256_of(b"data");
        let p = b.ingest(&b"data"[..], &d, Some(4), "test").unwrap();
        assert_eq!(fs::read(p).unwrap(), b"data");
        assert_eq!(b.read_json_bytes(&d).unwrap(), b"data");
        assert_eq!(b.size(&d).unwrap(), 4);
    }

    #[test]
    fn wrong_digest_or_size_is_rejected_and_leaves_nothing() {
        let (_root, b) = blobs();
        let d = sha256_of(b"data");
        let err = b.ingest(&b"datb"[..], &d, None, "test").unwrap_err();
        assert!(matches!(err, ImageError::DigestMismatch { .. }), "{err}");
        let err = b.ingest(&b"data"[..], &d, Some(5), "test").unwrap_err();
        assert!(matches!(err, ImageError::DigestMismatch { .. }), "{err}");
        assert!(!b.contains(&d).unwrap());
        assert_eq!(fs::read_dir(&b.tmp).unwrap().count(), 0);
    }
}
