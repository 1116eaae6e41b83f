//! A [`Kernel`] for unit tests: records every call, keeps a small model of what the
//! calls did (a mount table, a directory tree with interface files, a process table)
//! so that logic reading back its own effects behaves as on a kernel, and fails the
//! calls it is told to.
//!
//! Of processes it models what pid reuse breaks: a process has a pid, a start time
//! (its `/proc/<pid>/stat`) and an identity of its own; a pidfd names that identity,
//! so a signal through it fails with ESRCH once the process is gone, even when a new
//! process was given the same pid.
//!
//! Of cgroupfs it models what podhost's logic reads back: `cgroup.subtree_control`
//! takes `+x`/`-x` lists, and a new directory's `cgroup.controllers` is its parent's
//! enabled set.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use nix::errno::Errno;
use nix::mount::{MntFlags, MsFlags};
use nix::sched::CloneFlags;
use nix::sys::resource::Resource;
use nix::sys::signal::Signal;
use nix::unistd::{Gid, Pid, Uid};

use super::Kernel;
use crate::RuntimeError;
use crate::userns::UsernsError;

/// The pid [`RecordingKernel::spawn_detached`] gives its first child (then +1 each).
pub const FIRST_PID: i32 = 4000;

/// One call made through the seam, with its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    Mount {
        source: Option<PathBuf>,
        target: PathBuf,
        fstype: Option<String>,
        flags: MsFlags,
        data: Option<String>,
    },
    BindIdmapped {
        source: PathBuf,
        target: PathBuf,
    },
    Umount {
        target: PathBuf,
        flags: MntFlags,
    },
    OpenDirPath(PathBuf),
    Unshare(CloneFlags),
    SetHostname(String),
    LoopbackUp,
    SetResGid(u32),
    SetGroups(Vec<u32>),
    SetResUid(u32),
    SpawnDetached {
        program: String,
        args: Vec<String>,
    },
    Kill {
        pid: i32,
        signal: Option<Signal>,
    },
    PidfdOpen(i32),
    /// A signal through a pidfd, named by the pid it was opened on.
    PidfdSignal {
        pid: i32,
        signal: Option<Signal>,
    },
    GetRlimit(Resource),
    SetRlimit {
        resource: Resource,
        soft: u64,
        hard: u64,
    },
    ReadFile(PathBuf),
    WriteFile {
        path: PathBuf,
        contents: String,
    },
    Exists(PathBuf),
    Mkdir(PathBuf),
    MkdirAll(PathBuf),
    Rmdir(PathBuf),
    Subdirs(PathBuf),
}

impl Call {
    /// Whether the call only asks (reads, lists, probes) and changes nothing.
    pub fn is_query(&self) -> bool {
        matches!(
            self,
            Call::ReadFile(_)
                | Call::Exists(_)
                | Call::Subdirs(_)
                | Call::GetRlimit(_)
                | Call::Kill { signal: None, .. }
                | Call::PidfdOpen(_)
                | Call::PidfdSignal { signal: None, .. }
        )
    }
}

type Matcher = Box<dyn Fn(&Call) -> bool + Send + Sync>;

/// "Fail matching calls with `errno`, after letting `skip` of them through, `times` times."
struct FailRule {
    matcher: Matcher,
    errno: Errno,
    skip: usize,
    times: Option<usize>,
}

/// "Once the `n`th call matching `matcher` has returned, the process at `pid` ends and
/// a new one started at `start_ticks` is given its pid": a pid reused between two calls.
struct ReuseRule {
    matcher: Matcher,
    skip: usize,
    pid: i32,
    start_ticks: u64,
    armed: bool,
    done: bool,
}

#[derive(Default)]
struct State {
    calls: Vec<Call>,
    rules: Vec<FailRule>,
    mounted: Vec<PathBuf>,
    dirs: BTreeSet<PathBuf>,
    files: BTreeMap<PathBuf, String>,
    rlimits: BTreeMap<String, (u64, u64)>,
    opened: Vec<(PathBuf, RawFd)>,
    spawned: i32,
    reuses: Vec<ReuseRule>,
    /// The live processes: pid -> the identity of the process that has it.
    processes: BTreeMap<i32, u64>,
    identities: u64,
    /// Open pidfds: fd -> (pid, identity of the process it names).
    pidfds: BTreeMap<RawFd, (i32, u64)>,
}

/// The recording fake. Starts with an empty mount table and no directories.
#[derive(Default)]
pub struct RecordingKernel {
    state: Mutex<State>,
}

impl std::fmt::Debug for RecordingKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.lock();
        f.debug_struct("RecordingKernel")
            .field("calls", &s.calls)
            .field("mounted", &s.mounted)
            .finish_non_exhaustive()
    }
}

impl RecordingKernel {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every call matching `matcher` fails with `errno`.
    pub fn fail(&self, errno: Errno, matcher: impl Fn(&Call) -> bool + Send + Sync + 'static) {
        self.lock().rules.push(FailRule {
            matcher: Box::new(matcher),
            errno,
            skip: 0,
            times: None,
        });
    }

    /// Only the `n`th (from 1) call matching `matcher` fails with `errno`.
    pub fn fail_nth(
        &self,
        n: usize,
        errno: Errno,
        matcher: impl Fn(&Call) -> bool + Send + Sync + 'static,
    ) {
        self.lock().rules.push(FailRule {
            matcher: Box::new(matcher),
            errno,
            skip: n.saturating_sub(1),
            times: Some(1),
        });
    }

    /// A directory that exists (a cgroup hierarchy's root, a /proc dir).
    pub fn add_dir(&self, path: impl Into<PathBuf>) {
        let path = path.into();
        let mut s = self.lock();
        for a in path.ancestors() {
            s.dirs.insert(a.to_path_buf());
        }
    }

    /// A file with `text` (cgroup.controllers, /proc/self/cgroup); its dir exists.
    pub fn add_file(&self, path: impl Into<PathBuf>, text: &str) {
        let path = path.into();
        if let Some(parent) = path.parent() {
            self.add_dir(parent);
        }
        self.lock().files.insert(path, text.to_string());
    }

    /// The limits getrlimit reports for `resource` (else it fails with EINVAL).
    pub fn set_limits(&self, resource: Resource, soft: u64, hard: u64) {
        self.lock()
            .rlimits
            .insert(format!("{resource:?}"), (soft, hard));
    }

    /// A live process at `pid` that started `start_ticks` after boot (its
    /// `/proc/<pid>/stat`); one that had the pid before is gone.
    pub fn add_process(&self, pid: i32, start_ticks: u64) {
        self.lock().start_process(pid, start_ticks);
    }

    /// The process at `pid` exits and is reaped: its pid names nothing now.
    pub fn end_process(&self, pid: i32) {
        self.lock().end_process(pid);
    }

    /// Once the `n`th (from 1) call matching `matcher` has returned (before the next
    /// call), the process at `pid` is gone and a new one that started at `start_ticks`
    /// has its pid.
    pub fn reuse_pid_after(
        &self,
        n: usize,
        matcher: impl Fn(&Call) -> bool + Send + Sync + 'static,
        pid: i32,
        start_ticks: u64,
    ) {
        self.lock().reuses.push(ReuseRule {
            matcher: Box::new(matcher),
            skip: n.saturating_sub(1),
            pid,
            start_ticks,
            armed: false,
            done: false,
        });
    }

    /// The signals sent (not probes), to whom, by either kill(2) or a pidfd.
    pub fn signals_sent(&self) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| {
                matches!(
                    c,
                    Call::Kill {
                        signal: Some(_),
                        ..
                    } | Call::PidfdSignal {
                        signal: Some(_),
                        ..
                    }
                )
            })
            .collect()
    }

    /// Every call so far, in order (failed ones included).
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// The calls that change something, in order (reads and probes left out).
    pub fn effects(&self) -> Vec<Call> {
        self.calls().into_iter().filter(|c| !c.is_query()).collect()
    }

    /// What is mounted now, in mount order.
    pub fn mounted(&self) -> Vec<PathBuf> {
        self.lock().mounted.clone()
    }

    /// The directories that exist now.
    pub fn dirs(&self) -> Vec<PathBuf> {
        self.lock().dirs.iter().cloned().collect()
    }

    /// A file's content now.
    pub fn file(&self, path: impl AsRef<Path>) -> Option<String> {
        self.lock().files.get(path.as_ref()).cloned()
    }

    /// The fds [`Kernel::open_dir_path`] handed out, with what they name.
    pub fn opened(&self) -> Vec<(PathBuf, RawFd)> {
        self.lock().opened.clone()
    }

    /// Records `call`; `Err` when a rule says it fails.
    fn record(&self, call: Call) -> Result<(), Errno> {
        let mut s = self.lock();
        s.calls.push(call.clone());
        s.apply_reuses(&call);
        for rule in s.rules.iter_mut() {
            if !(rule.matcher)(&call) || rule.times == Some(0) {
                continue;
            }
            if rule.skip > 0 {
                rule.skip -= 1;
                continue;
            }
            if let Some(t) = rule.times.as_mut() {
                *t -= 1;
            }
            return Err(rule.errno);
        }
        Ok(())
    }
}

impl State {
    fn start_process(&mut self, pid: i32, start_ticks: u64) {
        self.identities += 1;
        let identity = self.identities;
        self.processes.insert(pid, identity);
        // The shape of a real stat line, with a command that holds ") " itself.
        self.files.insert(
            PathBuf::from(format!("/proc/{pid}/stat")),
            format!(
                "{pid} (a) b) S 1 {pid} {pid} 0 -1 4194560 90 0 0 0 1 2 0 0 20 0 1 0 {start_ticks} 1000 100"
            ),
        );
    }

    fn end_process(&mut self, pid: i32) {
        self.processes.remove(&pid);
        self.files
            .remove(&PathBuf::from(format!("/proc/{pid}/stat")));
    }

    /// Ends and restarts the processes of the rules that matched an earlier call (so
    /// the reuse happens after that call returned), then arms the rules `call` matches.
    fn apply_reuses(&mut self, call: &Call) {
        let mut due = Vec::new();
        for rule in self.reuses.iter_mut() {
            if rule.armed && !rule.done {
                rule.done = true;
                due.push((rule.pid, rule.start_ticks));
            }
        }
        for (pid, start_ticks) in due {
            self.end_process(pid);
            self.start_process(pid, start_ticks);
        }
        for rule in self.reuses.iter_mut() {
            if rule.armed || !(rule.matcher)(call) {
                continue;
            }
            if rule.skip > 0 {
                rule.skip -= 1;
                continue;
            }
            rule.armed = true;
        }
    }

    /// A new directory; under a cgroup with controllers enabled it is offered them.
    fn make_dir(&mut self, path: &Path) {
        self.dirs.insert(path.to_path_buf());
        let enabled = path
            .parent()
            .and_then(|p| self.files.get(&p.join("cgroup.subtree_control")))
            .cloned();
        if let Some(enabled) = enabled {
            self.files.insert(path.join("cgroup.controllers"), enabled);
        }
    }
}

/// `cgroup.subtree_control` after writing `change` ("+cpu -io") to `current`.
fn enable(current: &str, change: &str) -> String {
    let mut set: Vec<&str> = current.split_whitespace().collect();
    for word in change.split_whitespace() {
        if let Some(c) = word.strip_prefix('+') {
            if !set.contains(&c) {
                set.push(c);
            }
        } else if let Some(c) = word.strip_prefix('-') {
            set.retain(|x| *x != c);
        }
    }
    set.join(" ")
}

fn io_err(errno: Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(errno as i32)
}

impl Kernel for RecordingKernel {
    fn mount(
        &self,
        source: Option<&Path>,
        target: &Path,
        fstype: Option<&str>,
        flags: MsFlags,
        data: Option<&str>,
    ) -> nix::Result<()> {
        self.record(Call::Mount {
            source: source.map(Path::to_path_buf),
            target: target.to_path_buf(),
            fstype: fstype.map(String::from),
            flags,
            data: data.map(String::from),
        })?;
        self.lock().mounted.push(target.to_path_buf());
        Ok(())
    }

    fn bind_idmapped(
        &self,
        source: &Path,
        target: &Path,
        _userns: &OwnedFd,
    ) -> Result<(), UsernsError> {
        self.record(Call::BindIdmapped {
            source: source.to_path_buf(),
            target: target.to_path_buf(),
        })
        .map_err(|e| UsernsError::sys(format!("idmap the mount of {}", source.display()), e))?;
        self.lock().mounted.push(target.to_path_buf());
        Ok(())
    }

    fn umount2(&self, target: &Path, flags: MntFlags) -> nix::Result<()> {
        self.record(Call::Umount {
            target: target.to_path_buf(),
            flags,
        })?;
        let mut s = self.lock();
        // As the kernel: unmounting what is not a mount point is EINVAL.
        let i = s
            .mounted
            .iter()
            .rposition(|m| m == target)
            .ok_or(Errno::EINVAL)?;
        s.mounted.remove(i);
        Ok(())
    }

    fn open_dir_path(&self, dir: &Path) -> nix::Result<OwnedFd> {
        self.record(Call::OpenDirPath(dir.to_path_buf()))?;
        // A real fd (of /), so that its number is one no other open file has.
        let fd = nix::fcntl::open(
            "/",
            nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )?;
        self.lock().opened.push((dir.to_path_buf(), fd.as_raw_fd()));
        Ok(fd)
    }

    fn unshare(&self, flags: CloneFlags) -> nix::Result<()> {
        self.record(Call::Unshare(flags))
    }

    fn sethostname(&self, name: &str) -> nix::Result<()> {
        self.record(Call::SetHostname(name.to_string()))
    }

    fn loopback_up(&self) -> Result<(), RuntimeError> {
        self.record(Call::LoopbackUp)
            .map_err(|e| RuntimeError::sys("bring loopback up", e))
    }

    fn setresgid(&self, gid: Gid) -> nix::Result<()> {
        self.record(Call::SetResGid(gid.as_raw()))
    }

    fn setgroups(&self, groups: &[Gid]) -> nix::Result<()> {
        self.record(Call::SetGroups(groups.iter().map(|g| g.as_raw()).collect()))
    }

    fn setresuid(&self, uid: Uid) -> nix::Result<()> {
        self.record(Call::SetResUid(uid.as_raw()))
    }

    fn spawn_detached(&self, program: &CStr, args: &[CString]) -> nix::Result<Pid> {
        self.record(Call::SpawnDetached {
            program: program.to_string_lossy().into_owned(),
            args: args
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
        })?;
        let mut s = self.lock();
        let pid = FIRST_PID + s.spawned;
        s.spawned += 1;
        Ok(Pid::from_raw(pid))
    }

    fn kill(&self, pid: Pid, signal: Option<Signal>) -> nix::Result<()> {
        self.record(Call::Kill {
            pid: pid.as_raw(),
            signal,
        })
    }

    fn pidfd_open(&self, pid: Pid) -> nix::Result<OwnedFd> {
        let pid = pid.as_raw();
        self.record(Call::PidfdOpen(pid))?;
        let Some(&identity) = self.lock().processes.get(&pid) else {
            return Err(Errno::ESRCH);
        };
        // A real fd (of /), so that its number is one no other open file has.
        let fd = nix::fcntl::open(
            "/",
            nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )?;
        self.lock().pidfds.insert(fd.as_raw_fd(), (pid, identity));
        Ok(fd)
    }

    fn pidfd_send_signal(&self, pidfd: BorrowedFd<'_>, signal: Option<Signal>) -> nix::Result<()> {
        let Some((pid, identity)) = self.lock().pidfds.get(&pidfd.as_raw_fd()).copied() else {
            return Err(Errno::EBADF);
        };
        self.record(Call::PidfdSignal { pid, signal })?;
        // Only the process the pidfd was opened on: once gone, ESRCH (a new process at
        // the same pid is another one).
        if self.lock().processes.get(&pid) != Some(&identity) {
            return Err(Errno::ESRCH);
        }
        Ok(())
    }

    fn getrlimit(&self, resource: Resource) -> nix::Result<(u64, u64)> {
        self.record(Call::GetRlimit(resource))?;
        self.lock()
            .rlimits
            .get(&format!("{resource:?}"))
            .copied()
            .ok_or(Errno::EINVAL)
    }

    fn setrlimit(&self, resource: Resource, soft: u64, hard: u64) -> nix::Result<()> {
        self.record(Call::SetRlimit {
            resource,
            soft,
            hard,
        })?;
        self.lock()
            .rlimits
            .insert(format!("{resource:?}"), (soft, hard));
        Ok(())
    }

    fn read_file(&self, path: &Path) -> std::io::Result<String> {
        self.record(Call::ReadFile(path.to_path_buf()))
            .map_err(io_err)?;
        self.file(path).ok_or_else(|| io_err(Errno::ENOENT))
    }

    fn write_file(&self, path: &Path, contents: &str) -> std::io::Result<()> {
        self.record(Call::WriteFile {
            path: path.to_path_buf(),
            contents: contents.to_string(),
        })
        .map_err(io_err)?;
        let mut s = self.lock();
        let text = if path.file_name() == Some("cgroup.subtree_control".as_ref()) {
            enable(
                s.files.get(path).map(String::as_str).unwrap_or(""),
                contents,
            )
        } else {
            contents.to_string()
        };
        s.files.insert(path.to_path_buf(), text);
        Ok(())
    }

    fn exists(&self, path: &Path) -> bool {
        if self.record(Call::Exists(path.to_path_buf())).is_err() {
            return false;
        }
        let s = self.lock();
        s.dirs.contains(path) || s.files.contains_key(path)
    }

    fn mkdir(&self, path: &Path) -> std::io::Result<()> {
        self.record(Call::Mkdir(path.to_path_buf()))
            .map_err(io_err)?;
        let mut s = self.lock();
        if s.dirs.contains(path) || s.files.contains_key(path) {
            return Err(io_err(Errno::EEXIST));
        }
        if !path.parent().is_some_and(|p| s.dirs.contains(p)) {
            return Err(io_err(Errno::ENOENT));
        }
        s.make_dir(path);
        Ok(())
    }

    fn mkdir_all(&self, path: &Path) -> std::io::Result<()> {
        self.record(Call::MkdirAll(path.to_path_buf()))
            .map_err(io_err)?;
        let mut s = self.lock();
        let missing: Vec<PathBuf> = path
            .ancestors()
            .filter(|a| !s.dirs.contains(*a))
            .map(Path::to_path_buf)
            .collect();
        for dir in missing.iter().rev() {
            s.make_dir(dir);
        }
        Ok(())
    }

    fn rmdir(&self, path: &Path) -> std::io::Result<()> {
        self.record(Call::Rmdir(path.to_path_buf()))
            .map_err(io_err)?;
        let mut s = self.lock();
        if !s.dirs.contains(path) {
            return Err(io_err(Errno::ENOENT));
        }
        if s.dirs.iter().any(|d| d.parent() == Some(path)) {
            return Err(io_err(Errno::EBUSY));
        }
        s.dirs.remove(path);
        // A cgroup's interface files go with it.
        s.files.retain(|f, _| f.parent() != Some(path));
        Ok(())
    }

    fn subdirs(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        self.record(Call::Subdirs(dir.to_path_buf()))
            .map_err(io_err)?;
        let s = self.lock();
        if !s.dirs.contains(dir) {
            return Err(io_err(Errno::ENOENT));
        }
        Ok(s.dirs
            .iter()
            .filter(|d| d.parent() == Some(dir))
            .cloned()
            .collect())
    }
}
