//! The last step before a container's program runs: podhost's libcontainer executor.
//!
//! libcontainer calls it in the container's process after the namespaces, rootfs,
//! user, capabilities and (for a container's own process) seccomp are in place, right
//! before execve. It does two things libcontainer 0.7 does not:
//!
//! - **Default signal dispositions and an empty mask**, as runc guarantees. Ignored
//!   dispositions survive execve, and the shim (like every Rust program) ignores SIGPIPE;
//!   without the reset a container's `yes | head` spins forever on EPIPE.
//! - **The container's seccomp filter**, for the container's own process and for an
//!   exec'd one (`podhost exec`, exec hooks): the program the daemon compiled once
//!   (`seccomp::precompiled`), so that no container compiles it again; for a bundle
//!   made before that (its filter is in config.json) an exec'd process compiles the
//!   filter itself, since libcontainer's tenant path drops `linux.seccomp`. Loading a
//!   filter without no_new_privs needs CAP_SYS_ADMIN, which a container rarely has:
//!   the process is then started with CAP_SYS_ADMIN and CAP_SETPCAP added, loads the
//!   filter, and drops to the container's exact capability sets before execve — the
//!   order runc uses when no_new_privs is off (filter first, then the capability drop).

use std::collections::HashMap;

use libcontainer::workload::default::DefaultExecutor;
use libcontainer::workload::{
    Executor, ExecutorError, ExecutorSetEnvsError, ExecutorValidationError,
};
use oci_spec::runtime::{LinuxCapabilities, LinuxSeccomp, Spec};

use super::seccomp::{CompiledFilter, PrecompiledSeccomp};

/// Why the executor could not hand over to the container's program.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The container's seccomp filter could not be loaded into its process.
    #[error(
        "cannot load the container's seccomp filter into its process: {0} \
         (a Localhost profile must allow prctl, capset and execve)"
    )]
    Seccomp(String),
    /// The temporary capabilities could not be dropped after the filter was loaded.
    #[error(
        "cannot drop to the container's capabilities after loading its seccomp filter: {0} \
         (a Localhost profile must allow prctl and capset)"
    )]
    Capabilities(String),
}

/// The filter a process loads before execve.
#[derive(Debug, Clone)]
pub enum FilterToLoad {
    /// The program the daemon compiled.
    Program(CompiledFilter),
    /// A filter in config.json (a bundle made before filters were precompiled),
    /// compiled here with libcontainer's own code.
    Compile(LinuxSeccomp),
}

/// What the process must do before execve that libcontainer did not.
#[derive(Debug, Clone)]
pub struct ExecConfinement {
    /// The container's filter.
    pub seccomp: FilterToLoad,
    /// The container's own capability sets, restored after the filter is loaded when
    /// the process was started with more (None: it was started with exactly these).
    pub restore_capabilities: Option<LinuxCapabilities>,
}

/// podhost's executor: resets signals, confines an exec'd process, then execs the
/// program the way libcontainer's default executor does (PATH lookup, execvp).
#[derive(Debug, Clone, Default)]
pub struct ContainerExecutor {
    exec_confinement: Option<ExecConfinement>,
    /// An exec'd process: its program is looked up here, after the process started,
    /// and a miss ends it with 127 or 126 (`exec_lookup`) instead of failing the exec.
    exec_lookup: bool,
}

impl ContainerExecutor {
    /// For a container's own process: its precompiled filter, if it has one.
    pub fn for_container(seccomp: Option<&PrecompiledSeccomp>) -> Self {
        Self {
            exec_confinement: seccomp.map(|s| ExecConfinement {
                seccomp: FilterToLoad::Program(s.filter.clone()),
                restore_capabilities: s.restore_capabilities.clone(),
            }),
            exec_lookup: false,
        }
    }

    /// For a process exec'd into a running container.
    pub fn for_exec(confinement: Option<ExecConfinement>) -> Self {
        Self {
            exec_confinement: confinement,
            exec_lookup: true,
        }
    }
}

impl Executor for ContainerExecutor {
    fn exec(&self, spec: &Spec) -> Result<(), ExecutorError> {
        reset_signals();
        if let Some(confinement) = &self.exec_confinement {
            confine(confinement).map_err(|e| ExecutorError::Execution(Box::new(e)))?;
        }
        if self.exec_lookup {
            exit_unless_program_runs(spec);
        }
        DefaultExecutor {}.exec(spec)
    }

    fn validate(&self, spec: &Spec) -> Result<(), ExecutorValidationError> {
        if self.exec_lookup {
            // Checked in `exec`, once the process runs, so that a miss is its exit status.
            return Ok(());
        }
        DefaultExecutor {}.validate(spec)
    }

    fn setup_envs(&self, envs: HashMap<String, String>) -> Result<(), ExecutorSetEnvsError> {
        DefaultExecutor {}.setup_envs(envs)
    }
}

/// Ends this (exec'd) process with 127 or 126 and runc's message on its stderr when its
/// program is missing or cannot be executed, as `kubectl exec` and a shell report it.
fn exit_unless_program_runs(spec: &Spec) {
    let Some(process) = spec.process() else {
        return;
    };
    let Some(program) = process.args().as_ref().and_then(|a| a.first()) else {
        return;
    };
    let path_var = process
        .env()
        .as_ref()
        .and_then(|env| env.iter().find_map(|kv| kv.strip_prefix("PATH=")));
    if let Err(e) = super::exec_lookup::look_up(program, path_var) {
        eprintln!("{e}");
        std::process::exit(e.exit_code());
    }
}

fn confine(confinement: &ExecConfinement) -> Result<(), WorkloadError> {
    match &confinement.seccomp {
        FilterToLoad::Program(program) => program
            .load()
            .map_err(|e| WorkloadError::Seccomp(e.to_string()))?,
        // Our profiles never use SCMP_ACT_NOTIFY, so there is no listener fd to pass on.
        FilterToLoad::Compile(seccomp) => {
            libcontainer::seccomp::initialize_seccomp(seccomp)
                .map_err(|e| WorkloadError::Seccomp(e.to_string()))?;
        }
    }
    if let Some(caps) = &confinement.restore_capabilities {
        // Bounding first, while CAP_SETPCAP is still effective; then the others.
        let syscall = libcontainer::syscall::syscall::create_syscall();
        libcontainer::capabilities::drop_privileges(caps, syscall.as_ref())
            .map_err(|e| WorkloadError::Capabilities(e.to_string()))?;
    }
    Ok(())
}

/// The kernel's `struct sigaction` (x86_64 and arm64 both have sa_restorer), for the
/// raw rt_sigaction: the C library's wrapper refuses the real-time signals it reserves
/// for itself (32 and 33), which are inherited as ignored all the same.
#[repr(C)]
struct KernelSigaction {
    handler: usize,
    flags: u64,
    restorer: usize,
    mask: u64,
}

/// Every catchable signal back to SIG_DFL and nothing blocked. Errors are ignored on
/// purpose: the process is about to execve and has no one to tell; the tests check the
/// result in /proc/PID/status.
fn reset_signals() {
    let default = KernelSigaction {
        handler: libc::SIG_DFL,
        flags: 0,
        restorer: 0,
        mask: 0,
    };
    for sig in 1..=libc::SIGRTMAX() {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: rt_sigaction reads a fully initialised struct of the kernel's layout
        // and size 8 for the mask; SIG_DFL installs no handler code, and no old action
        // is requested.
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                sig,
                &default as *const KernelSigaction,
                std::ptr::null_mut::<KernelSigaction>(),
                8usize,
            );
        }
    }
    // SAFETY: an empty, initialised set passed by pointer; the old mask is not wanted.
    unsafe {
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
    }
}
