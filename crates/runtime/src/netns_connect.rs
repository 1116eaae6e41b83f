//! TCP connections made from inside a pod's network namespace, for probes and hooks of
//! pods without hostNetwork (podhost gives a pod no address reachable from the host: its
//! loopback is only reachable from inside).
//!
//! setns(2) changes the calling thread's namespace, so the socket is made on a dedicated
//! short-lived std thread that enters the namespace, connects and ends; the connected
//! socket keeps its namespace and is handed to tokio. No tokio thread ever changes
//! namespace.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sched::{CloneFlags, setns};

use super::RuntimeError;

/// Connects to `addr` from inside the network namespace at `netns` (a pod's
/// `<ns dir>/net`) within `timeout`. The outer error: the namespace could not be
/// entered (podhost's failure); the inner one: the connection failed (the probe's).
pub async fn connect_in_netns(
    netns: &Path,
    addr: SocketAddr,
    timeout: Duration,
) -> Result<io::Result<tokio::net::TcpStream>, RuntimeError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let path = netns.to_path_buf();
    std::thread::Builder::new()
        .name("netns-connect".into())
        .spawn(move || {
            let _ = tx.send(connect_on_this_thread(&path, addr, timeout));
        })
        .map_err(|e| RuntimeError::io("start a thread to connect in", netns, e))?;
    let connected = rx.await.map_err(|_| RuntimeError::Helper {
        helper: "netns connect thread",
        message: format!("ended without an answer for {}", netns.display()),
    })??;
    Ok(connected.and_then(|s| {
        s.set_nonblocking(true)?;
        tokio::net::TcpStream::from_std(s)
    }))
}

/// Enters `netns` (this thread only: it is about to end) and connects.
fn connect_on_this_thread(
    netns: &PathBuf,
    addr: SocketAddr,
    timeout: Duration,
) -> Result<io::Result<TcpStream>, RuntimeError> {
    let ns = std::fs::File::open(netns)
        .map_err(|e| RuntimeError::io("open the pod's network namespace", netns, e))?;
    setns(ns, CloneFlags::CLONE_NEWNET).map_err(|e| {
        RuntimeError::sys(
            format!("enter the pod's network namespace {}", netns.display()),
            e,
        )
    })?;
    Ok(TcpStream::connect_timeout(&addr, timeout))
}
