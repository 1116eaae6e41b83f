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

use nix::mount::{MntFlags, MsFlags};
use nix::sched::CloneFlags;

use super::RuntimeError;
use super::sys::{Kernel, LinuxKernel};

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
    create_in_helper_with(&LinuxKernel, ns_dir, hostname, shape, exe, pause_cgroup)
}

/// [`create_in_helper`] through `kernel`.
pub fn create_in_helper_with(
    kernel: &dyn Kernel,
    ns_dir: &Path,
    hostname: &str,
    shape: SandboxShape,
    exe: &Path,
    pause_cgroup: Option<&Path>,
) -> Result<(), RuntimeError> {
    std::fs::create_dir_all(ns_dir).map_err(|e| RuntimeError::io("create directory", ns_dir, e))?;
    let paths = SandboxPaths::new(ns_dir, shape);
    if !shape.host_ipc {
        mount_pod_shm(kernel, &paths.shm, shape.userns.map(|m| m.host_id(0)))?;
    }
    if let Some(map) = shape.userns {
        return super::userns::pod_ns::create(
            kernel,
            ns_dir,
            hostname,
            shape,
            map,
            exe,
            pause_cgroup,
        );
    }
    unshare_and_pin(kernel, &paths, hostname, shape)?;
    if shape.shared_pid {
        super::pause::start(kernel, exe, ns_dir, pause_cgroup)?;
    }
    Ok(())
}

/// Creates a pod's sandbox on a thread of its own in the calling process, without the
/// `podhost sandbox` helper's exec (about 2 ms and 1.5 ms of CPU per pod): for the pods
/// whose sandbox is only namespaces to unshare and pin (no user namespace, which a
/// multi-threaded process cannot unshare; no pause process, which would be forked).
/// The ipc, uts and net namespaces belong to the thread that unshares them, so a fresh
/// thread does it (never a pooled one, which would keep them for its next task) and
/// pins them from `/proc/thread-self/ns/`; it exits and the bind mounts keep them.
/// Blocking: call it off the async threads.
pub fn create_on_own_thread(
    ns_dir: &Path,
    hostname: &str,
    shape: SandboxShape,
) -> Result<(), RuntimeError> {
    if shape.userns.is_some() || shape.shared_pid {
        return Err(RuntimeError::Helper {
            helper: "sandbox",
            message: "a sandbox with a user namespace or a pause process needs the helper".into(),
        });
    }
    let (ns_dir, hostname) = (ns_dir.to_path_buf(), hostname.to_string());
    let dir = ns_dir.clone();
    std::thread::Builder::new()
        .name("pod-sandbox".into())
        .spawn(move || {
            let kernel = LinuxKernel;
            std::fs::create_dir_all(&ns_dir)
                .map_err(|e| RuntimeError::io("create directory", &ns_dir, e))?;
            let paths = SandboxPaths::new(&ns_dir, shape);
            if !shape.host_ipc {
                mount_pod_shm(&kernel, &paths.shm, None)?;
            }
            unshare_and_pin(&kernel, &paths, &hostname, shape)
        })
        .map_err(|e| RuntimeError::io("start a thread for the sandbox of", &dir, e))?
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// Unshares the pod's ipc, uts and net namespaces (as the shape asks), names the host
/// and brings loopback up in them, and bind-mounts them to their handles. Only the
/// calling thread enters them: the handles name `/proc/thread-self/ns/`, which in a
/// single-threaded helper is the process's own.
fn unshare_and_pin(
    kernel: &dyn Kernel,
    paths: &SandboxPaths,
    hostname: &str,
    shape: SandboxShape,
) -> Result<(), RuntimeError> {
    let mut flags = CloneFlags::empty();
    if !shape.host_ipc {
        flags |= CloneFlags::CLONE_NEWIPC;
    }
    if !shape.host_network {
        flags |= CloneFlags::CLONE_NEWUTS | CloneFlags::CLONE_NEWNET;
    }
    kernel
        .unshare(flags)
        .map_err(|e| RuntimeError::sys("unshare pod namespaces", e))?;
    if !shape.host_network {
        kernel
            .sethostname(hostname)
            .map_err(|e| RuntimeError::sys(format!("set hostname {hostname}"), e))?;
        kernel.loopback_up()?;
    }
    for (name, target) in [
        ("ipc", paths.ipc.as_ref()),
        ("uts", paths.uts.as_ref()),
        ("net", paths.net.as_ref()),
    ] {
        let Some(target) = target else { continue };
        std::fs::File::create(target).map_err(|e| RuntimeError::io("create", target, e))?;
        let source = PathBuf::from(format!("/proc/thread-self/ns/{name}"));
        kernel
            .mount(Some(&source), target, None, MsFlags::MS_BIND, None)
            .map_err(|e| {
                RuntimeError::sys(
                    format!("bind {} to {}", source.display(), target.display()),
                    e,
                )
            })?;
    }
    Ok(())
}

/// The pod's /dev/shm: a tmpfs of [`POD_SHM_SIZE`], sticky and world-writable as
/// /dev/shm is, never executable or holding devices; owned by the pod's mapped root
/// (`owner`) in a user namespace.
fn mount_pod_shm(kernel: &dyn Kernel, dir: &Path, owner: Option<u32>) -> Result<(), RuntimeError> {
    std::fs::create_dir_all(dir).map_err(|e| RuntimeError::io("create directory", dir, e))?;
    if is_mount_point(dir) {
        return Ok(());
    }
    kernel
        .mount(
            Some(Path::new("shm")),
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

/// Releases the namespace handles (the namespaces die with their last process).
pub fn destroy(ns_dir: &Path) -> Result<(), RuntimeError> {
    destroy_with(&LinuxKernel, ns_dir)
}

/// [`destroy`] through `kernel`.
pub fn destroy_with(kernel: &dyn Kernel, ns_dir: &Path) -> Result<(), RuntimeError> {
    // The pause process first: the pid namespace dies with it.
    super::pause::stop_with(kernel, ns_dir);
    for name in SHARED_NAMESPACES {
        let p = ns_dir.join(name);
        if p.exists() {
            match kernel.umount2(&p, MntFlags::MNT_DETACH) {
                Ok(()) | Err(nix::Error::EINVAL) => {}
                Err(e) => return Err(RuntimeError::sys(format!("unmount {}", p.display()), e)),
            }
            let _ = std::fs::remove_file(&p);
        }
    }
    let shm = ns_dir.join("shm");
    if shm.exists() {
        match kernel.umount2(&shm, MntFlags::MNT_DETACH) {
            Ok(()) | Err(nix::Error::EINVAL) => {}
            Err(e) => return Err(RuntimeError::sys(format!("unmount {}", shm.display()), e)),
        }
        let _ = std::fs::remove_dir(&shm);
    }
    let _ = std::fs::remove_dir(ns_dir);
    Ok(())
}

#[cfg(test)]
mod tests {
    use nix::errno::Errno;
    use nix::sys::signal::Signal;

    use super::*;
    use crate::sys::recording::{Call, FIRST_PID, RecordingKernel};
    use crate::userns::IdMap;

    fn bind(source: impl Into<PathBuf>, target: impl Into<PathBuf>) -> Call {
        Call::Mount {
            source: Some(source.into()),
            target: target.into(),
            fstype: None,
            flags: MsFlags::MS_BIND,
            data: None,
        }
    }

    fn shm(ns: &Path, data: &str) -> Call {
        Call::Mount {
            source: Some(PathBuf::from("shm")),
            target: ns.join("shm"),
            fstype: Some("tmpfs".into()),
            flags: MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            data: Some(data.into()),
        }
    }

    const SHM: &str = "mode=1777,size=65536k";
    const EXE: &str = "/usr/bin/podhost";

    /// Creates the sandbox of `shape` in a fresh ns dir with the fake.
    fn create(
        shape: SandboxShape,
        cgroup: Option<&Path>,
        k: &RecordingKernel,
    ) -> (tempfile::TempDir, PathBuf, Result<(), RuntimeError>) {
        let tmp = tempfile::tempdir().unwrap();
        let ns = tmp.path().join("ns");
        let r = create_in_helper_with(k, &ns, "web-0", shape, Path::new(EXE), cgroup);
        (tmp, ns, r)
    }

    #[test]
    fn a_pod_gets_shm_then_its_namespaces_then_pins_ipc_uts_net() {
        let k = RecordingKernel::new();
        let (_tmp, ns, r) = create(SandboxShape::default(), None, &k);
        r.unwrap();
        assert_eq!(
            k.effects(),
            vec![
                shm(&ns, SHM),
                Call::Unshare(
                    CloneFlags::CLONE_NEWIPC | CloneFlags::CLONE_NEWUTS | CloneFlags::CLONE_NEWNET
                ),
                Call::SetHostname("web-0".into()),
                Call::LoopbackUp,
                bind("/proc/thread-self/ns/ipc", ns.join("ipc")),
                bind("/proc/thread-self/ns/uts", ns.join("uts")),
                bind("/proc/thread-self/ns/net", ns.join("net")),
            ]
        );
        for pin in ["ipc", "uts", "net"] {
            assert!(
                ns.join(pin).is_file(),
                "{pin}: a file to bind the nsfs onto"
            );
        }
    }

    #[test]
    fn host_network_keeps_the_hosts_net_and_uts_and_its_hostname() {
        let k = RecordingKernel::new();
        let shape = SandboxShape {
            host_network: true,
            ..Default::default()
        };
        let (_tmp, ns, r) = create(shape, None, &k);
        r.unwrap();
        assert_eq!(
            k.effects(),
            vec![
                shm(&ns, SHM),
                Call::Unshare(CloneFlags::CLONE_NEWIPC),
                bind("/proc/thread-self/ns/ipc", ns.join("ipc")),
            ]
        );
    }

    #[test]
    fn host_ipc_keeps_the_hosts_ipc_and_dev_shm() {
        let k = RecordingKernel::new();
        let shape = SandboxShape {
            host_ipc: true,
            ..Default::default()
        };
        let (_tmp, ns, r) = create(shape, None, &k);
        r.unwrap();
        assert_eq!(
            k.effects(),
            vec![
                Call::Unshare(CloneFlags::CLONE_NEWUTS | CloneFlags::CLONE_NEWNET),
                Call::SetHostname("web-0".into()),
                Call::LoopbackUp,
                bind("/proc/thread-self/ns/uts", ns.join("uts")),
                bind("/proc/thread-self/ns/net", ns.join("net")),
            ]
        );
        let paths = SandboxPaths::new(&ns, shape);
        assert_eq!(paths.shm, Path::new("/dev/shm"));
        assert_eq!(paths.ipc, None);
    }

    #[test]
    fn host_network_and_ipc_pin_nothing() {
        let k = RecordingKernel::new();
        let shape = SandboxShape {
            host_network: true,
            host_ipc: true,
            ..Default::default()
        };
        let (_tmp, _ns, r) = create(shape, None, &k);
        r.unwrap();
        assert_eq!(k.effects(), vec![Call::Unshare(CloneFlags::empty())]);
        assert!(k.mounted().is_empty());
    }

    #[test]
    fn a_shared_pid_namespace_gets_a_pause_process_pinned_after_the_others() {
        let k = RecordingKernel::new();
        let shape = SandboxShape {
            shared_pid: true,
            ..Default::default()
        };
        let leaf = Path::new("/sys/fs/cgroup/podhost/shims");
        let (_tmp, ns, r) = create(shape, Some(leaf), &k);
        r.unwrap();
        let effects = k.effects();
        assert_eq!(
            effects[effects.len() - 4..],
            [
                Call::Unshare(CloneFlags::CLONE_NEWPID),
                Call::SpawnDetached {
                    program: EXE.into(),
                    args: vec![
                        EXE.into(),
                        "pause".into(),
                        "--ns-dir".into(),
                        ns.display().to_string()
                    ],
                },
                Call::WriteFile {
                    path: leaf.join("cgroup.procs"),
                    contents: FIRST_PID.to_string(),
                },
                bind(format!("/proc/{FIRST_PID}/ns/pid"), ns.join("pid")),
            ]
        );
        assert_eq!(
            effects[effects.len() - 5],
            bind("/proc/thread-self/ns/net", ns.join("net"))
        );
        assert_eq!(
            std::fs::read_to_string(ns.join("pause.pid")).unwrap(),
            FIRST_PID.to_string()
        );
    }

    #[test]
    fn a_pause_process_without_a_cgroup_leaf_is_not_moved() {
        let k = RecordingKernel::new();
        let shape = SandboxShape {
            shared_pid: true,
            host_network: true,
            host_ipc: true,
            ..Default::default()
        };
        let (_tmp, _ns, r) = create(shape, None, &k);
        r.unwrap();
        assert!(
            !k.effects()
                .iter()
                .any(|c| matches!(c, Call::WriteFile { .. }))
        );
    }

    #[test]
    fn a_pause_process_whose_namespace_cannot_be_pinned_is_killed() {
        let k = RecordingKernel::new();
        k.fail(
            Errno::EPERM,
            |c| matches!(c, Call::Mount { target, .. } if target.ends_with("pid")),
        );
        let shape = SandboxShape {
            shared_pid: true,
            ..Default::default()
        };
        let (_tmp, ns, r) = create(shape, None, &k);
        let err = r.unwrap_err().to_string();
        assert!(
            err.contains(&format!(
                "bind /proc/{FIRST_PID}/ns/pid to {}",
                ns.join("pid").display()
            )),
            "{err}"
        );
        assert_eq!(
            k.effects().last(),
            Some(&Call::Kill {
                pid: FIRST_PID,
                signal: Some(Signal::SIGKILL)
            })
        );
        assert!(
            !ns.join("pause.pid").exists(),
            "no pid recorded for a dead pause"
        );
    }

    #[test]
    fn a_failed_pin_stops_the_setup_and_destroy_releases_what_was_pinned() {
        let k = RecordingKernel::new();
        k.fail(
            Errno::ENOSPC,
            |c| matches!(c, Call::Mount { target, .. } if target.ends_with("net")),
        );
        let (_tmp, ns, r) = create(SandboxShape::default(), None, &k);
        let err = r.unwrap_err().to_string();
        assert!(
            err.contains(&format!(
                "bind /proc/thread-self/ns/net to {}",
                ns.join("net").display()
            )),
            "{err}"
        );
        assert_eq!(
            k.mounted(),
            vec![ns.join("shm"), ns.join("ipc"), ns.join("uts")]
        );
        // What the worker does after a failed sandbox: release it, then retry.
        destroy_with(&k, &ns).unwrap();
        assert!(k.mounted().is_empty(), "{:?}", k.mounted());
        assert!(!ns.exists(), "the ns dir is gone");
    }

    #[test]
    fn a_refused_unshare_pins_nothing() {
        let k = RecordingKernel::new();
        k.fail(Errno::EPERM, |c| matches!(c, Call::Unshare(_)));
        let (_tmp, ns, r) = create(SandboxShape::default(), None, &k);
        let err = r.unwrap_err().to_string();
        assert!(err.contains("unshare pod namespaces"), "{err}");
        assert_eq!(k.mounted(), vec![ns.join("shm")]);
    }

    #[test]
    fn a_userns_pods_shm_belongs_to_its_mapped_root() {
        let k = RecordingKernel::new();
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("shm");
        mount_pod_shm(&k, &dir, Some(IdMap { base: 131072 }.host_id(0))).unwrap();
        assert_eq!(
            k.effects(),
            vec![shm(
                tmp.path(),
                "mode=1777,size=65536k,uid=131072,gid=131072"
            )]
        );
    }

    #[test]
    fn destroying_a_sandbox_that_holds_nothing_is_fine() {
        let k = RecordingKernel::new();
        let tmp = tempfile::tempdir().unwrap();
        let ns = tmp.path().join("ns");
        std::fs::create_dir_all(ns.join("shm")).unwrap();
        std::fs::write(ns.join("net"), "").unwrap();
        // Files left by a helper that died before binding: umount says EINVAL.
        destroy_with(&k, &ns).unwrap();
        assert_eq!(
            k.effects(),
            vec![
                Call::Umount {
                    target: ns.join("net"),
                    flags: MntFlags::MNT_DETACH
                },
                Call::Umount {
                    target: ns.join("shm"),
                    flags: MntFlags::MNT_DETACH
                },
            ]
        );
        assert!(!ns.exists());
    }

    #[test]
    fn a_busy_pin_that_cannot_be_released_is_an_error() {
        let k = RecordingKernel::new();
        let (_tmp, ns, r) = create(SandboxShape::default(), None, &k);
        r.unwrap();
        k.fail(
            Errno::EPERM,
            |c| matches!(c, Call::Umount { target, .. } if target.ends_with("uts")),
        );
        let err = destroy_with(&k, &ns).unwrap_err().to_string();
        assert!(
            err.contains(&format!("unmount {}", ns.join("uts").display())),
            "{err}"
        );
        assert!(ns.join("uts").exists(), "kept for the next attempt");
    }
}
