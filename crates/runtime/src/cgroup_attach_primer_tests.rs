//! The primer against the real kernel (as root): its move, its errors, and the file it
//! picks for "where this process already is".

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use super::*;

fn cgroup_of(pid: u32, procs: &Path) -> bool {
    std::fs::read_to_string(procs)
        .unwrap()
        .lines()
        .any(|l| l == pid.to_string())
}

#[test]
fn the_own_cgroup_is_the_cgroup2_line_first_then_v1() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path();
    for d in ["unified/a/b", "freezer/x", "cpu,cpuacct/y"] {
        std::fs::create_dir_all(m.join(d)).unwrap();
        std::fs::write(m.join(d).join("cgroup.procs"), "").unwrap();
    }
    let hybrid = "3:cpu,cpuacct:/y\n2:freezer:/x\n0::/a/b\n";
    assert_eq!(
        own_cgroup_procs_in(hybrid, m),
        Some(m.join("unified/a/b/cgroup.procs"))
    );
    let v1_only = "3:cpu,cpuacct:/y\n2:freezer:/x\n";
    assert_eq!(
        own_cgroup_procs_in(v1_only, m),
        Some(m.join("cpu,cpuacct/y/cgroup.procs"))
    );
    std::fs::create_dir_all(m.join("c")).unwrap();
    std::fs::write(m.join("c/cgroup.procs"), "").unwrap();
    assert_eq!(
        own_cgroup_procs_in("0::/c\n", m),
        Some(m.join("c/cgroup.procs")),
        "pure cgroup2: at the mount itself"
    );
    assert_eq!(own_cgroup_procs_in("0::/nowhere\n", m), None);
    assert_eq!(own_cgroup_procs_in("garbage", m), None);
}

/// The real thing: this test process's own cgroup exists, and writing there is allowed.
#[test]
fn priming_the_own_cgroup_moves_nothing_and_reports_success() {
    assert!(nix::unistd::geteuid().is_root(), "this test needs root");
    let procs = own_cgroup_procs().expect("a mounted cgroup hierarchy");
    let before = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let primer = AttachPrimer::start(&procs).unwrap();
    std::thread::sleep(PERIOD * 3);
    primer.finish().unwrap();
    assert!(cgroup_of(std::process::id(), &procs));
    assert_eq!(
        std::fs::read_to_string("/proc/self/cgroup").unwrap(),
        before
    );
}

#[test]
fn a_cgroup_that_is_not_there_is_refused_at_start_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = AttachPrimer::start(&dir.path().join("absent/cgroup.procs"));
    assert!(missing.is_err_and(|e| e.to_string().contains("absent/cgroup.procs")));
}

/// The kernel's own refusal: a cgroup removed after its `cgroup.procs` was opened takes
/// no process (ENODEV); `finish` says so, naming the file.
#[test]
fn a_move_the_kernel_refuses_is_reported_by_finish() {
    assert!(nix::unistd::geteuid().is_root(), "this test needs root");
    let own = own_cgroup_procs().expect("a mounted cgroup hierarchy");
    let cgroup = own
        .parent()
        .unwrap()
        .join(format!("podhost-primer-test-{}", std::process::id()));
    std::fs::create_dir(&cgroup).unwrap();
    let procs = cgroup.join("cgroup.procs");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&procs)
        .unwrap();
    std::fs::remove_dir(&cgroup).unwrap();
    let refused = AttachPrimer::start_on(file, &procs).unwrap().finish();
    let e = refused.expect_err("a removed cgroup takes no process");
    assert!(e.to_string().contains("podhost-primer-test-"), "{e}");
    assert!(cgroup_of_self_unchanged(), "the process stays where it was");
}

fn cgroup_of_self_unchanged() -> bool {
    !std::fs::read_to_string("/proc/self/cgroup")
        .unwrap()
        .contains("podhost-primer-test-")
}
