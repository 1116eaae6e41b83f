//! Applies one tar entry to the snapshot: what each entry type becomes, OCI
//! whiteouts, and the metadata (owner, mode, xattrs, mtime).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{File, Permissions};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::stat::{SFlag, futimens, makedev};
use nix::unistd::{Gid, Uid, fchown};
use tar::{Entry, EntryType};
use xattr::FileExt;

use super::super::error::ImageError;
use super::super::tarmeta::{Meta, read_meta};
use super::file_copy::FileCopier;
use super::policy::{clean, is_whiteout_device, quoted, xattr_allowed};
use super::rooted::{At, AtError, RootedDir, same_inode};
use super::{SkippedEntry, UnpackStats};

const WHITEOUT_PREFIX: &[u8] = b".wh.";
const OPAQUE_MARKER: &[u8] = b".wh..wh..opq";
const OPAQUE_XATTR: &str = "trusted.overlay.opaque";
/// Skipped entries listed in [`UnpackStats::skipped`] (and logged one by one).
const MAX_SKIPPED_LISTED: usize = 100;
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// A directory whose metadata is applied at the end (creating children would
/// otherwise change its mtime, and a read-only mode would stop them).
struct PendingDir {
    rel: PathBuf,
    meta: Meta,
    name: String,
}

pub(super) struct Unpacker<'a> {
    root: RootedDir,
    layer: &'a str,
    dirs: Vec<PendingDir>,
    dir_index: HashMap<PathBuf, usize>,
    stats: UnpackStats,
    euid_root: bool,
    /// Owner of what this process creates (in a directory without set-group-ID).
    creator: (u32, u32),
    /// The last entry seen, to name where a broken stream broke.
    last_entry: String,
    last_report: Instant,
    /// Writes regular files' data (see file_copy.rs).
    copier: FileCopier,
}

impl<'a> Unpacker<'a> {
    pub(super) fn new(root: RootedDir, layer: &'a str) -> Self {
        Unpacker {
            root,
            layer,
            dirs: Vec::new(),
            dir_index: HashMap::new(),
            stats: UnpackStats::default(),
            euid_root: nix::unistd::geteuid().is_root(),
            creator: (
                nix::unistd::geteuid().as_raw(),
                nix::unistd::getegid().as_raw(),
            ),
            last_entry: String::new(),
            last_report: Instant::now(),
            copier: FileCopier::default(),
        }
    }

    pub(super) fn into_stats(self) -> UnpackStats {
        let mut stats = self.stats;
        // A directory the layer lists itself is the layer's, not made up.
        stats.implicit_dirs = self
            .root
            .implicit_dirs()
            .into_iter()
            .filter(|d| !self.dir_index.contains_key(d))
            .collect();
        stats
    }

    /// "after ENTRY" (or "at the start"), for errors of the stream itself.
    pub(super) fn position(&self) -> String {
        match self.last_entry.as_str() {
            "" => "(at the start of the layer)".to_string(),
            e => format!("(after {e})"),
        }
    }

    pub(super) fn refuse(&self, entry: &str, reason: impl Into<String>) -> ImageError {
        ImageError::UnsafeEntry {
            layer: self.layer.to_string(),
            entry: entry.to_string(),
            reason: reason.into(),
        }
    }

    pub(super) fn io_err(&self, entry: &str) -> impl FnOnce(io::Error) -> ImageError + use<> {
        let layer = self.layer.to_string();
        let entry = entry.to_string();
        move |source| ImageError::Unpack {
            layer,
            entry,
            source,
        }
    }

    fn skip(&mut self, entry: &str, reason: String) {
        self.stats.skipped_total += 1;
        if self.stats.skipped.len() < MAX_SKIPPED_LISTED {
            tracing::warn!(layer = self.layer, entry, %reason, "skipping part of the layer");
            self.stats.skipped.push(SkippedEntry {
                entry: entry.to_string(),
                reason,
            });
        }
    }

    /// Logs progress every few seconds of a long unpack.
    pub(super) fn progress(&mut self) {
        if self.last_report.elapsed() >= PROGRESS_EVERY {
            self.last_report = Instant::now();
            tracing::info!(
                layer = self.layer,
                entries = self.stats.entries,
                bytes = self.stats.bytes,
                "unpacking layer"
            );
        }
    }

    pub(super) fn entry<R: Read>(&mut self, entry: &mut Entry<'_, R>) -> Result<(), ImageError> {
        let kind = entry.header().entry_type();
        if matches!(kind, EntryType::XGlobalHeader | EntryType::XHeader) {
            return Ok(());
        }
        let raw = entry.path_bytes().into_owned();
        let name = quoted(&raw);
        self.last_entry = format!("\"{name}\"");
        self.stats.entries += 1;
        let rel = clean(&raw).map_err(|r| self.refuse(&name, r))?;
        let meta = read_meta(entry).map_err(self.io_err(&name))?;

        if rel.as_os_str().is_empty() {
            // The layer's root ("./", or "/" as umoci writes it): its mode, owner and
            // mtime apply to the snapshot root, as containerd and docker apply them.
            // Skipping it would leave the container's "/" with the mode of the
            // unpack's temp dir rather than the image's; and it cannot escape: it
            // names the snapshot root itself.
            if kind.is_dir() {
                self.pend_dir(rel, meta, name);
            } else {
                self.skip(&name, format!("a {kind:?} entry for the layer root"));
            }
            return Ok(());
        }
        let file_name = rel.file_name().unwrap_or_default().as_bytes().to_vec();
        if file_name.starts_with(WHITEOUT_PREFIX) {
            return self.whiteout(&rel, &file_name, &name);
        }

        if let Some(reason) = self.left_out(entry)? {
            self.skip(&name, reason);
            return Ok(());
        }
        let at = self.at(&rel, &name)?;
        match kind {
            EntryType::Directory => {
                let is_dir = at
                    .lstat()
                    .map_err(self.io_err(&name))?
                    .is_some_and(|s| is_dir(&s));
                if !is_dir {
                    self.clear(&at, false, &name)?;
                    at.mkdir().map_err(self.io_err(&name))?;
                }
                self.pend_dir(rel, meta, name);
            }
            EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => {
                let mut file = self.create_replacing(&at, &name, || at.create_file())?;
                let n = self
                    .copier
                    .copy(entry, &mut file)
                    .map_err(self.io_err(&name))?;
                if kind != EntryType::GNUSparse && n != entry.size() {
                    let short = io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("the layer ends after {n} of {} bytes", entry.size()),
                    );
                    return Err((self.io_err(&name))(short));
                }
                self.stats.bytes += n;
                let owned = self.already_owned(&at, &meta);
                self.fd_meta(&file, &meta, owned, &name)?;
            }
            EntryType::Symlink => {
                let target = entry.link_name_bytes().map(|t| t.into_owned());
                let target = target
                    .filter(|t| !t.is_empty() && !t.contains(&0))
                    .ok_or_else(|| self.refuse(&name, "symlink without a valid target"))?;
                let target = OsStr::from_bytes(&target);
                self.create_replacing(&at, &name, || at.symlink(target))?;
                self.at_meta(&at, &meta, true, &name)?;
            }
            EntryType::Link => {
                let target = entry.link_name_bytes().map(|t| t.into_owned());
                let target =
                    target.ok_or_else(|| self.refuse(&name, "hardlink without a target"))?;
                self.hardlink(&at, &target, &name)?;
            }
            EntryType::Char | EntryType::Block => {
                // Only whiteouts get here (see left_out).
                self.clear(&at, false, &name)?;
                self.make_whiteout(&at, &name)?;
            }
            EntryType::Fifo => {
                self.create_replacing(&at, &name, || at.mknod(SFlag::S_IFIFO, 0o600, 0))?;
                self.at_meta(&at, &meta, false, &name)?;
            }
            other => self.skip(&name, format!("unsupported entry type {other:?}")),
        }
        Ok(())
    }

    /// Why an entry is left out by policy: device nodes other than whiteouts,
    /// and types that are not files (tar's volume labels, GNU dumpdirs, ...).
    fn left_out<R: Read>(&self, entry: &Entry<'_, R>) -> Result<Option<String>, ImageError> {
        let h = entry.header();
        let kind = h.entry_type();
        match kind {
            EntryType::Char | EntryType::Block => {
                let name = quoted(&entry.path_bytes());
                let major = h.device_major().map_err(self.io_err(&name))?;
                let minor = h.device_minor().map_err(self.io_err(&name))?;
                let (major, minor) = (major.unwrap_or(0), minor.unwrap_or(0));
                let char_dev = kind == EntryType::Char;
                if is_whiteout_device(char_dev, major, minor) {
                    return Ok(None);
                }
                let what = if char_dev { "character" } else { "block" };
                Ok(Some(format!(
                    "{what} device {major}:{minor}: device nodes are not unpacked"
                )))
            }
            EntryType::Directory
            | EntryType::Regular
            | EntryType::Continuous
            | EntryType::GNUSparse
            | EntryType::Symlink
            | EntryType::Link
            | EntryType::Fifo => Ok(None),
            other => Ok(Some(format!("unsupported entry type {other:?}"))),
        }
    }

    /// `.wh..wh..opq` → opaque directory; `.wh.NAME` → char device 0:0 NAME.
    fn whiteout(&mut self, rel: &Path, file_name: &[u8], name: &str) -> Result<(), ImageError> {
        if file_name == OPAQUE_MARKER {
            // The directory itself is created when the layer does not list it.
            let at = self.at(rel, name)?;
            let dir = at.open_parent().map_err(self.io_err(name))?;
            dir.set_xattr(OPAQUE_XATTR, b"y")
                .map_err(self.io_err(name))?;
            self.stats.whiteouts += 1;
            return Ok(());
        }
        let hidden = &file_name[WHITEOUT_PREFIX.len()..];
        if hidden.starts_with(WHITEOUT_PREFIX) {
            // Other ".wh..wh." names are aufs bookkeeping (plnk, …), not content.
            tracing::debug!(
                layer = self.layer,
                entry = name,
                "ignoring aufs metadata entry"
            );
            return Ok(());
        }
        if matches!(hidden, b"" | b"." | b"..") {
            return Err(self.refuse(name, "whiteout without a valid name"));
        }
        let target = rel.with_file_name(OsStr::from_bytes(hidden));
        let at = self.at(&target, name)?;
        self.clear(&at, false, name)?;
        self.make_whiteout(&at, name)
    }

    fn make_whiteout(&mut self, at: &At, name: &str) -> Result<(), ImageError> {
        at.mknod(SFlag::S_IFCHR, 0, makedev(0, 0))
            .map_err(self.io_err(name))?;
        self.stats.whiteouts += 1;
        Ok(())
    }

    /// A hard link to an earlier non-directory of this layer.
    fn hardlink(&mut self, at: &At, target: &[u8], name: &str) -> Result<(), ImageError> {
        let shown = quoted(target);
        let not_here = || {
            self.refuse(
                name,
                format!("hardlink target \"{shown}\" is not a file of this layer"),
            )
        };
        let rel = clean(target)
            .map_err(|r| self.refuse(name, format!("hardlink target \"{shown}\": {r}")))?;
        if rel.as_os_str().is_empty() {
            return Err(not_here());
        }
        let src = match self.root.at(&rel, false) {
            Ok(src) => src,
            Err(AtError::Io(e)) => return Err((self.io_err(name))(e)),
            Err(_) => return Err(not_here()),
        };
        let src_st = src.lstat().map_err(self.io_err(name))?;
        let src_st = src_st.filter(|s| !is_dir(s)).ok_or_else(not_here)?;
        if let Some(st) = at.lstat().map_err(self.io_err(name))?
            && same_inode(&st, &src_st)
        {
            return Ok(());
        }
        self.clear(at, false, name)?;
        at.hardlink_to(&src).map_err(self.io_err(name))
    }

    /// The directory handle for `rel`, its parents created inside the root.
    fn at(&self, rel: &Path, name: &str) -> Result<At, ImageError> {
        self.root.at(rel, true).map_err(|e| match e {
            AtError::Parent(err) => {
                let parent = rel.parent().unwrap_or(Path::new(""));
                self.refuse(
                    name,
                    format!(
                        "its directory \"{}\" is not a directory inside the layer ({err})",
                        parent.display()
                    ),
                )
            }
            AtError::BadName => self.refuse(name, "the name is empty, \".\" or \"..\""),
            AtError::Io(err) => (self.io_err(name))(err),
        })
    }

    /// Creates a non-directory with `create`, first removing what is there if
    /// something is (a later entry for the same path wins, as with tar). Trying
    /// first spares the common case, a new name, an `lstat` per entry.
    fn create_replacing<T>(
        &self,
        at: &At,
        name: &str,
        create: impl Fn() -> io::Result<T>,
    ) -> Result<T, ImageError> {
        match create() {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                self.clear(at, false, name)?;
                create().map_err(self.io_err(name))
            }
            made => made.map_err(self.io_err(name)),
        }
    }

    /// Removes what is at `at` unless both it and the new entry are directories
    /// (a later entry for the same path wins, as with tar).
    fn clear(&self, at: &At, new_is_dir: bool, name: &str) -> Result<(), ImageError> {
        match at.lstat().map_err(self.io_err(name))? {
            None => Ok(()),
            Some(st) if is_dir(&st) && new_is_dir => Ok(()),
            Some(st) => self.root.remove(at, is_dir(&st)).map_err(self.io_err(name)),
        }
    }

    fn pend_dir(&mut self, rel: PathBuf, meta: Meta, name: String) {
        // A directory listed twice gets the metadata of its last entry.
        if let Some(&i) = self.dir_index.get(&rel) {
            self.dirs[i].meta = meta;
            self.dirs[i].name = name;
            return;
        }
        self.dir_index.insert(rel.clone(), self.dirs.len());
        self.dirs.push(PendingDir { rel, meta, name });
    }

    /// Applies the directories' metadata, deepest (latest) first.
    pub(super) fn finish_dirs(&mut self) -> Result<(), ImageError> {
        let dirs = std::mem::take(&mut self.dirs);
        for d in dirs.iter().rev() {
            match self.root.open_dir(&d.rel).map_err(self.io_err(&d.name))? {
                Some(dir) => self.fd_meta(&dir, &d.meta, false, &d.name)?,
                None => tracing::debug!(layer = self.layer, entry = %d.name,
                    "directory replaced later in the layer; not applying its metadata"),
            }
        }
        Ok(())
    }

    /// Whether an entry just created at `at` already has `meta`'s owner: the
    /// creator's, unless the directory passes on its group (set-group-ID). Most
    /// entries of most layers are root's, and chown is one syscall per entry.
    fn already_owned(&self, at: &At, meta: &Meta) -> bool {
        (meta.uid, meta.gid) == self.creator && !at.dir_is_setgid()
    }

    /// Ownership (unless `owned`: just created with it), then mode (chown clears
    /// set-id bits), then xattrs (chown clears security.capability), then mtime;
    /// on an open file or directory.
    fn fd_meta(
        &mut self,
        file: &File,
        meta: &Meta,
        owned: bool,
        name: &str,
    ) -> Result<(), ImageError> {
        if !owned {
            let owner = fchown(
                file,
                Some(Uid::from_raw(meta.uid)),
                Some(Gid::from_raw(meta.gid)),
            );
            self.owner_result(owner.map_err(io::Error::from), name)?;
        }
        file.set_permissions(Permissions::from_mode(meta.mode))
            .map_err(self.io_err(name))?;
        for (key, value) in &meta.xattrs {
            if self.xattr_ok(key, name)
                && let Err(e) = file.set_xattr(key, value)
            {
                self.xattr_failed(key, &e, name);
            }
        }
        futimens(file, &meta.mtime, &meta.mtime).map_err(|e| (self.io_err(name))(e.into()))
    }

    /// The same through the directory fd and name (symlinks, FIFOs).
    fn at_meta(
        &mut self,
        at: &At,
        meta: &Meta,
        symlink: bool,
        name: &str,
    ) -> Result<(), ImageError> {
        // Called right after creating the name.
        if !self.already_owned(at, meta) {
            self.owner_result(at.chown(meta.uid, meta.gid), name)?;
        }
        if !symlink {
            at.chmod(meta.mode).map_err(self.io_err(name))?;
        }
        for (key, value) in &meta.xattrs {
            if self.xattr_ok(key, name)
                && let Err(e) = at.set_xattr(key, value)
            {
                self.xattr_failed(key, &e, name);
            }
        }
        at.set_times(&meta.mtime).map_err(self.io_err(name))
    }

    /// Not being root, podhost keeps its own ownership.
    fn owner_result(&self, r: io::Result<()>, name: &str) -> Result<(), ImageError> {
        match r {
            Err(e) if !self.euid_root && e.kind() == io::ErrorKind::PermissionDenied => {
                tracing::debug!(entry = name, "not root: keeping own ownership");
                Ok(())
            }
            r => r.map_err(self.io_err(name)),
        }
    }

    fn xattr_ok(&mut self, key: &str, name: &str) -> bool {
        if xattr_allowed(key) {
            return true;
        }
        self.skip(name, format!("xattr {key} is overlayfs' own"));
        false
    }

    fn xattr_failed(&self, key: &str, e: &io::Error, name: &str) {
        tracing::warn!(layer = self.layer, entry = name, xattr = %key, error = %e,
            "cannot set xattr");
    }
}

fn is_dir(st: &nix::sys::stat::FileStat) -> bool {
    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR
}
