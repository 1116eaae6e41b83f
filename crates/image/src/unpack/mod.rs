//! Unpacks one layer tar into its own snapshot directory, in the form overlayfs
//! expects of a lower dir:
//!
//! - `.wh.NAME` becomes a character device 0:0 named NAME (an overlay whiteout);
//!   a character device 0:0 in the tar is one already;
//! - `.wh..wh..opq` sets `trusted.overlay.opaque=y` on its directory;
//! - ownership, mode (set-id bits included: it is a container image), mtime and
//!   `SCHILY.xattr.*` pax xattrs are preserved;
//! - symlinks are created as written (they resolve inside the container).
//!
//! Safety against hostile layers (`rooted.rs`): every path, hardlink targets
//! included, is resolved by the kernel with `openat2(RESOLVE_IN_ROOT)` through
//! libpathrs, so `..`, absolute names and symlinks (absolute, relative, chains,
//! loops) all stay inside the snapshot, as they would inside the container; the
//! final component is then created with `*at()` calls that never follow it. On
//! top of that, a policy (`policy.rs`) reads a leading `/` as the layer root
//! (as containerd and docker do), refuses names that hold `..` with a clear error, skips device nodes other than whiteouts and drops
//! overlayfs' own xattrs, and `budget.rs` bounds the memory a long name or pax
//! header can take.
//!
//! The caller unpacks into a fresh private temp directory and renames it into
//! place only on success: an error (a hostile entry, a truncated or corrupt
//! stream, a full disk) leaves a temp directory that the caller removes, and a
//! crash one that the next `ImageStore::open` removes.
//!
//! The uncompressed stream is hashed on the way; the caller compares the result
//! with the layer's diff_id.

mod apply;
mod budget;
mod file_copy;
mod lower;
mod policy;
mod read_ahead;
mod rooted;

use std::cell::Cell;
use std::io::{self, Read};
use std::path::Path;
use std::rc::Rc;

use super::compress::{Compression, decompressed};
use super::digest::HashingReader;
use super::error::ImageError;
use apply::Unpacker;
use budget::{Budget, MetaBudget};
use rooted::RootedDir;

pub use lower::{MergedReadError, read_merged_file, resolve_implicit_dirs};

/// What an unpack did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnpackStats {
    /// `sha256:` of the uncompressed tar (compare with the diff_id).
    pub diff_id: String,
    /// Tar entries processed.
    pub entries: u64,
    /// Bytes of regular file content written.
    pub bytes: u64,
    /// Whiteouts (files and opaque dirs) recorded.
    pub whiteouts: u64,
    /// Entries (or parts of entries, such as an xattr) left out by policy, the
    /// first 100 of them; each is also logged as a warning.
    pub skipped: Vec<SkippedEntry>,
    /// How many were left out in all.
    pub skipped_total: u64,
    /// Directories the layer does not list but has entries in (created with mode
    /// 0755), shallowest first. Below a lower layer's symlink or directory they
    /// are resolved against the lower layers before the snapshot is used
    /// ([`resolve_implicit_dirs`]).
    pub implicit_dirs: Vec<std::path::PathBuf>,
}

/// An entry, or part of one, that the unpack policy left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedEntry {
    /// The entry's path as written in the tar.
    pub entry: String,
    /// What was left out and why ("block device 8:0: device nodes are not unpacked").
    pub reason: String,
}

/// Unpacks the (gzip or plain) layer tar read from `blob` into `dest`, an empty
/// directory that nothing else writes to. `layer` names the layer in errors and
/// logs. On error `dest` holds part of the layer: the caller removes it.
pub fn unpack_layer(
    blob: impl Read + Send,
    dest: &Path,
    layer: &str,
) -> Result<UnpackStats, ImageError> {
    let (kind, stream) = decompressed(blob).map_err(|e| at_start(layer, e))?;
    if kind == Compression::Zstd {
        return Err(ImageError::UnsupportedCompression {
            layer: layer.to_string(),
            compression: "zstd",
        });
    }
    let root = RootedDir::open(dest).map_err(|e| ImageError::io("open", dest, e))?;
    std::thread::scope(|scope| unpack_stream(read_ahead::spawn(scope, stream), root, layer))
}

/// Unpacks the decompressed tar `stream` with `root` as the layer's root.
fn unpack_stream(
    stream: impl Read,
    root: RootedDir,
    layer: &str,
) -> Result<UnpackStats, ImageError> {
    let mut unpacker = Unpacker::new(root, layer);
    let mut hashing = HashingReader::new(stream);
    let budget = Rc::new(Budget::default());
    let mut ended_early = None;
    {
        let consumed = Rc::new(Cell::new(0));
        let counted = Counted {
            inner: &mut hashing,
            consumed: consumed.clone(),
        };
        let mut archive = tar::Archive::new(MetaBudget::new(counted, budget.clone()));
        let mut entries = archive.entries().map_err(|e| at_start(layer, e))?;
        // Where the last entry's data ended in the stream.
        let mut data_end = None;
        loop {
            budget.arm();
            let next = entries.next();
            budget.disarm();
            let Some(entry) = next else { break };
            let mut entry = match entry {
                // umoci 0.4 (`umoci insert`) ends a layer right after the last file's
                // data, without its padding or the end-of-archive blocks. Go's
                // archive/tar (containerd, docker, podman) reads that as the end; so
                // does podhost, but only when nothing at all follows the data: a
                // stream cut anywhere else is still an error (and the diff_id check
                // would catch a cut that happened to land there).
                Err(_) if data_end.is_some() && data_end == Some(consumed.get()) => {
                    tracing::debug!(
                        layer,
                        "layer ends after the last entry's data (no tar padding)"
                    );
                    ended_early = data_end;
                    break;
                }
                entry => entry.map_err(|e| stream_error(&unpacker, &budget, e))?,
            };
            unpacker.entry(&mut entry)?;
            // Data the entry's type does not use is read here, outside the budget.
            io::copy(&mut entry, &mut io::sink())
                .map_err(|e| stream_error(&unpacker, &budget, e))?;
            data_end = Some(entry.raw_file_position() + entry.size());
            unpacker.progress();
        }
    }
    unpacker.finish_dirs()?;
    let (diff_id, total) = hashing
        .finish()
        .map_err(|e| stream_error(&unpacker, &budget, e))?;
    // Taken for the end above only if the stream really ends there.
    if ended_early.is_some_and(|end| end != total) {
        let e = io::Error::new(io::ErrorKind::InvalidData, "the tar stream is damaged");
        return Err(stream_error(&unpacker, &budget, e));
    }
    let mut stats = unpacker.into_stats();
    stats.diff_id = diff_id;
    Ok(stats)
}

/// Counts the bytes read through it (the position in the tar stream).
struct Counted<R> {
    inner: R,
    consumed: Rc<Cell<u64>>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.consumed.set(self.consumed.get() + n as u64);
        Ok(n)
    }
}

/// An error reading the layer before its first entry.
fn at_start(layer: &str, source: io::Error) -> ImageError {
    ImageError::Unpack {
        layer: layer.to_string(),
        entry: "(at the start of the layer)".to_string(),
        source,
    }
}

/// An error of the stream itself (corrupt gzip or tar, truncation, a metadata
/// header over budget), named by where it happened.
fn stream_error(unpacker: &Unpacker<'_>, budget: &Budget, e: io::Error) -> ImageError {
    let at = unpacker.position();
    if budget.tripped() {
        return unpacker.refuse(&at, e.to_string());
    }
    unpacker.io_err(&at)(e)
}

#[cfg(test)]
mod tests;
