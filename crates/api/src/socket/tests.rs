//! Claiming the socket against real files and sockets (as root: chown to a group).

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};

use super::*;
use crate::access::SocketGroup;

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

fn group(gid: u32) -> SocketAccess {
    SocketAccess {
        group: Some(SocketGroup {
            gid,
            name: gid.to_string(),
        }),
    }
}

#[test]
fn the_socket_is_tight_before_it_is_reachable_at_its_name() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("api.sock");
    let bind = PrivateBind::new(tmp.path(), &target).unwrap();
    assert_eq!(mode(&bind.dir), 0o700, "the bind directory is private");
    let _listener = bind.bind(&group(4242)).unwrap();
    assert!(!target.exists(), "not at its name before it is published");
    let inner = std::fs::symlink_metadata(&bind.socket).unwrap();
    assert!(inner.file_type().is_socket());
    assert_eq!(inner.permissions().mode() & 0o7777, 0o660);
    assert_eq!(inner.gid(), 4242);
    bind.publish(&target).unwrap();
    assert_eq!(mode(&target), 0o660);
    let dir = bind.dir.clone();
    drop(bind);
    assert!(!dir.exists(), "the private directory is removed");
}

#[test]
fn root_only_socket_is_0600_and_answers() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("api.sock");
    let claimed = ClaimedSocket::claim(&target, SocketAccess::root_only()).unwrap();
    let meta = std::fs::symlink_metadata(&target).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o7777, 0o600);
    assert_eq!((meta.uid(), meta.gid()), (0, 0));
    UnixStream::connect(&target).expect("the claimed socket accepts connections");
    let leftovers: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".podhost-bind"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    remove_if_ours(&target, claimed.identity);
    assert!(!target.exists());
}

#[test]
fn a_live_socket_is_never_replaced() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("api.sock");
    let first = ClaimedSocket::claim(&target, SocketAccess::root_only()).unwrap();
    let err = ClaimedSocket::claim(&target, SocketAccess::root_only()).unwrap_err();
    match &err {
        SocketError::InUse { path, pid } => {
            assert_eq!(path, &target);
            assert_eq!(*pid, Some(std::process::id() as i32));
        }
        other => panic!("expected InUse, got {other:?}"),
    }
    assert!(
        err.to_string().contains("another podhost daemon (pid "),
        "{err}"
    );
    let ino = std::fs::symlink_metadata(&target).unwrap().ino();
    assert_eq!(ino, first.identity.1, "the first socket is still in place");
    UnixStream::connect(&target).expect("the first socket still answers");
}

#[test]
fn a_live_socket_without_the_lock_is_refused_too() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("api.sock");
    let _other = UnixListener::bind(&target).unwrap();
    let err = ClaimedSocket::claim(&target, SocketAccess::root_only()).unwrap_err();
    assert!(matches!(err, SocketError::InUse { .. }), "{err:?}");
}

#[test]
fn a_stale_socket_is_replaced() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("api.sock");
    drop(UnixListener::bind(&target).unwrap());
    let stale_ino = std::fs::symlink_metadata(&target).unwrap().ino();
    let claimed = ClaimedSocket::claim(&target, SocketAccess::root_only()).unwrap();
    assert_ne!(claimed.identity.1, stale_ino);
    UnixStream::connect(&target).expect("the new socket answers");
}

#[test]
fn anything_but_a_socket_is_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("file.sock");
    std::fs::write(&file, b"keep me").unwrap();
    let err = ClaimedSocket::claim(&file, SocketAccess::root_only()).unwrap_err();
    assert!(
        err.to_string().contains("is a regular file, not a socket"),
        "{err}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"keep me");

    let link = tmp.path().join("link.sock");
    std::os::unix::fs::symlink("/nonexistent", &link).unwrap();
    let err = ClaimedSocket::claim(&link, SocketAccess::root_only()).unwrap_err();
    assert!(
        matches!(
            err,
            SocketError::NotASocket {
                kind: "a symlink",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn shutdown_leaves_a_socket_that_is_not_ours() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("api.sock");
    let claimed = ClaimedSocket::claim(&target, SocketAccess::root_only()).unwrap();
    std::fs::remove_file(&target).unwrap();
    let _someone_else = UnixListener::bind(&target).unwrap();
    remove_if_ours(&target, claimed.identity);
    assert!(target.exists());
}
