//! An image whose /etc/passwd is a symlink out of the image (to the host's /dev/zero,
//! or to a host file) never makes the root daemon read the host: the user is resolved
//! inside the image's layers, the container gets a clear CreateContainerConfigError,
//! and the daemon keeps answering with its memory unchanged.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use std::path::{Path, PathBuf};

/// A copy of the busybox layout with one more layer holding the symlink
/// `etc/passwd -> target`, and the image user `user`, named `name`.
fn image_with_passwd_link(dest: &Path, name: &str, target: &str, user: &str) -> PathBuf {
    let layout = image_variant(dest, name, serde_json::json!({ "User": user }));
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Symlink);
    header.set_size(0);
    header.set_mode(0o777);
    builder
        .append_link(&mut header, "etc/passwd", target)
        .unwrap();
    append_layer(&layout, &builder.into_inner().unwrap());
    layout
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

#[test]
fn passwd_links_out_of_the_image_are_never_followed_on_the_host() {
    assert!(require_root());
    let d = TestDaemon::start();
    let tmp = tempfile::tempdir().unwrap();
    // A host file that would give the user uid 4242 if the host's path were followed.
    let host_file = tmp.path().join("host-passwd");
    std::fs::write(&host_file, "nobody:x:4242:4242::/:/bin/sh\n").unwrap();
    d.load(&image_with_passwd_link(
        &tmp.path().join("zero"),
        "localhost/hostile-zero:1",
        "/dev/zero",
        "nobody",
    ));
    d.load(&image_with_passwd_link(
        &tmp.path().join("host"),
        "localhost/hostile-host:1",
        host_file.to_str().unwrap(),
        "nobody",
    ));
    d.load(&image_with_passwd_link(
        &tmp.path().join("climb"),
        "localhost/hostile-climb:1",
        &format!("../../../../../../../..{}", host_file.display()),
        "nobody",
    ));
    let daemon = d.daemon_pid().unwrap();
    let rss_before = rss_kib(daemon);
    for (name, image) in [
        ("zero", "localhost/hostile-zero:1"),
        ("host", "localhost/hostile-host:1"),
        ("climb", "localhost/hostile-climb:1"),
    ] {
        d.write_manifest(
            &format!("{name}.yaml"),
            &format!(
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: main\n    image: {image}\n    imagePullPolicy: Never\n    command: [\"id\"]\n"
            ),
        );
    }
    for name in ["zero", "host", "climb"] {
        let p = d.wait_pod(name, "CreateContainerConfigError", 30, |p| {
            let w = &container_status(p, "main")?["state"]["waiting"];
            (w["reason"] == "CreateContainerConfigError").then(|| w.clone())
        });
        let msg = p["message"].as_str().unwrap();
        assert!(
            msg.contains("\"nobody\" is not in its /etc/passwd"),
            "{name}: the image's own (absent) file was read: {msg}"
        );
    }
    // The API still answers and the daemon did not read /dev/zero.
    assert!(d.cli(&["get", "pods"]).status.success());
    let rss_after = rss_kib(daemon);
    assert!(
        rss_after < rss_before + 64 * 1024,
        "daemon RSS grew from {rss_before} KiB to {rss_after} KiB"
    );
}
