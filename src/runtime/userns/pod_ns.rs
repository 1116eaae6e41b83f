//! A `hostUsers: false` pod's sandbox: a user namespace mapped to the pod's block,
//! and the pod's ipc, uts, net (and shared pid) namespaces created inside it, so that
//! the container's root owns them (it may set its hostname, configure its network,
//! mount its /proc and /sys).
//!
//! A process that enters a new user namespace loses its privileges over the host's
//! mount namespace, so the namespaces are made by a forked child and pinned by the
//! helper (still host root): the child unshares the user namespace, the helper writes
//! its uid/gid maps, the child becomes the namespace's root and unshares the rest,
//! and the helper bind-mounts `/proc/<child>/ns/*` under `<pod>/ns/`.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::waitpid;
use nix::unistd::{ForkResult, Gid, Pid, Uid, fork};

use super::IdMap;
use crate::runtime::RuntimeError;
use crate::runtime::sandbox::SandboxShape;

fn helper_err(message: impl Into<String>) -> RuntimeError {
    RuntimeError::Helper {
        helper: "sandbox",
        message: message.into(),
    }
}

/// In the single-threaded `podhost sandbox` helper: creates and pins the pod's user
/// namespace (`<ns_dir>/user`) and the namespaces it owns.
pub fn create(
    ns_dir: &Path,
    hostname: &str,
    shape: SandboxShape,
    map: IdMap,
    exe: &Path,
    pause_cgroup: Option<&Path>,
) -> Result<(), RuntimeError> {
    let (c2p_r, c2p_w) = nix::unistd::pipe().map_err(|e| RuntimeError::sys("pipe", e))?;
    let (p2c_r, p2c_w) = nix::unistd::pipe().map_err(|e| RuntimeError::sys("pipe", e))?;
    // SAFETY: the helper is single-threaded (nothing runs yet besides this call), so the
    // child may use the allocator and the rest of the process freely.
    match unsafe { fork() }.map_err(|e| RuntimeError::sys("fork the namespace holder", e))? {
        ForkResult::Child => {
            drop(c2p_r);
            drop(p2c_w);
            child_main(
                File::from(c2p_w),
                File::from(p2c_r),
                hostname,
                shape,
                exe,
                ns_dir,
            )
        }
        ForkResult::Parent { child } => {
            drop(c2p_w);
            drop(p2c_r);
            let mut from_child = BufReader::new(File::from(c2p_r));
            let mut to_child = File::from(p2c_w);
            let result = drive(
                &mut from_child,
                &mut to_child,
                child,
                ns_dir,
                map,
                pause_cgroup,
            );
            if result.is_err() {
                let _ = kill(child, Signal::SIGKILL);
            }
            drop(to_child); // the child exits once the pipe closes
            let _ = waitpid(child, None);
            result
        }
    }
}

fn read_line(from_child: &mut BufReader<File>) -> Result<String, RuntimeError> {
    let mut line = String::new();
    from_child
        .read_line(&mut line)
        .map_err(|e| helper_err(format!("read from the namespace holder: {e}")))?;
    let line = line.trim_end().to_string();
    match line.strip_prefix("error ") {
        Some(message) => Err(helper_err(message.to_string())),
        None if line.is_empty() => Err(helper_err("the namespace holder died")),
        None => Ok(line),
    }
}

fn drive(
    from_child: &mut BufReader<File>,
    to_child: &mut File,
    child: Pid,
    ns_dir: &Path,
    map: IdMap,
    pause_cgroup: Option<&Path>,
) -> Result<(), RuntimeError> {
    read_line(from_child)?; // "unshared"
    for file in ["uid_map", "gid_map"] {
        let path = PathBuf::from(format!("/proc/{}/{file}", child.as_raw()));
        std::fs::write(&path, map.map_line()).map_err(|e| RuntimeError::io("write", &path, e))?;
    }
    to_child
        .write_all(b"go\n")
        .map_err(|e| helper_err(format!("write to the namespace holder: {e}")))?;
    let ready = read_line(from_child)?;
    let pause: i32 = ready
        .strip_prefix("ready ")
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| helper_err(format!("unexpected message {ready:?}")))?;
    for name in ["user", "ipc", "uts", "net"] {
        let target = ns_dir.join(name);
        std::fs::File::create(&target).map_err(|e| RuntimeError::io("create", &target, e))?;
        let source = PathBuf::from(format!("/proc/{}/ns/{name}", child.as_raw()));
        mount(
            Some(&source),
            &target,
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
    if pause > 0 {
        crate::runtime::pause::pin(ns_dir, Pid::from_raw(pause), pause_cgroup)?;
    }
    Ok(())
}

/// The forked child: enters the new user namespace, becomes its root once mapped,
/// unshares the pod's namespaces inside it and waits until they are pinned.
fn child_main(
    mut to_parent: File,
    mut from_parent: File,
    hostname: &str,
    shape: SandboxShape,
    exe: &Path,
    ns_dir: &Path,
) -> ! {
    let result = (|| -> Result<i32, RuntimeError> {
        unshare(CloneFlags::CLONE_NEWUSER)
            .map_err(|e| RuntimeError::sys("unshare a user namespace", e))?;
        to_parent
            .write_all(b"unshared\n")
            .map_err(|e| helper_err(e.to_string()))?;
        let mut go = [0u8; 3];
        from_parent
            .read_exact(&mut go)
            .map_err(|e| helper_err(format!("waiting for the id maps: {e}")))?;
        let root_gid = Gid::from_raw(0);
        let root_uid = Uid::from_raw(0);
        nix::unistd::setresgid(root_gid, root_gid, root_gid)
            .map_err(|e| RuntimeError::sys("become the namespace's root group", e))?;
        nix::unistd::setgroups(&[]).map_err(|e| RuntimeError::sys("drop groups", e))?;
        nix::unistd::setresuid(root_uid, root_uid, root_uid)
            .map_err(|e| RuntimeError::sys("become the namespace's root", e))?;
        unshare(CloneFlags::CLONE_NEWIPC | CloneFlags::CLONE_NEWUTS | CloneFlags::CLONE_NEWNET)
            .map_err(|e| RuntimeError::sys("unshare the pod's namespaces", e))?;
        nix::unistd::sethostname(hostname)
            .map_err(|e| RuntimeError::sys(format!("set hostname {hostname}"), e))?;
        crate::runtime::sandbox::loopback_up()?;
        if shape.shared_pid {
            return Ok(crate::runtime::pause::spawn(exe, ns_dir)?.as_raw());
        }
        Ok(0)
    })();
    let line = match result {
        Ok(pause) => format!("ready {pause}\n"),
        Err(e) => format!("error {}\n", e.to_string().replace('\n', " ")),
    };
    let _ = to_parent.write_all(line.as_bytes());
    // Hold the namespaces until the helper has pinned them (it closes the pipe).
    let mut rest = Vec::new();
    let _ = from_parent.read_to_end(&mut rest);
    // SAFETY: _exit ends the forked child without running the parent's destructors.
    unsafe { libc::_exit(0) }
}
