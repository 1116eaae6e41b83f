//! An image whose /etc/passwd is a symlink out of the image (to the host's /dev/zero,
//! or to a host file) never makes the root daemon read the host: the user is resolved
//! inside the image's layers, the container gets a clear CreateContainerConfigError,
//! and the daemon keeps answering with its memory unchanged.

mod common;

use common::*;
use serde_json::Value;
use sha2::Digest;
use std::path::{Path, PathBuf};

/// A copy of the busybox layout with one more layer (an uncompressed tar holding the
/// symlink `etc/passwd -> target`) and the image user `user`, named `name`.
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
    let layer = builder.into_inner().unwrap();
    let digest = format!("sha256:{}", hex::encode(sha2::Sha256::digest(&layer)));
    let blobs = layout.join("blobs/sha256");
    std::fs::write(blobs.join(digest.trim_start_matches("sha256:")), &layer).unwrap();
    let read = |d: &str| -> Value {
        serde_json::from_slice(&std::fs::read(blobs.join(d.trim_start_matches("sha256:"))).unwrap())
            .unwrap()
    };
    let write = |v: &Value| -> (String, usize) {
        let bytes = serde_json::to_vec(v).unwrap();
        let hex = hex::encode(sha2::Sha256::digest(&bytes));
        std::fs::write(blobs.join(&hex), &bytes).unwrap();
        (format!("sha256:{hex}"), bytes.len())
    };
    let mut index: Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    let mut manifest = read(index["manifests"][0]["digest"].as_str().unwrap());
    let mut config = read(manifest["config"]["digest"].as_str().unwrap());
    config["rootfs"]["diff_ids"]
        .as_array_mut()
        .unwrap()
        .push(digest.clone().into());
    let (cd, cs) = write(&config);
    manifest["config"]["digest"] = cd.into();
    manifest["config"]["size"] = cs.into();
    manifest["layers"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "mediaType": "application/vnd.oci.image.layer.v1.tar",
            "digest": digest,
            "size": layer.len(),
        }));
    let (md, ms) = write(&manifest);
    index["manifests"][0]["digest"] = md.into();
    index["manifests"][0]["size"] = ms.into();
    std::fs::write(
        layout.join("index.json"),
        serde_json::to_vec(&index).unwrap(),
    )
    .unwrap();
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
