//! Device confinement end to end through the daemon on this host (cgroup v1 devices
//! controller): a busybox pod creates device nodes and tries them; only the default
//! devices open, /dev holds exactly the default set, and the container's devices.list is
//! the default allow list (not libcontainer's looser one).

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::PathBuf;

use common::*;

/// A block device of this host as (name, major, minor), from /sys/class/block (a disk
/// rather than a loop or zram device when there is one).
fn host_block_device() -> (String, String, String) {
    let mut devs: Vec<(String, String)> = std::fs::read_dir("/sys/class/block")
        .expect("/sys/class/block")
        .flatten()
        .filter_map(|e| {
            let dev = std::fs::read_to_string(e.path().join("dev")).ok()?;
            Some((
                e.file_name().to_string_lossy().to_string(),
                dev.trim().to_string(),
            ))
        })
        .collect();
    devs.sort_by_key(|(name, _)| name.starts_with("loop") || name.starts_with("zram"));
    let (name, dev) = devs
        .into_iter()
        .next()
        .expect("no block device on this host");
    let (major, minor) = dev.split_once(':').expect("major:minor");
    (name, major.to_string(), minor.to_string())
}

const PROBE: &str = r#"
for d in "console c 5 1 w" "kmsg c 1 11 r" "tun c 10 200 r" "blk b BLK_MAJ BLK_MIN r" "mem c 1 1 r"; do
  set -- $d
  if mknod "/tmp/$1" "$2" "$3" "$4" 2>/dev/null; then echo "mknod $1 ok"; else echo "mknod $1 denied"; fi
  if [ "$5" = w ]; then (exec 3>"/tmp/$1") 2>/tmp/err; else (exec 3<"/tmp/$1") 2>/tmp/err; fi &&
    echo "open $1 ok" || echo "open $1 denied: $(cat /tmp/err)"
done
echo x >/dev/null && echo "null ok"
echo "zero $(head -c 4 /dev/zero | wc -c)"
echo "urandom $(head -c 4 /dev/urandom | wc -c)"
echo "random $(head -c 4 /dev/random | wc -c)"
echo "full $(head -c 4 /dev/full | wc -c)"
echo "dev $(ls -A /dev | tr '\n' ' ')"
echo "nodes $(find /dev -type c -o -type b | sort | tr '\n' ' ')"
echo done
exec sleep 1000
"#;

fn report_line(lines: &[String], prefix: &str) -> String {
    lines
        .iter()
        .find(|l| l.starts_with(prefix))
        .cloned()
        .unwrap_or_else(|| panic!("no {prefix:?} line in {lines:#?}"))
}

#[test]
fn default_devices_only_and_devices_list_is_the_allow_list() {
    assert!(nix::unistd::geteuid().is_root(), "this test needs root");
    let (blk_name, maj, min) = host_block_device();
    eprintln!("host block device {blk_name} {maj}:{min}");
    let d = TestDaemon::start();
    let script = PROBE.replace("BLK_MAJ", &maj).replace("BLK_MIN", &min);
    d.write_manifest(
        "dev.yaml",
        &busybox_pod("dev", "  terminationGracePeriodSeconds: 1\n", "", &script),
    );
    let pod = d.wait_pod("dev", "pod Running", 30, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
    let log = d
        .logs
        .join(format!("default_{}_{uid}/main/0.log", d.full_name("dev")));
    let lines = wait_until(std::time::Duration::from_secs(20), "probe done", || {
        let lines: Vec<String> = log_lines(&log).into_iter().map(|(_, _, m)| m).collect();
        lines.iter().any(|l| l == "done").then_some(lines)
    })
    .unwrap_or_else(|| {
        panic!(
            "no probe report in {}; daemon log:\n{}",
            log.display(),
            d.daemon_log()
        )
    });
    eprintln!("{lines:#?}");

    for dev in ["console", "kmsg", "tun", "blk", "mem"] {
        // mknod itself is allowed (`m` on every device), opening is not: EPERM from the
        // device cgroup, not EACCES from a nodev mount.
        assert_eq!(
            report_line(&lines, &format!("mknod {dev} ")),
            format!("mknod {dev} ok")
        );
        let open = report_line(&lines, &format!("open {dev} "));
        assert!(
            open.starts_with(&format!("open {dev} denied"))
                && open.contains("Operation not permitted"),
            "{open}"
        );
    }
    assert_eq!(report_line(&lines, "null "), "null ok");
    assert_eq!(report_line(&lines, "zero "), "zero 4");
    assert_eq!(report_line(&lines, "urandom "), "urandom 4");
    assert_eq!(report_line(&lines, "random "), "random 4");
    assert_eq!(report_line(&lines, "full "), "full 4");
    assert_eq!(
        report_line(&lines, "dev "),
        // termination-log: the container's terminationMessagePath, as in Kubernetes.
        "dev fd full mqueue null ptmx pts random shm stderr stdin stdout termination-log tty urandom zero "
    );
    assert_eq!(
        report_line(&lines, "nodes "),
        "nodes /dev/full /dev/null /dev/pts/ptmx /dev/random /dev/tty /dev/urandom /dev/zero "
    );

    // The container's v1 devices cgroup holds exactly the default allow list.
    let bundle = d.root.join(format!("pods/{uid}/containers/main/0"));
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bundle.join("config.json")).unwrap()).unwrap();
    let cgroups_path = config["linux"]["cgroupsPath"].as_str().unwrap();
    let list_file = PathBuf::from("/sys/fs/cgroup/devices")
        .join(cgroups_path.trim_start_matches('/'))
        .join("devices.list");
    let list = std::fs::read_to_string(&list_file)
        .unwrap_or_else(|e| panic!("{}: {e}", list_file.display()));
    assert_eq!(
        list.lines().collect::<Vec<_>>(),
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
        ],
        "{}",
        list_file.display()
    );
    // The shim took the v1 path and says what it cost.
    let shim_log = std::fs::read_to_string(bundle.join("shim.log")).unwrap_or_default();
    let applied = shim_log
        .lines()
        .find(|l| l.contains("device rules applied"))
        .unwrap_or_else(|| panic!("no 'device rules applied' in shim.log:\n{shim_log}"));
    eprintln!("{applied}");
    assert!(applied.contains("CgroupV1"), "{applied}");
    // podhost exec joins the same cgroup: it is confined too.
    let out = d.cli(&[
        "exec",
        &d.full_name("dev"),
        "--",
        "sh",
        "-c",
        "cat /tmp/kmsg >/dev/null 2>&1 && echo exec-open-kmsg-ok || echo exec-open-kmsg-denied",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "exec-open-kmsg-denied"
    );
}
