//! The pod sandbox: net, ipc and uts namespaces shared by the pod's containers.
//!
//! No pause process: the namespaces are kept alive by bind mounts of their nsfs files
//! under `<pod>/ns/` (as `ip netns add` does). They are made by `podhost sandbox`, a
//! short-lived single-threaded helper, and joined by path in every container's spec.

use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, unshare};

use super::RuntimeError;

/// The shared namespaces, in the order the helper creates them.
pub const SHARED_NAMESPACES: [&str; 3] = ["ipc", "uts", "net"];

/// Paths of a pod's namespace handles.
#[derive(Debug, Clone)]
pub struct SandboxPaths {
    pub ipc: PathBuf,
    pub uts: Option<PathBuf>,
    pub net: Option<PathBuf>,
}

impl SandboxPaths {
    /// With `host_network`, the pod uses the host's net and uts namespaces (as the kubelet).
    pub fn new(ns_dir: &Path, host_network: bool) -> Self {
        Self {
            ipc: ns_dir.join("ipc"),
            uts: (!host_network).then(|| ns_dir.join("uts")),
            net: (!host_network).then(|| ns_dir.join("net")),
        }
    }

    pub fn exists(&self) -> bool {
        [Some(&self.ipc), self.uts.as_ref(), self.net.as_ref()]
            .into_iter()
            .flatten()
            .all(|p| is_ns_mount(p))
    }
}

/// Whether `path` is a bind mount of a namespace (nsfs), i.e. a live handle.
pub fn is_ns_mount(path: &Path) -> bool {
    const NSFS_MAGIC: i64 = 0x6e73_6673;
    nix::sys::statfs::statfs(path)
        .map(|s| s.filesystem_type().0 == NSFS_MAGIC)
        .unwrap_or(false)
}

/// Runs in the `podhost sandbox` helper process (single-threaded until the loopback step):
/// unshares the namespaces, sets the hostname, brings loopback up and pins them.
pub fn create_in_helper(
    ns_dir: &Path,
    hostname: &str,
    host_network: bool,
) -> Result<(), RuntimeError> {
    std::fs::create_dir_all(ns_dir).map_err(|e| RuntimeError::io("create directory", ns_dir, e))?;
    let mut flags = CloneFlags::CLONE_NEWIPC;
    if !host_network {
        flags |= CloneFlags::CLONE_NEWUTS | CloneFlags::CLONE_NEWNET;
    }
    unshare(flags).map_err(|e| RuntimeError::sys("unshare pod namespaces", e))?;
    if !host_network {
        nix::unistd::sethostname(hostname)
            .map_err(|e| RuntimeError::sys(format!("set hostname {hostname}"), e))?;
        loopback_up()?;
    }
    let paths = SandboxPaths::new(ns_dir, host_network);
    for (name, target) in [
        ("ipc", Some(&paths.ipc)),
        ("uts", paths.uts.as_ref()),
        ("net", paths.net.as_ref()),
    ] {
        let Some(target) = target else { continue };
        std::fs::File::create(target).map_err(|e| RuntimeError::io("create", target, e))?;
        let source = PathBuf::from(format!("/proc/self/ns/{name}"));
        mount(
            Some(&source),
            target,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(|e| {
            RuntimeError::sys(
                format!("bind {} to {}", source.display(), target.display()),
                e,
            )
        })?;
    }
    Ok(())
}

fn loopback_up() -> Result<(), RuntimeError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| RuntimeError::Helper {
            helper: "sandbox",
            message: format!("tokio runtime: {e}"),
        })?;
    rt.block_on(async {
        let (conn, handle, _) = rtnetlink::new_connection().map_err(|e| RuntimeError::Helper {
            helper: "sandbox",
            message: format!("netlink socket: {e}"),
        })?;
        let conn_task = tokio::spawn(conn);
        // Loopback is always interface 1 in a new network namespace.
        let res = handle
            .link()
            .set(rtnetlink::LinkUnspec::new_with_index(1).up().build())
            .execute()
            .await
            .map_err(|e| RuntimeError::Helper {
                helper: "sandbox",
                message: format!("bring loopback up: {e}"),
            });
        conn_task.abort();
        res
    })
}

/// Releases the namespace handles (the namespaces die with their last process).
pub fn destroy(ns_dir: &Path) -> Result<(), RuntimeError> {
    for name in SHARED_NAMESPACES {
        let p = ns_dir.join(name);
        if p.exists() {
            match umount2(&p, MntFlags::MNT_DETACH) {
                Ok(()) | Err(nix::Error::EINVAL) => {}
                Err(e) => return Err(RuntimeError::sys(format!("unmount {}", p.display()), e)),
            }
            let _ = std::fs::remove_file(&p);
        }
    }
    let _ = std::fs::remove_dir(ns_dir);
    Ok(())
}
