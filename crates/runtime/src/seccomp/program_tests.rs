//! The precompiled program is the one libcontainer loads; the cache compiles once,
//! survives a restart and replaces a corrupt file; the confinement hand-off keeps the
//! container's capabilities. Real libseccomp, real seccomp(2), real ptrace.

use std::collections::HashSet;

use oci_spec::runtime::{Capability, LinuxSeccomp};

use super::*;
use crate::spec::Confinement;

fn runtime_default_with(caps: &[Capability]) -> LinuxSeccomp {
    let caps: HashSet<Capability> = caps.iter().copied().collect();
    runtime_default(std::env::consts::ARCH, &caps).unwrap()
}

/// Capability sets whose RuntimeDefault filters differ (the conditional groups).
fn cap_sets() -> Vec<Vec<Capability>> {
    vec![
        Vec::new(),
        default_capabilities(),
        [default_capabilities().as_slice(), &[Capability::SysAdmin]].concat(),
        [
            default_capabilities().as_slice(),
            &[
                Capability::SysPtrace,
                Capability::SysModule,
                Capability::SysBoot,
                Capability::SysTime,
                Capability::SysNice,
                Capability::SysPacct,
                Capability::SysRawio,
                Capability::Bpf,
                Capability::Perfmon,
                Capability::Syslog,
            ],
        ]
        .concat(),
    ]
}

/// Forks a child that sets no_new_privs, runs `load`, and stops itself as this
/// process's tracee; returns its most recent filter read back through ptrace. The
/// child is killed and reaped before returning.
fn filter_loaded_by(load: impl FnOnce() -> bool) -> Vec<u8> {
    // SAFETY: the child only calls prctl, the loader (libseccomp/seccomp(2); glibc's
    // fork leaves malloc usable in the child), ptrace, raise and _exit.
    match unsafe { nix::unistd::fork() }.unwrap() {
        nix::unistd::ForkResult::Child => {
            // SAFETY: plain integer arguments; only this process changes.
            unsafe {
                libc::ptrace(libc::PTRACE_TRACEME, 0, 0usize, 0usize);
                libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
            }
            let loaded = load();
            // SAFETY: raise and _exit are async-signal-safe and take plain integers.
            unsafe {
                if loaded {
                    libc::raise(libc::SIGSTOP);
                }
                libc::_exit(if loaded { 0 } else { 3 });
            }
        }
        nix::unistd::ForkResult::Parent { child } => {
            let status = nix::sys::wait::waitpid(child, None).unwrap();
            let read = match status {
                nix::sys::wait::WaitStatus::Stopped(_, nix::sys::signal::Signal::SIGSTOP) => {
                    loaded_program(child.as_raw(), 0)
                }
                other => panic!("the child did not stop after loading its filter: {other:?}"),
            };
            let _ = nix::sys::signal::kill(child, nix::sys::signal::Signal::SIGKILL);
            let _ = nix::sys::wait::waitpid(child, None);
            read.unwrap()
        }
    }
}

#[test]
fn the_precompiled_program_is_the_one_libcontainer_loads() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root (PTRACE_SECCOMP_GET_FILTER needs CAP_SYS_ADMIN)"
    );
    for caps in cap_sets() {
        let oci = runtime_default_with(&caps);
        let precompiled = compile(&oci).unwrap();
        // What libcontainer 0.7 loads from the config.json podhost wrote before.
        let for_lc = for_libcontainer(&oci).unwrap();
        let by_libcontainer =
            filter_loaded_by(|| libcontainer::seccomp::initialize_seccomp(&for_lc).is_ok());
        assert_eq!(
            by_libcontainer,
            precompiled.program,
            "RuntimeDefault for {caps:?}: libcontainer's program ({} instructions) vs the precompiled one ({})",
            by_libcontainer.len() / 8,
            precompiled.instructions()
        );
        // And the kernel holds exactly that program when podhost loads it.
        let by_podhost = filter_loaded_by(|| precompiled.load().is_ok());
        assert_eq!(by_podhost, precompiled.program, "loaded for {caps:?}");
    }
    // The conditional groups do change the program.
    let none = compile(&runtime_default_with(&[])).unwrap();
    let admin = compile(&runtime_default_with(&[Capability::SysAdmin])).unwrap();
    assert_ne!(none.program, admin.program);
}

#[test]
fn a_loaded_program_refuses_what_the_filter_refuses() {
    let program = compile(&runtime_default_with(&default_capabilities())).unwrap();
    // SAFETY: the child only calls prctl, seccomp(2), unshare, getpid and _exit.
    match unsafe { nix::unistd::fork() }.unwrap() {
        nix::unistd::ForkResult::Child => {
            // SAFETY: plain integer arguments; only this process changes.
            unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
            let code = if program.load().is_err() {
                10
            } else if nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER)
                != Err(nix::Error::EPERM)
            {
                11
            } else if nix::unistd::getpid().as_raw() <= 0 {
                12
            } else {
                0
            };
            // SAFETY: _exit takes a plain integer and never returns.
            unsafe { libc::_exit(code) };
        }
        nix::unistd::ForkResult::Parent { child } => {
            let status = nix::sys::wait::waitpid(child, None).unwrap();
            assert_eq!(
                status,
                nix::sys::wait::WaitStatus::Exited(child, 0),
                "10: load failed, 11: unshare(CLONE_NEWUSER) not refused with EPERM"
            );
        }
    }
}

#[test]
fn a_tampered_program_is_refused_before_it_loads() {
    let mut program = compile(&runtime_default_with(&[])).unwrap();
    program.verify().unwrap();
    let json = serde_json::to_string(&program).unwrap();
    let back: CompiledFilter = serde_json::from_str(&json).unwrap();
    assert_eq!(back, program);
    program.program[9] ^= 0x40;
    assert!(matches!(
        program.load(),
        Err(ProgramError::HashMismatch { .. })
    ));
    program.program.pop();
    assert!(matches!(program.verify(), Err(ProgramError::Shape { .. })));
}

fn cache_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("podhost-seccomp-cache-")
        .tempdir()
        .unwrap()
}

#[test]
fn each_filter_is_compiled_once_and_kept_across_restarts() {
    let dir = cache_dir();
    let oci = runtime_default_with(&default_capabilities());
    let cache = ProgramCache::new(dir.path().to_path_buf());
    let (first, source) = cache.program_from(&oci).unwrap();
    assert_eq!(source, ProgramSource::Compiled);
    let (again, source) = cache.program_from(&oci).unwrap();
    assert_eq!(source, ProgramSource::Memory);
    assert_eq!(again, first);
    // Another filter is another program and another file.
    let (other, source) = cache
        .program_from(&runtime_default_with(&[Capability::SysAdmin]))
        .unwrap();
    assert_eq!(source, ProgramSource::Compiled);
    assert_ne!(other.program, first.program);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    // A restarted daemon reads the file instead of compiling.
    let restarted = ProgramCache::new(dir.path().to_path_buf());
    let (read, source) = restarted.program_from(&oci).unwrap();
    assert_eq!(source, ProgramSource::File);
    assert_eq!(read, first);
}

#[test]
fn a_corrupt_cache_file_is_detected_and_compiled_again() {
    let dir = cache_dir();
    let oci = runtime_default_with(&default_capabilities());
    let (good, _) = ProgramCache::new(dir.path().to_path_buf())
        .program_from(&oci)
        .unwrap();
    let file = ProgramCache::new(dir.path().to_path_buf()).file_for(&oci);
    let intact = std::fs::read(&file).unwrap();
    let damages: Vec<(&str, Vec<u8>)> = vec![
        ("a flipped program bit", {
            let mut b = intact.clone();
            let last = b.len() - 3;
            b[last] ^= 1;
            b
        }),
        ("a truncated program", intact[..intact.len() - 5].to_vec()),
        ("a wrong magic", {
            let mut b = intact.clone();
            b[0] = b'X';
            b
        }),
        ("an empty file", Vec::new()),
        ("changed flags", {
            let mut b = intact.clone();
            b[b"podhost seccomp program v1\n".len()] ^= 1;
            b
        }),
    ];
    for (damage, bytes) in damages {
        std::fs::write(&file, &bytes).unwrap();
        let cache = ProgramCache::new(dir.path().to_path_buf());
        let (program, source) = cache.program_from(&oci).unwrap();
        assert_eq!(source, ProgramSource::Compiled, "{damage}");
        assert_eq!(*program, *good, "{damage}");
        assert_eq!(
            std::fs::read(&file).unwrap(),
            intact,
            "{damage}: file replaced"
        );
    }
}

fn confinement(caps: &[Capability], no_new_privileges: bool) -> Confinement {
    Confinement {
        capabilities: caps.to_vec(),
        no_new_privileges,
        seccomp: Some(runtime_default_with(caps)),
        ..Confinement::default()
    }
}

#[test]
fn the_filter_leaves_the_spec_and_the_loading_caps_are_added_only_without_nnp() {
    let dir = cache_dir();
    let cache = ProgramCache::new(dir.path().to_path_buf());
    let mut conf = confinement(&default_capabilities(), false);
    let expected = compile(conf.seccomp.as_ref().unwrap()).unwrap();
    let pre = take_precompiled(&cache, &mut conf).unwrap().unwrap();
    assert_eq!(pre.filter, expected);
    assert!(
        conf.seccomp.is_none(),
        "config.json must not carry the filter"
    );
    // Started with CAP_SYS_ADMIN (and the CAP_SETPCAP it already has), restored to its own.
    assert!(conf.capabilities.contains(&Capability::SysAdmin));
    assert_eq!(conf.capabilities.len(), default_capabilities().len() + 1);
    let own: HashSet<Capability> = default_capabilities().into_iter().collect();
    let restore = pre.restore_capabilities.unwrap();
    for set in [restore.bounding(), restore.effective(), restore.permitted()] {
        assert_eq!(set.as_ref().unwrap(), &own);
    }
    for set in [restore.inheritable(), restore.ambient()] {
        assert!(set.as_ref().unwrap().is_empty());
    }

    // no_new_privs: the filter loads unprivileged, the capabilities stay the container's.
    let mut conf = confinement(&[Capability::Chown], true);
    let pre = take_precompiled(&cache, &mut conf).unwrap().unwrap();
    assert_eq!(conf.capabilities, vec![Capability::Chown]);
    assert!(pre.restore_capabilities.is_none());
    assert!(conf.seccomp.is_none());

    // Unconfined: nothing to load.
    let mut conf = Confinement::default();
    assert!(take_precompiled(&cache, &mut conf).unwrap().is_none());
    assert!(conf.capabilities.is_empty());
}

#[test]
fn the_shim_config_carries_the_program_for_the_shim_only() {
    let dir = cache_dir();
    let cache = ProgramCache::new(dir.path().to_path_buf());
    let mut conf = confinement(&default_capabilities(), false);
    let pre = take_precompiled(&cache, &mut conf).unwrap();
    let cfg = crate::shim_config::ShimConfig {
        container_id: "c".into(),
        bundle: dir.path().to_path_buf(),
        libcontainer_root: dir.path().join("lc"),
        log_path: dir.path().join("log"),
        lower_dirs: Vec::new(),
        rootfs: dir.path().join("rootfs"),
        oom_score_adj: None,
        cgroup_dir: None,
        shim_cgroup: None,
        userns: None,
        log_rotation: Default::default(),
        seccomp: pre.clone(),
    };
    let path = dir.path().join("shim-config.json");
    podhost_disk::write_json_atomic(&path, &cfg).unwrap();
    // The shim and `podhost exec` read it back whole ...
    assert_eq!(read_precompiled(&path).unwrap(), pre);
    // ... a config read as a whole (the monitor's) leaves it out.
    let whole: crate::shim_config::ShimConfig = podhost_disk::read_json(&path).unwrap().unwrap();
    assert!(whole.seccomp.is_none());
    assert_eq!(whole.container_id, "c");
}
