//! Which image store `load`, `pull`, `rmi` and `gc` act on, said after each of them
//! (on stderr: their stdout stays what scripts parse).
//!
//! The daemon answering on the socket reports its root dir (`GET /info`). A
//! `--root-dir` that is not that root is refused, naming both and the socket of the
//! daemon on the root asked for when one answers: the socket is a flag of its own
//! (default /run/podhost/podhost.sock for every root), so `--root-dir` alone never
//! reaches another daemon, and acting on whichever daemon answers would land the
//! image in a store nobody asked for. With no daemon on the socket, only `load` with
//! an explicit `--root-dir` goes on, straight into that root's store, unless a daemon
//! serves that root on another socket.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::api::client::{Client, ClientError};
use crate::api::types::DaemonInfo;
use crate::disk::DEFAULT_ROOT_DIR;

/// The store a command acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageStoreTarget {
    /// Through the daemon answering on `socket`, whose `--root-dir` is `root_dir`.
    Daemon { socket: PathBuf, root_dir: PathBuf },
    /// Through a daemon that does not report its root dir (one older than this CLI).
    UnreportedRoot { socket: PathBuf },
    /// No daemon: `load` opens the store of `root_dir` itself.
    Direct { root_dir: PathBuf },
}

impl fmt::Display for ImageStoreTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Daemon { socket, root_dir } => write!(
                f,
                "the image store of {} (daemon on {})",
                root_dir.display(),
                socket.display()
            ),
            Self::UnreportedRoot { socket } => write!(
                f,
                "the image store of the daemon on {} (it does not report its root dir: an \
                 older podhost)",
                socket.display()
            ),
            Self::Direct { root_dir } => write!(
                f,
                "the image store of {} (no daemon: {} directly)",
                root_dir.display(),
                crate::image::images_dir(root_dir).display()
            ),
        }
    }
}

/// Why a command does not act on the store it was pointed at.
#[derive(Debug, thiserror::Error)]
pub enum StoreTargetError {
    /// `--root-dir` names another root than the answering daemon's.
    #[error(
        "--root-dir {given} is not the root dir of the daemon answering on {socket} (its \
         root dir is {daemon_root}); refusing to act on {daemon_root}'s image store. {hint}",
        given = given.display(), socket = socket.display(), daemon_root = daemon_root.display()
    )]
    OtherDaemonsRoot {
        given: PathBuf,
        socket: PathBuf,
        daemon_root: PathBuf,
        hint: String,
    },
    /// `--root-dir` given, and the answering daemon cannot say whether it is that root's.
    #[error(
        "--root-dir {given}: the daemon answering on {socket} does not report its root dir \
         (an older podhost; restart it with this version), so it cannot be told to be \
         {given}'s; refusing",
        given = given.display(), socket = socket.display()
    )]
    UnreportedRoot { given: PathBuf, socket: PathBuf },
    /// `load` with no daemon on the socket and no `--root-dir`.
    #[error(
        "no podhost daemon is running at {socket} ({source}); start it (or give its \
         --socket), or load without a daemon straight into its store with --root-dir DIR \
         (the daemon's --root-dir, default {DEFAULT_ROOT_DIR})",
        socket = socket.display(), source = cause
    )]
    NoDaemonNoRoot {
        socket: PathBuf,
        /// Shown in the message, not chained (it would be printed twice).
        cause: std::io::Error,
    },
    /// No daemon on the socket, but one serves `--root-dir` on another socket.
    #[error(
        "no daemon answers on {socket}, but the daemon on {root} answers on {daemon_socket}: \
         pass --socket {daemon_socket} (loading behind a running daemon's back is refused)",
        socket = socket.display(), root = root.display(), daemon_socket = daemon_socket.display()
    )]
    RootServedElsewhere {
        socket: PathBuf,
        root: PathBuf,
        daemon_socket: PathBuf,
    },
    /// No daemon on the socket, for a command that needs one.
    #[error("{cause}{}", hint.as_deref().map(|h| format!("; {h}")).unwrap_or_default())]
    NoDaemon {
        /// Shown in the message, not chained (it would be printed twice).
        cause: ClientError,
        hint: Option<String>,
    },
    /// The daemon's answer could not be had or read.
    #[error(transparent)]
    Client(#[from] ClientError),
}

/// `pull`, `rmi`, `gc`: the answering daemon's store, refused when `--root-dir` names
/// another root. No daemon is an error (naming the socket of the daemon on
/// `--root-dir` when one answers).
pub fn through_daemon(
    client: &Client,
    root_dir: Option<&Path>,
) -> Result<ImageStoreTarget, StoreTargetError> {
    match ask(client) {
        Ok(answer) => checked(client, answer, root_dir),
        Err(cause) => {
            let hint = root_dir.and_then(socket_of_daemon_on).map(|s| {
                format!(
                    "the daemon on that --root-dir answers on {}: pass --socket {}",
                    s.display(),
                    s.display()
                )
            });
            Err(StoreTargetError::NoDaemon { cause, hint })
        }
    }
}

/// `load`: as [`through_daemon`], and with no daemon on the socket (no socket file, or
/// a stale one) and an explicit `--root-dir`, that root's store directly, unless a
/// daemon serves that root on another socket.
pub fn for_load(
    client: &Client,
    root_dir: Option<&Path>,
) -> Result<ImageStoreTarget, StoreTargetError> {
    match ask(client) {
        Ok(answer) => checked(client, answer, root_dir),
        Err(ClientError::Connect { socket, source }) if no_daemon(&source) => {
            let Some(root_dir) = root_dir else {
                return Err(StoreTargetError::NoDaemonNoRoot {
                    socket,
                    cause: source,
                });
            };
            if let Some(daemon_socket) = socket_of_daemon_on(root_dir) {
                return Err(StoreTargetError::RootServedElsewhere {
                    socket: absolute(&socket),
                    root: absolute(root_dir),
                    daemon_socket,
                });
            }
            Ok(ImageStoreTarget::Direct {
                root_dir: absolute(root_dir),
            })
        }
        Err(e) => Err(e.into()),
    }
}

/// The daemon's info, or `None` for a daemon that does not serve `/info` (404).
fn ask(client: &Client) -> Result<Option<DaemonInfo>, ClientError> {
    match client.get_json::<DaemonInfo>("/info") {
        Ok(info) => Ok(Some(info)),
        Err(ClientError::Status { code: 404, .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The answering daemon as the target, unless `root_dir` is another root.
fn checked(
    client: &Client,
    answer: Option<DaemonInfo>,
    root_dir: Option<&Path>,
) -> Result<ImageStoreTarget, StoreTargetError> {
    let socket = absolute(client.socket());
    let Some(info) = answer else {
        return match root_dir {
            Some(given) => Err(StoreTargetError::UnreportedRoot {
                given: absolute(given),
                socket,
            }),
            None => Ok(ImageStoreTarget::UnreportedRoot { socket }),
        };
    };
    let daemon_root = PathBuf::from(&info.root_dir);
    if let Some(given) = root_dir
        && !same_dir(given, &daemon_root)
    {
        let given = &absolute(given);
        let hint = match socket_of_daemon_on(given) {
            Some(s) => format!(
                "The daemon on {} answers on {}: pass --socket {}.",
                given.display(),
                s.display(),
                s.display()
            ),
            None => format!(
                "No daemon answers for {} (its daemon.lock names no socket where it \
                 answers): start it with --root-dir {} and a --socket of its own (not \
                 {}), and pass that --socket.",
                given.display(),
                given.display(),
                socket.display()
            ),
        };
        return Err(StoreTargetError::OtherDaemonsRoot {
            given: given.to_path_buf(),
            socket,
            daemon_root,
            hint,
        });
    }
    Ok(ImageStoreTarget::Daemon {
        socket,
        root_dir: daemon_root,
    })
}

/// The socket of a daemon that runs on `root` now: the one its daemon.lock records,
/// if a daemon answers there and reports that root.
fn socket_of_daemon_on(root: &Path) -> Option<PathBuf> {
    let socket = crate::disk::daemon_lock::recorded_socket(root)?;
    let info = Client::new(&socket).get_json::<DaemonInfo>("/info").ok()?;
    same_dir(root, Path::new(&info.root_dir)).then_some(socket)
}

/// `path` made absolute (without resolving symlinks), for messages: a relative
/// `--root-dir` or `--socket` is shown as the path it names.
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The same directory, symlinks and `..` resolved (as given, made absolute, when it
/// does not exist).
fn same_dir(a: &Path, b: &Path) -> bool {
    let resolved = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| absolute(p));
    resolved(a) == resolved(b)
}

/// True when connecting failed because no daemon listens (no socket file, or a
/// stale one), not because one refused us (permissions).
fn no_daemon(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_says_root_and_socket_or_that_no_daemon_is_involved() {
        let daemon = ImageStoreTarget::Daemon {
            socket: "/run/b.sock".into(),
            root_dir: "/var/lib/b".into(),
        };
        assert_eq!(
            daemon.to_string(),
            "the image store of /var/lib/b (daemon on /run/b.sock)"
        );
        let direct = ImageStoreTarget::Direct {
            root_dir: "/var/lib/b".into(),
        };
        assert_eq!(
            direct.to_string(),
            "the image store of /var/lib/b (no daemon: /var/lib/b/images directly)"
        );
    }

    #[test]
    fn same_dir_sees_through_symlinks_and_dot_dot() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, tmp.path().join("link")).unwrap();
        assert!(same_dir(&tmp.path().join("link"), &real));
        assert!(same_dir(&real.join("../real"), &real));
        assert!(!same_dir(&tmp.path().join("other"), &real));
    }
}
