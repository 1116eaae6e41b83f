//! Device rules on the real kernel, without the daemon.
//!
//! eBPF: a test cgroup in this host's cgroup2 hierarchy (/sys/fs/cgroup/unified on a
//! hybrid host, /sys/fs/cgroup on a unified one) gets the program; a shell moved into it
//! creates device nodes and opens them. Device programs apply by cgroup2 membership,
//! whatever v1 controllers exist.
//!
//! cgroup v1: the same probe in a test cgroup of the v1 devices controller.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use podhost::runtime::devices::cgroup_v1::{devices_mount, read_list};
use podhost::runtime::devices::{confine_v1_dir, confine_v2_dir, default_rules, privileged_rules};

/// A cgroup2 directory of its own, emptied and removed on drop (even after a failure).
struct TestCgroup(PathBuf);

static SEQ: AtomicU32 = AtomicU32::new(0);

fn test_cgroup_name() -> String {
    format!(
        "podhost-devtest-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::SeqCst)
    )
}

impl TestCgroup {
    /// A cgroup in the cgroup2 hierarchy.
    fn new() -> Self {
        assert!(
            nix::unistd::geteuid().is_root(),
            "this test needs root (cgroups, bpf, mknod)"
        );
        let root = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
            .into_iter()
            .map(Path::new)
            .find(|p| {
                nix::sys::statfs::statfs(*p)
                    .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::CGROUP2_SUPER_MAGIC)
            })
            .expect("no cgroup2 hierarchy at /sys/fs/cgroup/unified or /sys/fs/cgroup");
        Self::make(root.join(test_cgroup_name()))
    }

    /// A cgroup of the v1 devices controller.
    fn v1_devices() -> Self {
        assert!(nix::unistd::geteuid().is_root(), "this test needs root");
        let mount = devices_mount().expect("this host has a v1 devices controller");
        Self::make(mount.join(test_cgroup_name()))
    }

    fn make(dir: PathBuf) -> Self {
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        Self(dir)
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        // cgroup2 kills by cgroup.kill; a v1 cgroup by each of its tasks.
        let _ = std::fs::write(self.0.join("cgroup.kill"), "1");
        for pid in std::fs::read_to_string(self.0.join("tasks"))
            .unwrap_or_default()
            .lines()
        {
            if let Ok(pid) = pid.parse() {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
        for _ in 0..100 {
            if std::fs::remove_dir(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        eprintln!("could not remove {}", self.0.display());
    }
}

/// Runs a shell inside `cg` that makes each node in a fresh temp dir, then opens it for
/// reading (and /dev/null's twin for writing); returns its report lines.
fn probe(cg: &TestCgroup) -> Vec<String> {
    let tmp = tempfile::tempdir().unwrap();
    let script = r#"
        echo $$ > "$1/cgroup.procs" || { echo "cannot join $1"; exit 99; }
        cd "$2" || exit 98
        for d in "console c 5 1" "kmsg c 1 11" "null c 1 3" "urandom c 1 9" "loop b 7 0"; do
          set -- $d
          if mknod "$1" "$2" "$3" "$4" 2>/dev/null; then echo "mknod $1 ok"; else echo "mknod $1 denied"; fi
          if (exec 3<"$1") 2>err; then echo "open $1 ok"; else echo "open $1 denied: $(cat err)"; fi
        done
        if (echo x >null) 2>err; then echo "write null ok"; else echo "write null denied"; fi
    "#;
    let out = Command::new("sh")
        .args(["-c", script, "probe"])
        .arg(&cg.0)
        .arg(tmp.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "probe failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines().map(str::to_string).collect()
}

fn line<'a>(lines: &'a [String], prefix: &str) -> &'a str {
    lines
        .iter()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} in {lines:#?}"))
}

#[test]
fn default_program_denies_console_kmsg_and_block_devices_and_allows_null() {
    let cg = TestCgroup::new();
    let instructions = confine_v2_dir(&cg.0, &default_rules()).unwrap();
    eprintln!(
        "attached a {instructions}-instruction program to {}",
        cg.0.display()
    );
    let lines = probe(&cg);
    eprintln!("{lines:#?}");
    for dev in ["console", "kmsg", "null", "urandom", "loop"] {
        assert_eq!(
            line(&lines, &format!("mknod {dev} ")),
            format!("mknod {dev} ok")
        );
    }
    for dev in ["console", "kmsg", "loop"] {
        let l = line(&lines, &format!("open {dev} "));
        assert!(
            l.starts_with(&format!("open {dev} denied")) && l.contains("Operation not permitted"),
            "{l}"
        );
    }
    assert_eq!(line(&lines, "open null "), "open null ok");
    assert_eq!(line(&lines, "open urandom "), "open urandom ok");
    assert_eq!(line(&lines, "write null"), "write null ok");
}

#[test]
fn privileged_program_allows_every_device() {
    let cg = TestCgroup::new();
    confine_v2_dir(&cg.0, &privileged_rules()).unwrap();
    let lines = probe(&cg);
    for dev in ["console", "kmsg", "null", "loop"] {
        assert_eq!(
            line(&lines, &format!("open {dev} ")),
            format!("open {dev} ok")
        );
    }
}

#[test]
fn attaching_to_a_missing_cgroup_names_it() {
    let cg = TestCgroup::new();
    let missing = cg.0.join("not-there");
    let err = confine_v2_dir(&missing, &default_rules())
        .unwrap_err()
        .to_string();
    assert!(err.contains("not-there"), "{err}");
}

#[test]
fn v1_rules_replace_what_was_there_and_confine_a_process() {
    let cg = TestCgroup::v1_devices();
    // What libcontainer leaves: its looser defaults, console and tun included.
    std::fs::write(cg.0.join("devices.deny"), "a").unwrap();
    for line in ["c 5:1 rwm", "c 10:200 rwm", "c 1:3 rwm"] {
        std::fs::write(cg.0.join("devices.allow"), line).unwrap();
    }
    confine_v1_dir(&cg.0, &default_rules()).unwrap();
    assert_eq!(
        read_list(&cg.0).unwrap(),
        [
            "c *:* m",
            "b *:* m",
            "c 1:3 rwm",
            "c 1:5 rwm",
            "c 1:7 rwm",
            "c 1:8 rwm",
            "c 1:9 rwm",
            "c 5:0 rwm",
            "c 5:2 rwm",
            "c 136:* rwm",
        ]
    );
    let lines = probe(&cg);
    for dev in ["console", "kmsg", "loop"] {
        assert_eq!(
            line(&lines, &format!("mknod {dev} ")),
            format!("mknod {dev} ok")
        );
        let l = line(&lines, &format!("open {dev} "));
        assert!(l.contains("Operation not permitted"), "{l}");
    }
    assert_eq!(line(&lines, "open null "), "open null ok");
    assert_eq!(line(&lines, "write null"), "write null ok");

    confine_v1_dir(&cg.0, &privileged_rules()).unwrap();
    assert_eq!(read_list(&cg.0).unwrap(), ["a *:* rwm"]);
    let lines = probe(&cg);
    assert_eq!(line(&lines, "open kmsg "), "open kmsg ok");
}

#[test]
fn v1_errors_name_the_cgroup_file() {
    let cg = TestCgroup::v1_devices();
    let missing = cg.0.join("not-there");
    let err = confine_v1_dir(&missing, &default_rules())
        .unwrap_err()
        .to_string();
    assert!(err.contains("not-there/devices.deny"), "{err}");
}
