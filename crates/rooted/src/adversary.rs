//! A hostile container for unit tests: a [`DirKernel`] that makes the real system calls
//! but, right before its N-th call, lets a swap run (a component of the tree replaced
//! by a symlink out of it). Running an operation once per N, for every N up to the
//! number of calls an undisturbed run makes, puts the swap between every two calls.
// Test support (compiled for tests only): a failed unwrap is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::new_without_default)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use nix::fcntl::{OFlag, ResolveFlag};
use nix::sys::stat::{FileStat, Mode};

use super::sys::{DirKernel, LINUX};

/// What the swap replaces with symlinks to the outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Swap {
    /// Every directory below the root (each to the outside dir).
    Dirs,
    /// Every file below the root (each to the outside's secret file).
    Files,
    /// Both.
    All,
}

pub struct Adversary {
    calls: AtomicUsize,
    trigger_at: AtomicUsize,
    plan: Mutex<Option<(PathBuf, PathBuf, Swap)>>,
}

impl std::fmt::Debug for Adversary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Adversary({} calls)", self.calls.load(Ordering::SeqCst))
    }
}

impl Adversary {
    /// A kernel that swaps `what` below `root` for links to `outside` right before call
    /// `at` (1-based; 0: never). Leaked: the rooted layer takes `&'static` kernels.
    pub fn new(root: &Path, outside: &Path, what: Swap, at: usize) -> &'static Self {
        Box::leak(Box::new(Self {
            calls: AtomicUsize::new(0),
            trigger_at: AtomicUsize::new(at),
            plan: Mutex::new(Some((root.to_path_buf(), outside.to_path_buf(), what))),
        }))
    }

    /// How many calls were made.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Whether the swap ran.
    pub fn swapped(&self) -> bool {
        self.plan.lock().unwrap().is_none()
    }

    fn before_call(&self) {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if n != self.trigger_at.load(Ordering::SeqCst) {
            return;
        }
        if let Some((root, outside, what)) = self.plan.lock().unwrap().take() {
            swap_below(&root, &outside, what);
        }
    }
}

/// Replaces entries below `root` with symlinks to `outside` (dirs) or `outside/secret`
/// (files), as a container would: path calls of its own, inside its volume.
fn swap_below(root: &Path, outside: &Path, what: Swap) {
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(".aside-") || name.starts_with(".link-") {
                continue;
            }
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let aside = dir.join(format!(".aside-{name}"));
            let target = if meta.is_dir() {
                if what == Swap::Files {
                    stack.push(path.clone());
                    None
                } else {
                    stack.push(aside.clone());
                    Some(outside.to_path_buf())
                }
            } else if meta.is_file() {
                (what != Swap::Dirs).then(|| outside.join("secret"))
            } else {
                None
            };
            if let Some(target) = target {
                let link = dir.join(format!(".link-{name}"));
                std::os::unix::fs::symlink(&target, &link).unwrap();
                // The entry moves aside (its content stays reachable for the walk above
                // it), and the link takes its name atomically.
                std::fs::rename(&path, &aside).unwrap();
                std::fs::rename(&link, &path).unwrap();
            }
        }
    }
}

impl DirKernel for Adversary {
    fn openat2(
        &self,
        dir: BorrowedFd<'_>,
        path: &str,
        flags: OFlag,
        mode: Mode,
        resolve: ResolveFlag,
    ) -> nix::Result<OwnedFd> {
        self.before_call();
        LINUX.openat2(dir, path, flags, mode, resolve)
    }
    fn mkdirat(&self, dir: BorrowedFd<'_>, name: &str, mode: Mode) -> nix::Result<()> {
        self.before_call();
        LINUX.mkdirat(dir, name, mode)
    }
    fn unlinkat(&self, dir: BorrowedFd<'_>, name: &str, dir_entry: bool) -> nix::Result<()> {
        self.before_call();
        LINUX.unlinkat(dir, name, dir_entry)
    }
    fn renameat(&self, dir: BorrowedFd<'_>, from: &str, to: &str) -> nix::Result<()> {
        self.before_call();
        LINUX.renameat(dir, from, to)
    }
    fn symlinkat(&self, target: &str, dir: BorrowedFd<'_>, name: &str) -> nix::Result<()> {
        self.before_call();
        LINUX.symlinkat(target, dir, name)
    }
    fn readlinkat(&self, dir: BorrowedFd<'_>, name: &str) -> nix::Result<OsString> {
        self.before_call();
        LINUX.readlinkat(dir, name)
    }
    fn lstatat(&self, dir: BorrowedFd<'_>, name: &str) -> nix::Result<FileStat> {
        self.before_call();
        LINUX.lstatat(dir, name)
    }
    fn fstat(&self, fd: BorrowedFd<'_>) -> nix::Result<FileStat> {
        self.before_call();
        LINUX.fstat(fd)
    }
    fn fchmod(&self, fd: BorrowedFd<'_>, mode: Mode) -> nix::Result<()> {
        self.before_call();
        LINUX.fchmod(fd, mode)
    }
    fn fchown(&self, fd: BorrowedFd<'_>, uid: Option<u32>, gid: Option<u32>) -> nix::Result<()> {
        self.before_call();
        LINUX.fchown(fd, uid, gid)
    }
    fn list(&self, fd: BorrowedFd<'_>) -> nix::Result<Vec<OsString>> {
        self.before_call();
        LINUX.list(fd)
    }
}

/// A host directory outside the tree: a secret file (0600) and a subdir, owned by the
/// test's user, and their snapshot.
pub struct Outside {
    pub dir: tempfile::TempDir,
    before: BTreeMap<String, String>,
}

impl Outside {
    pub fn new() -> Self {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o700)).unwrap();
        std::fs::write(dir.path().join("secret"), b"outside\n").unwrap();
        std::fs::set_permissions(dir.path().join("secret"), PermissionsExt::from_mode(0o600))
            .unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let before = snapshot(dir.path());
        Self { dir, before }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fails naming what changed outside.
    pub fn assert_untouched(&self, what: &str) {
        assert_eq!(snapshot(self.dir.path()), self.before, "{what}");
    }
}

fn snapshot(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        let m = std::fs::symlink_metadata(&p).unwrap();
        if m.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                stack.push(e.unwrap().path());
            }
        }
        let content = if m.is_file() {
            std::fs::read(&p).unwrap()
        } else {
            Vec::new()
        };
        out.insert(
            p.strip_prefix(root).unwrap().display().to_string(),
            format!("mode={:o} gid={} {:?}", m.mode(), m.gid(), content),
        );
    }
    out
}
