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

use nix::mount::MsFlags;
use nix::sched::CloneFlags;
use nix::sys::signal::Signal;
use nix::sys::wait::waitpid;
use nix::unistd::{ForkResult, Gid, Pid, Uid, fork};

use super::IdMap;
use crate::RuntimeError;
use crate::sandbox::SandboxShape;
use crate::sys::Kernel;

fn helper_err(message: impl Into<String>) -> RuntimeError {
    RuntimeError::Helper {
        helper: "sandbox",
        message: message.into(),
    }
}

/// In the single-threaded `podhost sandbox` helper: creates and pins the pod's user
/// namespace (`<ns_dir>/user`) and the namespaces it owns.
pub fn create(
    kernel: &dyn Kernel,
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
                kernel,
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
                kernel,
                &mut from_child,
                &mut to_child,
                child,
                ns_dir,
                map,
                pause_cgroup,
            );
            if result.is_err() {
                let _ = kernel.kill(child, Some(Signal::SIGKILL));
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

/// The helper's side: writes the child's id maps once it is in its user namespace,
/// lets it go on, and pins its namespaces (the user namespace first: the others
/// belong to it) and its pause process's pid namespace.
fn drive(
    kernel: &dyn Kernel,
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
        kernel
            .write_file(&path, &map.map_line())
            .map_err(|e| RuntimeError::io("write", &path, e))?;
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
        kernel
            .mount(Some(&source), &target, None, MsFlags::MS_BIND, None)
            .map_err(|e| {
                RuntimeError::sys(
                    format!("bind {} to {}", source.display(), target.display()),
                    e,
                )
            })?;
    }
    if pause > 0 {
        crate::pause::pin(kernel, ns_dir, Pid::from_raw(pause), pause_cgroup)?;
    }
    Ok(())
}

/// The forked child: enters the new user namespace, becomes its root once mapped,
/// unshares the pod's namespaces inside it and waits until they are pinned.
fn child_main(
    kernel: &dyn Kernel,
    mut to_parent: File,
    mut from_parent: File,
    hostname: &str,
    shape: SandboxShape,
    exe: &Path,
    ns_dir: &Path,
) -> ! {
    let result = enter_namespaces(
        kernel,
        &mut to_parent,
        &mut from_parent,
        hostname,
        shape,
        exe,
        ns_dir,
    );
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

/// The child's steps, in the order the kernel needs them: a user namespace, its id
/// maps (written by the helper meanwhile), root inside it, then the namespaces it
/// will own; returns the pause process's pid (0 without a shared pid namespace).
fn enter_namespaces(
    kernel: &dyn Kernel,
    to_parent: &mut impl Write,
    from_parent: &mut impl Read,
    hostname: &str,
    shape: SandboxShape,
    exe: &Path,
    ns_dir: &Path,
) -> Result<i32, RuntimeError> {
    kernel
        .unshare(CloneFlags::CLONE_NEWUSER)
        .map_err(|e| RuntimeError::sys("unshare a user namespace", e))?;
    to_parent
        .write_all(b"unshared\n")
        .map_err(|e| helper_err(e.to_string()))?;
    let mut go = [0u8; 3];
    from_parent
        .read_exact(&mut go)
        .map_err(|e| helper_err(format!("waiting for the id maps: {e}")))?;
    kernel
        .setresgid(Gid::from_raw(0))
        .map_err(|e| RuntimeError::sys("become the namespace's root group", e))?;
    kernel
        .setgroups(&[])
        .map_err(|e| RuntimeError::sys("drop groups", e))?;
    kernel
        .setresuid(Uid::from_raw(0))
        .map_err(|e| RuntimeError::sys("become the namespace's root", e))?;
    kernel
        .unshare(CloneFlags::CLONE_NEWIPC | CloneFlags::CLONE_NEWUTS | CloneFlags::CLONE_NEWNET)
        .map_err(|e| RuntimeError::sys("unshare the pod's namespaces", e))?;
    kernel
        .sethostname(hostname)
        .map_err(|e| RuntimeError::sys(format!("set hostname {hostname}"), e))?;
    kernel.loopback_up()?;
    if shape.shared_pid {
        return Ok(crate::pause::spawn(kernel, exe, ns_dir)?.as_raw());
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use std::io::Seek;

    use nix::errno::Errno;

    use super::*;
    use crate::sys::recording::{Call, FIRST_PID, RecordingKernel};

    const MAP: IdMap = IdMap { base: 196608 };
    const CHILD: i32 = 777;

    fn bind(source: String, target: PathBuf) -> Call {
        Call::Mount {
            source: Some(PathBuf::from(source)),
            target,
            fstype: None,
            flags: MsFlags::MS_BIND,
            data: None,
        }
    }

    /// The helper's side against a child that says `script`; returns what the helper
    /// sent the child and the result.
    fn drive_with(
        k: &RecordingKernel,
        ns: &Path,
        script: &str,
        pause_cgroup: Option<&Path>,
    ) -> (String, Result<(), RuntimeError>) {
        let mut said = tempfile::tempfile().unwrap();
        said.write_all(script.as_bytes()).unwrap();
        said.rewind().unwrap();
        let mut to_child = tempfile::tempfile().unwrap();
        let r = drive(
            k,
            &mut BufReader::new(said),
            &mut to_child,
            Pid::from_raw(CHILD),
            ns,
            MAP,
            pause_cgroup,
        );
        to_child.rewind().unwrap();
        let mut sent = String::new();
        to_child.read_to_string(&mut sent).unwrap();
        (sent, r)
    }

    #[test]
    fn the_helper_maps_ids_before_letting_the_child_go_then_pins_user_first() {
        let k = RecordingKernel::new();
        let tmp = tempfile::tempdir().unwrap();
        let (sent, r) = drive_with(&k, tmp.path(), "unshared\nready 0\n", None);
        r.unwrap();
        assert_eq!(sent, "go\n");
        let mut expected = vec![
            Call::WriteFile {
                path: PathBuf::from(format!("/proc/{CHILD}/uid_map")),
                contents: "0 196608 65536\n".into(),
            },
            Call::WriteFile {
                path: PathBuf::from(format!("/proc/{CHILD}/gid_map")),
                contents: "0 196608 65536\n".into(),
            },
        ];
        for ns in ["user", "ipc", "uts", "net"] {
            expected.push(bind(format!("/proc/{CHILD}/ns/{ns}"), tmp.path().join(ns)));
        }
        assert_eq!(k.effects(), expected);
    }

    #[test]
    fn the_childs_pause_process_is_pinned_and_moved_to_the_shims_cgroup() {
        let k = RecordingKernel::new();
        let tmp = tempfile::tempdir().unwrap();
        let leaf = Path::new("/sys/fs/cgroup/p/shims");
        let (_, r) = drive_with(&k, tmp.path(), "unshared\nready 4321\n", Some(leaf));
        r.unwrap();
        let effects = k.effects();
        assert_eq!(
            effects[effects.len() - 2..],
            [
                Call::WriteFile {
                    path: leaf.join("cgroup.procs"),
                    contents: "4321".into()
                },
                bind("/proc/4321/ns/pid".into(), tmp.path().join("pid")),
            ]
        );
    }

    #[test]
    fn a_child_that_fails_before_its_maps_gets_none_and_nothing_is_pinned() {
        let k = RecordingKernel::new();
        let tmp = tempfile::tempdir().unwrap();
        let (sent, r) = drive_with(
            &k,
            tmp.path(),
            "error unshare a user namespace: EPERM\n",
            None,
        );
        let err = r.unwrap_err().to_string();
        assert!(err.contains("unshare a user namespace: EPERM"), "{err}");
        assert_eq!(sent, "");
        assert!(k.effects().is_empty());
    }

    #[test]
    fn a_child_that_dies_after_its_maps_leaves_nothing_pinned() {
        let k = RecordingKernel::new();
        let tmp = tempfile::tempdir().unwrap();
        let (sent, r) = drive_with(&k, tmp.path(), "unshared\n", None);
        let err = r.unwrap_err().to_string();
        assert!(err.contains("the namespace holder died"), "{err}");
        assert_eq!(sent, "go\n");
        assert!(k.mounted().is_empty());
    }

    #[test]
    fn a_refused_id_map_is_an_error_naming_the_file() {
        let k = RecordingKernel::new();
        k.fail(
            Errno::EPERM,
            |c| matches!(c, Call::WriteFile { path, .. } if path.ends_with("gid_map")),
        );
        let tmp = tempfile::tempdir().unwrap();
        let (sent, r) = drive_with(&k, tmp.path(), "unshared\nready 0\n", None);
        let err = r.unwrap_err().to_string();
        assert!(err.contains(&format!("/proc/{CHILD}/gid_map")), "{err}");
        assert_eq!(sent, "", "the child is never let go without its maps");
    }

    fn enter(
        k: &RecordingKernel,
        shape: SandboxShape,
        from_parent: &[u8],
    ) -> (String, Result<i32, RuntimeError>) {
        let mut to_parent = Vec::new();
        let r = enter_namespaces(
            k,
            &mut to_parent,
            &mut { from_parent },
            "db-0",
            shape,
            Path::new("/usr/bin/podhost"),
            Path::new("/pods/u/ns"),
        );
        (String::from_utf8(to_parent).unwrap(), r)
    }

    #[test]
    fn the_child_enters_its_user_namespace_becomes_root_then_unshares_the_rest() {
        let k = RecordingKernel::new();
        let (said, r) = enter(&k, SandboxShape::default(), b"go\n");
        assert_eq!(r.unwrap(), 0);
        assert_eq!(said, "unshared\n");
        assert_eq!(
            k.effects(),
            vec![
                Call::Unshare(CloneFlags::CLONE_NEWUSER),
                Call::SetResGid(0),
                Call::SetGroups(vec![]),
                Call::SetResUid(0),
                Call::Unshare(
                    CloneFlags::CLONE_NEWIPC | CloneFlags::CLONE_NEWUTS | CloneFlags::CLONE_NEWNET
                ),
                Call::SetHostname("db-0".into()),
                Call::LoopbackUp,
            ]
        );
    }

    #[test]
    fn with_a_shared_pid_namespace_the_child_starts_pause_inside_its_user_namespace() {
        let k = RecordingKernel::new();
        let shape = SandboxShape {
            shared_pid: true,
            userns: Some(MAP),
            ..Default::default()
        };
        let (_, r) = enter(&k, shape, b"go\n");
        assert_eq!(r.unwrap(), FIRST_PID);
        let effects = k.effects();
        assert_eq!(effects[effects.len() - 3], Call::LoopbackUp);
        assert_eq!(
            effects[effects.len() - 2],
            Call::Unshare(CloneFlags::CLONE_NEWPID)
        );
        assert!(matches!(
            effects[effects.len() - 1],
            Call::SpawnDetached { .. }
        ));
    }

    #[test]
    fn a_child_never_let_go_does_not_become_root() {
        let k = RecordingKernel::new();
        let (_, r) = enter(&k, SandboxShape::default(), b"");
        let err = r.unwrap_err().to_string();
        assert!(err.contains("waiting for the id maps"), "{err}");
        assert_eq!(k.effects(), vec![Call::Unshare(CloneFlags::CLONE_NEWUSER)]);
    }

    #[test]
    fn a_child_refused_root_unshares_nothing_more() {
        let k = RecordingKernel::new();
        k.fail(Errno::EINVAL, |c| matches!(c, Call::SetResUid(_)));
        let (_, r) = enter(&k, SandboxShape::default(), b"go\n");
        let err = r.unwrap_err().to_string();
        assert!(err.contains("become the namespace's root"), "{err}");
        assert_eq!(k.effects().last(), Some(&Call::SetResUid(0)));
    }
}
