//! `podhost exec`'s exit status, as a shell and `kubectl exec` give it: the command's
//! own, 127 for a program that is not there, 126 for one that cannot be executed.

use crate::common;

use common::*;

#[test]
fn exec_ends_with_the_commands_status_or_127_and_126_as_a_shell_does() {
    assert!(require_root());
    let d = TestDaemon::start();
    d.write_manifest(
        "e.yaml",
        &busybox_pod(
            "e",
            "  terminationGracePeriodSeconds: 2\n",
            "",
            "exec sleep 1000",
        ),
    );
    d.wait_pod("e", "e Running", 30, |p| {
        (phase(p) == "Running").then_some(())
    });
    let full = d.full_name("e");
    let exec = |args: &[&str]| {
        let mut all = vec!["exec", full.as_str(), "--"];
        all.extend_from_slice(args);
        let out = d.cli(&all);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    // (command, status, what stderr says)
    let cases: [(&[&str], i32, &str); 5] = [
        (&["sh", "-c", "exit 3"], 3, ""),
        (
            &["nosuchcmd"],
            127,
            "\"nosuchcmd\": executable file not found in $PATH",
        ),
        (
            &["/no/such/file"],
            127,
            "\"/no/such/file\": no such file or directory",
        ),
        (&["/etc/passwd"], 126, "\"/etc/passwd\": permission denied"),
        (&["/etc"], 126, "\"/etc\": permission denied"),
    ];
    for (command, want_code, want_stderr) in cases {
        let (code, stderr) = exec(command);
        assert_eq!(code, Some(want_code), "{command:?}: {stderr}");
        assert!(stderr.contains(want_stderr), "{command:?}: {stderr}");
    }
    d.remove_manifest("e.yaml");
    d.wait_gone("e", 40);
}
