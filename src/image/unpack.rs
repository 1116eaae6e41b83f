//! Unpacks one layer tar into its own snapshot directory, in the form overlayfs
//! expects of a lower dir:
//!
//! - `.wh.NAME` becomes a character device 0:0 named NAME (an overlay whiteout);
//! - `.wh..wh..opq` sets `trusted.overlay.opaque=y` on its directory;
//! - mode, ownership, mtime and `SCHILY.xattr.*` pax xattrs are preserved;
//! - symlinks are created as written (they resolve inside the container).
//!
//! Safety against hostile layers: an entry whose path is absolute or contains
//! `..` is refused, as is a hardlink whose target is; and no entry is written
//! through a symlink or a non-directory parent (each parent must be a real
//! directory inside the snapshot). The caller unpacks into a fresh private temp
//! directory, so nothing else changes the tree under us. (A later change hardens
//! this further with openat2(RESOLVE_IN_ROOT).)
//!
//! The uncompressed stream is hashed on the way; the caller compares the result
//! with the layer's diff_id.

use std::fs::{self, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use nix::fcntl::AT_FDCWD;
use nix::sys::stat::{Mode, SFlag, UtimensatFlags, makedev, mknod, utimensat};
use tar::{Entry, EntryType};

use super::compress::{Compression, decompressed};
use super::digest::HashingReader;
use super::error::ImageError;
use super::tarmeta::{Meta, read_meta};

const WHITEOUT_PREFIX: &str = ".wh.";
const OPAQUE_MARKER: &str = ".wh..wh..opq";
const OPAQUE_XATTR: &str = "trusted.overlay.opaque";

/// What an unpack did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UnpackStats {
    /// `sha256:` of the uncompressed tar (compare with the diff_id).
    pub diff_id: String,
    /// Tar entries processed.
    pub entries: u64,
    /// Bytes of regular file content written.
    pub bytes: u64,
    /// Whiteouts (files and opaque dirs) recorded.
    pub whiteouts: u64,
}

/// Unpacks the (gzip or plain) layer tar read from `blob` into `dest`, an empty
/// directory. `layer` names the layer in errors and logs.
pub(crate) fn unpack_layer(
    blob: impl Read,
    dest: &Path,
    layer: &str,
) -> Result<UnpackStats, ImageError> {
    let read_err = |e: io::Error| ImageError::Unpack {
        layer: layer.to_string(),
        entry: String::new(),
        source: e,
    };
    let (kind, stream) = decompressed(blob).map_err(read_err)?;
    if kind == Compression::Zstd {
        return Err(ImageError::UnsupportedCompression {
            layer: layer.to_string(),
            compression: "zstd",
        });
    }
    let mut hashing = HashingReader::new(stream);
    let mut unpacker = Unpacker {
        root: dest,
        layer,
        dirs: Vec::new(),
        stats: UnpackStats {
            diff_id: String::new(),
            entries: 0,
            bytes: 0,
            whiteouts: 0,
        },
        euid_root: nix::unistd::geteuid().is_root(),
    };
    {
        let mut archive = tar::Archive::new(&mut hashing);
        for entry in archive.entries().map_err(read_err)? {
            let mut entry = entry.map_err(read_err)?;
            unpacker.entry(&mut entry)?;
        }
    }
    unpacker.finish_dirs()?;
    let (diff_id, _) = hashing.finish().map_err(read_err)?;
    let mut stats = unpacker.stats;
    stats.diff_id = diff_id;
    Ok(stats)
}

struct Unpacker<'a> {
    root: &'a Path,
    layer: &'a str,
    /// Directories whose metadata is applied at the end (creating children would
    /// otherwise change their mtime).
    dirs: Vec<(PathBuf, Meta, String)>,
    stats: UnpackStats,
    euid_root: bool,
}

impl Unpacker<'_> {
    fn unsafe_entry(&self, entry: &str, reason: impl Into<String>) -> ImageError {
        ImageError::UnsafeEntry {
            layer: self.layer.to_string(),
            entry: entry.to_string(),
            reason: reason.into(),
        }
    }

    fn io_err(&self, entry: &str) -> impl FnOnce(io::Error) -> ImageError {
        let layer = self.layer.to_string();
        let entry = entry.to_string();
        move |source| ImageError::Unpack {
            layer,
            entry,
            source,
        }
    }

    fn entry<R: Read>(&mut self, entry: &mut Entry<'_, R>) -> Result<(), ImageError> {
        let raw = entry.path().map_err(self.io_err("?"))?.into_owned();
        let name = raw.display().to_string();
        let kind = entry.header().entry_type();
        if matches!(kind, EntryType::XGlobalHeader | EntryType::XHeader) {
            return Ok(());
        }
        self.stats.entries += 1;
        let rel = clean(&raw)
            .ok_or_else(|| self.unsafe_entry(&name, "the path is absolute or contains \"..\""))?;
        let meta = read_meta(entry).map_err(self.io_err(&name))?;

        if rel.as_os_str().is_empty() {
            // The layer's root ("./"): its metadata applies to the snapshot root.
            if kind.is_dir() {
                self.dirs.push((self.root.to_path_buf(), meta, name));
            }
            return Ok(());
        }

        let file_name = rel
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or_default()
            .to_string();
        if let Some(hidden) = file_name.strip_prefix(WHITEOUT_PREFIX) {
            return self.whiteout(&rel, &file_name, hidden, &name);
        }

        self.ensure_parents(&rel, &name)?;
        let target = self.root.join(&rel);
        self.clear_for(&target, kind.is_dir(), &name)?;

        match kind {
            EntryType::Directory => {
                if !target.is_dir() {
                    fs::create_dir(&target).map_err(self.io_err(&name))?;
                }
                self.dirs.push((target, meta, name));
            }
            EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => {
                let mut file = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&target)
                    .map_err(self.io_err(&name))?;
                self.stats.bytes += io::copy(entry, &mut file).map_err(self.io_err(&name))?;
                drop(file);
                self.apply_meta(&target, &meta, false, &name)?;
            }
            EntryType::Symlink => {
                let link = entry
                    .link_name()
                    .map_err(self.io_err(&name))?
                    .ok_or_else(|| self.unsafe_entry(&name, "symlink without a target"))?;
                std::os::unix::fs::symlink(&link, &target).map_err(self.io_err(&name))?;
                self.apply_meta(&target, &meta, true, &name)?;
            }
            EntryType::Link => {
                let link = entry
                    .link_name()
                    .map_err(self.io_err(&name))?
                    .ok_or_else(|| self.unsafe_entry(&name, "hardlink without a target"))?;
                let link_rel = clean(&link).filter(|l| !l.as_os_str().is_empty());
                let link_rel = link_rel.ok_or_else(|| {
                    self.unsafe_entry(
                        &name,
                        format!("hardlink target \"{}\" escapes the layer", link.display()),
                    )
                })?;
                self.check_parents(&link_rel, &name)?;
                let source = self.root.join(&link_rel);
                match fs::symlink_metadata(&source) {
                    Ok(m) if !m.is_dir() => {}
                    _ => {
                        return Err(self.unsafe_entry(
                            &name,
                            format!(
                                "hardlink target \"{}\" is not a file of this layer",
                                link.display()
                            ),
                        ));
                    }
                }
                fs::hard_link(&source, &target).map_err(self.io_err(&name))?;
            }
            EntryType::Char | EntryType::Block | EntryType::Fifo => {
                let sflag = match kind {
                    EntryType::Char => SFlag::S_IFCHR,
                    EntryType::Block => SFlag::S_IFBLK,
                    _ => SFlag::S_IFIFO,
                };
                let major = entry.header().device_major().map_err(self.io_err(&name))?;
                let minor = entry.header().device_minor().map_err(self.io_err(&name))?;
                let dev = makedev(u64::from(major.unwrap_or(0)), u64::from(minor.unwrap_or(0)));
                mknod(&target, sflag, Mode::from_bits_truncate(0o600), dev)
                    .map_err(|e| (self.io_err(&name))(e.into()))?;
                self.apply_meta(&target, &meta, false, &name)?;
            }
            other => {
                tracing::warn!(layer = self.layer, entry = %name, kind = ?other,
                    "skipping tar entry of unsupported type");
            }
        }
        Ok(())
    }

    /// `.wh..wh..opq` → opaque parent; `.wh.NAME` → char device 0:0 NAME.
    fn whiteout(
        &mut self,
        rel: &Path,
        file_name: &str,
        hidden: &str,
        name: &str,
    ) -> Result<(), ImageError> {
        let parent_rel = rel.parent().unwrap_or(Path::new(""));
        if file_name == OPAQUE_MARKER {
            // The directory itself must exist in this layer.
            self.ensure_parents(rel, name)?;
            let dir = self.root.join(parent_rel);
            xattr::set(&dir, OPAQUE_XATTR, b"y").map_err(self.io_err(name))?;
            self.stats.whiteouts += 1;
            return Ok(());
        }
        if hidden.starts_with(WHITEOUT_PREFIX) {
            // Other ".wh..wh." names are aufs bookkeeping (plnk, …), not content.
            tracing::debug!(
                layer = self.layer,
                entry = name,
                "ignoring aufs metadata entry"
            );
            return Ok(());
        }
        if hidden.is_empty() {
            return Err(self.unsafe_entry(name, "whiteout without a name"));
        }
        self.ensure_parents(rel, name)?;
        let target = self.root.join(parent_rel).join(hidden);
        self.clear_for(&target, false, name)?;
        mknod(&target, SFlag::S_IFCHR, Mode::empty(), makedev(0, 0))
            .map_err(|e| (self.io_err(name))(e.into()))?;
        self.stats.whiteouts += 1;
        Ok(())
    }

    /// Creates the missing parent directories of `rel` (mode 0755) and refuses a
    /// parent that is a symlink or not a directory.
    fn ensure_parents(&self, rel: &Path, name: &str) -> Result<(), ImageError> {
        let mut cur = self.root.to_path_buf();
        let parent = rel.parent().unwrap_or(Path::new(""));
        for comp in parent.components() {
            cur.push(comp);
            match fs::symlink_metadata(&cur) {
                Ok(m) if m.file_type().is_dir() => {}
                Ok(_) => {
                    return Err(self.unsafe_entry(
                        name,
                        format!(
                            "parent \"{}\" is a symlink or not a directory",
                            cur.strip_prefix(self.root).unwrap_or(&cur).display()
                        ),
                    ));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    fs::create_dir(&cur).map_err(self.io_err(name))?;
                    fs::set_permissions(&cur, fs::Permissions::from_mode(0o755))
                        .map_err(self.io_err(name))?;
                }
                Err(e) => return Err((self.io_err(name))(e)),
            }
        }
        Ok(())
    }

    /// Like [`Self::ensure_parents`] but creates nothing (for hardlink targets).
    fn check_parents(&self, rel: &Path, name: &str) -> Result<(), ImageError> {
        let mut cur = self.root.to_path_buf();
        for comp in rel.parent().unwrap_or(Path::new("")).components() {
            cur.push(comp);
            match fs::symlink_metadata(&cur) {
                Ok(m) if m.file_type().is_dir() => {}
                _ => {
                    return Err(
                        self.unsafe_entry(name, "hardlink target's parent is a symlink or missing")
                    );
                }
            }
        }
        Ok(())
    }

    /// Removes whatever is at `target` unless both it and the new entry are
    /// directories (a later entry for the same path wins, as with tar).
    fn clear_for(&self, target: &Path, new_is_dir: bool, name: &str) -> Result<(), ImageError> {
        match fs::symlink_metadata(target) {
            Ok(m) if m.file_type().is_dir() => {
                if !new_is_dir {
                    fs::remove_dir_all(target).map_err(self.io_err(name))?;
                }
            }
            Ok(_) => fs::remove_file(target).map_err(self.io_err(name))?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err((self.io_err(name))(e)),
        }
        Ok(())
    }

    /// Ownership, then mode (chown clears set-id bits), then xattrs (chown clears
    /// security.capability), then mtime.
    fn apply_meta(
        &self,
        path: &Path,
        meta: &Meta,
        symlink: bool,
        name: &str,
    ) -> Result<(), ImageError> {
        if let Err(e) = std::os::unix::fs::lchown(path, Some(meta.uid), Some(meta.gid)) {
            if self.euid_root || e.kind() != io::ErrorKind::PermissionDenied {
                return Err((self.io_err(name))(e));
            }
            tracing::debug!(entry = name, "not root: keeping own ownership");
        }
        if !symlink {
            fs::set_permissions(path, fs::Permissions::from_mode(meta.mode))
                .map_err(self.io_err(name))?;
        }
        for (key, value) in &meta.xattrs {
            if let Err(e) = xattr::set(path, key, value) {
                tracing::warn!(layer = self.layer, entry = name, xattr = %key, error = %e,
                    "cannot set xattr");
            }
        }
        utimensat(
            AT_FDCWD,
            path,
            &meta.mtime,
            &meta.mtime,
            UtimensatFlags::NoFollowSymlink,
        )
        .map_err(|e| (self.io_err(name))(e.into()))?;
        Ok(())
    }

    fn finish_dirs(&mut self) -> Result<(), ImageError> {
        let dirs = std::mem::take(&mut self.dirs);
        for (path, meta, name) in &dirs {
            self.apply_meta(path, meta, false, name)?;
        }
        Ok(())
    }
}

/// The entry path as relative components, without `.`; `None` if it is absolute
/// or contains `..`. An empty result is the layer root.
fn clean(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for comp in path.components() {
        match comp {
            Component::Normal(c) => out.push(c),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_refuses_escapes() {
        assert_eq!(clean(Path::new("./a/b")), Some(PathBuf::from("a/b")));
        assert_eq!(clean(Path::new("./")), Some(PathBuf::new()));
        assert_eq!(clean(Path::new("../escape")), None);
        assert_eq!(clean(Path::new("a/../../b")), None);
        assert_eq!(clean(Path::new("/etc/passwd")), None);
    }
}
