//! The pod sandbox: net, ipc and uts namespaces shared by the pod's containers, and
//! the pod's /dev/shm.
//!
//! No pause process: the namespaces are kept alive by bind mounts of their nsfs files
//! under `<pod>/ns/` (as `ip netns add` does). They are made by `podhost sandbox`, a
//! short-lived single-threaded helper, and joined by path in every container's spec.
//! `<pod>/ns/shm` is a 64 MiB tmpfs bound at every container's /dev/shm, so the pod's
//! containers share it as they share the IPC namespace (containerd's sandbox shm);
//! with hostIPC the containers get the host's /dev/shm and the host's IPC namespace.

use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, unshare};

use super::RuntimeError;

/// The shared namespaces, in the order the helper creates them.
/// A `hostUsers: false` pod also pins its user namespace, `user` (see userns/pod_ns).
pub const SHARED_NAMESPACES: [&str; 5] = ["ipc", "uts", "net", "pid", "user"];

/// The size of a pod's /dev/shm (containerd's and Docker's default).
pub const POD_SHM_SIZE: &str = "65536k";

/// Which namespaces a pod's sandbox holds: the host's network and IPC namespaces
/// replace the pod's own with hostNetwork and hostIPC; a pid namespace shared by its
/// containers is added with shareProcessNamespace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SandboxShape {
    pub host_network: bool,
    pub host_ipc: bool,
    pub shared_pid: bool,
    /// hostUsers: false: the pod's own user namespace with this mapping; the other
    /// namespaces are created inside it.
    pub userns: Option<super::userns::IdMap>,
}

/// Paths of a pod's namespace handles and its /dev/shm.
#[derive(Debug, Clone)]
pub struct SandboxPaths {
    pub ipc: Option<PathBuf>,
    pub uts: Option<PathBuf>,
    pub net: Option<PathBuf>,
    /// The shared pid namespace (shareProcessNamespace), held by `podhost pause`.
    pub pid: Option<PathBuf>,
    /// The pod's user namespace (hostUsers: false).
    pub user: Option<PathBuf>,
    /// What every container mounts at /dev/shm: the pod's tmpfs, or the host's
    /// /dev/shm with hostIPC.
    pub shm: PathBuf,
    shape: SandboxShape,
    ns_dir: PathBuf,
}

impl SandboxPaths {
    /// With `host_network`, the pod uses the host's net and uts namespaces (as the
    /// kubelet); with hostIPC the host's IPC namespace and /dev/shm.
    pub fn new(ns_dir: &Path, shape: SandboxShape) -> Self {
        Self {
            ipc: (!shape.host_ipc).then(|| ns_dir.join("ipc")),
            uts: (!shape.host_network).then(|| ns_dir.join("uts")),
            net: (!shape.host_network).then(|| ns_dir.join("net")),
            pid: shape.shared_pid.then(|| super::pause::pid_ns_path(ns_dir)),
            user: shape.userns.map(|_| ns_dir.join("user")),
            shm: if shape.host_ipc {
                PathBuf::from("/dev/shm")
            } else {
                ns_dir.join("shm")
            },
            shape,
            ns_dir: ns_dir.to_path_buf(),
        }
    }

    /// The pod's ID mapping (hostUsers: false).
    pub fn id_map(&self) -> Option<super::userns::IdMap> {
        self.shape.userns
    }

    pub fn exists(&self) -> bool {
        let handles = [
            self.ipc.as_ref(),
            self.uts.as_ref(),
            self.net.as_ref(),
            self.user.as_ref(),
        ]
        .into_iter()
        .flatten()
        .all(|p| is_ns_mount(p));
        handles
            && (self.shape.host_ipc || is_mount_point(&self.shm))
            && (!self.shape.shared_pid || super::pause::alive(&self.ns_dir))
    }
}

/// Whether a filesystem is mounted at `path` (the pod's /dev/shm): its device differs
/// from its parent's. Not the filesystem type: the root dir may itself be on a tmpfs.
fn is_mount_point(path: &Path) -> bool {
    let (Ok(here), Ok(parent)) = (
        nix::sys::stat::stat(path),
        nix::sys::stat::stat(&path.join("..")),
    ) else {
        return false;
    };
    here.st_dev != parent.st_dev
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
    shape: SandboxShape,
    exe: &Path,
    pause_cgroup: Option<&Path>,
) -> Result<(), RuntimeError> {
    std::fs::create_dir_all(ns_dir).map_err(|e| RuntimeError::io("create directory", ns_dir, e))?;
    let paths = SandboxPaths::new(ns_dir, shape);
    if !shape.host_ipc {
        mount_pod_shm(&paths.shm, shape.userns.map(|m| m.host_id(0)))?;
    }
    if let Some(map) = shape.userns {
        return super::userns::pod_ns::create(ns_dir, hostname, shape, map, exe, pause_cgroup);
    }
    let mut flags = CloneFlags::empty();
    if !shape.host_ipc {
        flags |= CloneFlags::CLONE_NEWIPC;
    }
    if !shape.host_network {
        flags |= CloneFlags::CLONE_NEWUTS | CloneFlags::CLONE_NEWNET;
    }
    unshare(flags).map_err(|e| RuntimeError::sys("unshare pod namespaces", e))?;
    if !shape.host_network {
        nix::unistd::sethostname(hostname)
            .map_err(|e| RuntimeError::sys(format!("set hostname {hostname}"), e))?;
        loopback_up()?;
    }
    for (name, target) in [
        ("ipc", paths.ipc.as_ref()),
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
    if shape.shared_pid {
        super::pause::start(exe, ns_dir, pause_cgroup)?;
    }
    Ok(())
}

/// The pod's /dev/shm: a tmpfs of [`POD_SHM_SIZE`], sticky and world-writable as
/// /dev/shm is, never executable or holding devices; owned by the pod's mapped root
/// (`owner`) in a user namespace.
fn mount_pod_shm(dir: &Path, owner: Option<u32>) -> Result<(), RuntimeError> {
    std::fs::create_dir_all(dir).map_err(|e| RuntimeError::io("create directory", dir, e))?;
    if is_mount_point(dir) {
        return Ok(());
    }
    mount(
        Some("shm"),
        dir,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some(
            match owner {
                Some(id) => format!("mode=1777,size={POD_SHM_SIZE},uid={id},gid={id}"),
                None => format!("mode=1777,size={POD_SHM_SIZE}"),
            }
            .as_str(),
        ),
    )
    .map_err(|e| RuntimeError::sys(format!("mount the pod's shm at {}", dir.display()), e))
}

pub(crate) fn loopback_up() -> Result<(), RuntimeError> {
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
    // The pause process first: the pid namespace dies with it.
    super::pause::stop(ns_dir);
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
    let shm = ns_dir.join("shm");
    if shm.exists() {
        match umount2(&shm, MntFlags::MNT_DETACH) {
            Ok(()) | Err(nix::Error::EINVAL) => {}
            Err(e) => return Err(RuntimeError::sys(format!("unmount {}", shm.display()), e)),
        }
        let _ = std::fs::remove_dir(&shm);
    }
    let _ = std::fs::remove_dir(ns_dir);
    Ok(())
}
