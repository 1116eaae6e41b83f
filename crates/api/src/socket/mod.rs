//! Claiming the API socket path safely.
//!
//! - Never a window with wider permissions: the socket is bound inside a fresh 0700
//!   directory next to the target, given its final mode and group there, and only then
//!   renamed into place (umask is process-wide and the daemon is multi-threaded, so
//!   it is not touched).
//! - Never a live daemon's socket unlinked: a lock file next to the socket is held for
//!   the daemon's lifetime, and an existing socket is probed first; only a stale one
//!   (connection refused) is replaced. Anything else at the path is left alone.

use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use nix::sys::socket::{AddressFamily, SockFlag, SockType, UnixAddr, connect, socket};

use super::access::SocketAccess;

/// The longest path bind(2) takes (sun_path is 108 bytes with the NUL).
const MAX_SOCKET_PATH: usize = 107;

/// Why the socket could not be claimed; each names the path and what to do.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error(
        "another podhost daemon{} is serving {path}; stop it first, or give this daemon another --socket",
        pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
    )]
    InUse { path: PathBuf, pid: Option<i32> },
    #[error(
        "another podhost daemon holds {lock}, the lock of {path}; stop it first, or give this daemon another --socket"
    )]
    Locked { path: PathBuf, lock: PathBuf },
    #[error(
        "{path} exists and is {kind}, not a socket; remove it yourself if it is not needed, or give another --socket"
    )]
    NotASocket { path: PathBuf, kind: &'static str },
    #[error(
        "cannot tell whether a daemon is serving {path} (connect: {source}); remove it if it is stale, or give another --socket"
    )]
    Probe {
        path: PathBuf,
        #[source]
        source: Errno,
    },
    #[error(
        "the socket path {path} is too long: it and the private bind directory next to it must fit in {MAX_SOCKET_PATH} bytes; choose a shorter --socket"
    )]
    TooLong { path: PathBuf },
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> SocketError {
    let path = path.to_path_buf();
    move |source| SocketError::Io {
        action,
        path,
        source,
    }
}

/// A bound, listening socket at its final path with its final mode, and the lock that
/// keeps other daemons off it until this value is dropped.
#[derive(Debug)]
pub struct ClaimedSocket {
    pub(super) listener: UnixListener,
    pub(super) path: PathBuf,
    pub(super) access: SocketAccess,
    /// (dev, ino) of the socket file, so that shutdown removes only its own socket.
    pub(super) identity: (u64, u64),
    pub(super) lock: Flock<File>,
}

impl ClaimedSocket {
    /// Takes `path` for this daemon: lock, probe what is there, bind privately, publish.
    pub fn claim(path: &Path, access: SocketAccess) -> Result<Self, SocketError> {
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent).map_err(io("create", &parent))?;
        let lock = lock_for(path)?;
        check_existing(path)?;
        let bound = PrivateBind::new(&parent, path)?;
        let listener = bound.bind(&access)?;
        let identity = bound.publish(path)?;
        listener
            .set_nonblocking(true)
            .map_err(io("set non-blocking", path))?;
        Ok(Self {
            listener,
            path: path.to_path_buf(),
            access,
            identity,
            lock,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Removes the socket at `path` if it is still the one this daemon bound.
pub(super) fn remove_if_ours(path: &Path, identity: (u64, u64)) {
    match std::fs::symlink_metadata(path) {
        Ok(m) if (m.dev(), m.ino()) == identity => {
            if let Err(e) = std::fs::remove_file(path) {
                tracing::warn!(socket = %path.display(), error = %e, "could not remove the API socket");
            }
        }
        Ok(_) => tracing::warn!(
            socket = %path.display(),
            "the API socket was replaced by someone else; leaving it"
        ),
        Err(_) => {}
    }
}

/// `<socket>.lock`, held with flock for the daemon's lifetime. Never removed: removing a
/// lock file lets two processes lock two different inodes of the same name.
fn lock_for(path: &Path) -> Result<Flock<File>, SocketError> {
    let mut name = path.as_os_str().to_owned();
    name.push(".lock");
    let lock_path = PathBuf::from(name);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&lock_path)
        .map_err(io("open the lock file", &lock_path))?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(lock),
        Err((_, Errno::EWOULDBLOCK)) => {
            // Name the other daemon's pid when its socket answers.
            check_existing(path)?;
            Err(SocketError::Locked {
                path: path.to_path_buf(),
                lock: lock_path,
            })
        }
        Err((_, e)) => Err(SocketError::Io {
            action: "lock",
            path: lock_path,
            source: e.into(),
        }),
    }
}

/// Refuses a live socket or a non-socket at `path`; a stale socket or nothing is fine.
fn check_existing(path: &Path) -> Result<(), SocketError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io("inspect", path)(e)),
    };
    let ft = meta.file_type();
    if !ft.is_socket() {
        let kind = if ft.is_symlink() {
            "a symlink"
        } else if ft.is_dir() {
            "a directory"
        } else if ft.is_file() {
            "a regular file"
        } else {
            "a special file"
        };
        return Err(SocketError::NotASocket {
            path: path.to_path_buf(),
            kind,
        });
    }
    match probe(path) {
        Probed::Live(pid) => Err(SocketError::InUse {
            path: path.to_path_buf(),
            pid,
        }),
        Probed::Stale => {
            tracing::info!(socket = %path.display(), "replacing a stale API socket (nothing listens on it)");
            Ok(())
        }
        Probed::Gone => Ok(()),
        Probed::Unknown(source) => Err(SocketError::Probe {
            path: path.to_path_buf(),
            source,
        }),
    }
}

enum Probed {
    /// Something accepted (or queued) the connection; its pid when the kernel says.
    Live(Option<i32>),
    /// Connection refused: a socket file nobody listens on.
    Stale,
    /// Removed meanwhile.
    Gone,
    Unknown(Errno),
}

/// A non-blocking connect: a listener with a full backlog must not hang the start.
fn probe(path: &Path) -> Probed {
    let addr = match UnixAddr::new(path) {
        Ok(a) => a,
        Err(e) => return Probed::Unknown(e),
    };
    let fd = match socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        None,
    ) {
        Ok(fd) => fd,
        Err(e) => return Probed::Unknown(e),
    };
    match connect(std::os::fd::AsRawFd::as_raw_fd(&fd), &addr) {
        Ok(()) => Probed::Live(podhost_runtime::peer_cred::peer_pid(&fd).ok()),
        Err(Errno::EAGAIN) => Probed::Live(None),
        Err(Errno::ECONNREFUSED) => Probed::Stale,
        Err(Errno::ENOENT) => Probed::Gone,
        Err(e) => Probed::Unknown(e),
    }
}

/// A fresh 0700 directory next to the target, where the socket is bound and given its
/// final mode and group before anyone else can reach it. Removed on drop.
pub(super) struct PrivateBind {
    pub(super) dir: PathBuf,
    pub(super) socket: PathBuf,
}

impl PrivateBind {
    pub(super) fn new(parent: &Path, target: &Path) -> Result<Self, SocketError> {
        let dir = parent.join(format!(".podhost-bind.{}", std::process::id()));
        let socket = dir.join("s");
        if socket.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(SocketError::TooLong {
                path: target.to_path_buf(),
            });
        }
        // Left by a crashed start of a process with the same pid: nobody uses it.
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(io("remove the leftover", &dir))?;
        }
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(io("create the private bind directory", &dir))?;
        Ok(Self { dir, socket })
    }

    /// Binds, then sets the final mode and group while only root can reach the socket.
    pub(super) fn bind(&self, access: &SocketAccess) -> Result<UnixListener, SocketError> {
        let listener = UnixListener::bind(&self.socket).map_err(io("bind", &self.socket))?;
        std::fs::set_permissions(&self.socket, std::fs::Permissions::from_mode(access.mode()))
            .map_err(io("chmod", &self.socket))?;
        if let Some(g) = &access.group {
            std::os::unix::fs::lchown(&self.socket, None, Some(g.gid))
                .map_err(io("chown", &self.socket))?;
        }
        Ok(listener)
    }

    /// Renames the socket onto `target` (atomically replacing a stale one) and returns
    /// its (dev, ino).
    pub(super) fn publish(&self, target: &Path) -> Result<(u64, u64), SocketError> {
        let meta = std::fs::symlink_metadata(&self.socket).map_err(io("stat", &self.socket))?;
        std::fs::rename(&self.socket, target).map_err(io("rename the socket onto", target))?;
        Ok((meta.dev(), meta.ino()))
    }
}

impl Drop for PrivateBind {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.socket);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

#[cfg(test)]
mod tests;
