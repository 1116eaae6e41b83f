//! Images made by other tools (umoci, skopeo) as users make them, and the image
//! inputs around them: layouts named by a bare tag or short name, `load --name`,
//! docker-archives without RepoTags, `localhost/` references that are never pulled,
//! and `load` with no daemon at an explicit socket.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;
use podhost::image::{ImageError, ImageStore};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_podhost");

/// Runs a tool; fails the test (with its stderr) if it is missing or fails.
fn run(tool: &str, args: &[&str]) -> Output {
    let out = Command::new(tool)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{tool}: {e} (scripts/install-deps.sh --test installs it)"));
    assert!(
        out.status.success(),
        "{tool} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn json_of(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Unpacks the built-in busybox image's layers into `rootfs`, bottom first.
fn busybox_files_into(rootfs: &Path) {
    let layout = busybox_layout();
    let blob = |d: &str| {
        layout
            .join("blobs/sha256")
            .join(d.trim_start_matches("sha256:"))
    };
    let index = json_of(&layout.join("index.json"));
    let manifest = json_of(&blob(index["manifests"][0]["digest"].as_str().unwrap()));
    for layer in manifest["layers"].as_array().unwrap() {
        let tar = blob(layer["digest"].as_str().unwrap());
        let (tar, rootfs) = (tar.to_str().unwrap(), rootfs.to_str().unwrap());
        run("tar", &["-xzf", tar, "-C", rootfs]);
    }
}

/// An OCI layout made by umoci alone, as its README shows: `umoci init`, `new`,
/// `unpack`, the busybox files copied in, `repack`, then `umoci insert` of
/// /etc/greet. index.json names it only by the tag `latest`.
fn umoci_layout(tmp: &Path, dir_name: &str) -> PathBuf {
    let layout = tmp.join(dir_name);
    let image = format!("{}:latest", layout.display());
    let bundle = tmp.join("bundle");
    run("umoci", &["init", "--layout", layout.to_str().unwrap()]);
    run("umoci", &["new", "--image", &image]);
    run(
        "umoci",
        &["unpack", "--image", &image, bundle.to_str().unwrap()],
    );
    busybox_files_into(&bundle.join("rootfs"));
    run(
        "umoci",
        &["repack", "--image", &image, bundle.to_str().unwrap()],
    );
    let greet = tmp.join("greet");
    std::fs::write(&greet, "hello from umoci\n").unwrap();
    run(
        "umoci",
        &[
            "insert",
            "--image",
            &image,
            greet.to_str().unwrap(),
            "/etc/greet",
        ],
    );
    let index = json_of(&layout.join("index.json"));
    assert_eq!(
        index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"], "latest",
        "umoci names the manifest by its tag"
    );
    layout
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn pod_yaml(name: &str, image: &str, command: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: main\n    image: {image}\n    command: [\"sh\", \"-c\", {}]\n",
        serde_json::to_string(command).unwrap()
    )
}

fn waiting_reason(pod: &Value) -> Option<(String, String)> {
    let w = &container_status(pod, "main")?["state"]["waiting"];
    Some((w["reason"].as_str()?.into(), w["message"].as_str()?.into()))
}

/// umoci's layout (named `latest`, with umoci's unpadded insert layer) loads through
/// the daemon as localhost/<dir>:latest, and a pod with that image and no
/// imagePullPolicy (so Always, which localhost/ overrides) runs from it, with the
/// default PATH its config lacks.
#[test]
fn umoci_layout_loads_by_its_directory_name_and_runs() {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let layout = umoci_layout(tmp.path(), "umoci-bb");
    let d = TestDaemon::start();
    let out = d.cli(&["load", layout.to_str().unwrap()]);
    assert!(out.status.success(), "load: {}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Loaded image: localhost/umoci-bb:latest"),
        "{stdout}"
    );
    d.write_manifest(
        "umoci.yaml",
        &pod_yaml(
            "umoci",
            "localhost/umoci-bb:latest",
            "cat /etc/greet; echo PATH=$PATH; sleep 1000",
        ),
    );
    let pod = d.wait_pod("umoci", "umoci pod Running", 30, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    assert_eq!(
        container_status(&pod, "main").unwrap()["image"],
        "localhost/umoci-bb:latest"
    );
    wait_until(
        std::time::Duration::from_secs(10),
        "greeting logged",
        || {
            d.logs_of("umoci", "main")
                .contains("hello from umoci")
                .then_some(())
        },
    )
    .unwrap_or_else(|| {
        panic!(
            "the container prints the file umoci inserted; logs: {:?}; pod: {}",
            d.cli(&["logs", &d.full_name("umoci")]),
            d.pod("umoci").unwrap()
        )
    });
    // umoci's config has no Env: the container gets the default PATH (as with docker).
    let logs = d.logs_of("umoci", "main");
    assert!(
        logs.contains("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
        "{logs}"
    );
    let events = d.pod_events("umoci");
    assert!(
        !events.iter().any(|e| e["reason"] == "Pulling"),
        "a localhost/ image is never pulled: {events:?}"
    );
}

/// umoci's layout with a second tag (`umoci tag`: `busybox` beside `latest`, one
/// manifest): `load --name` loads that one image under REF, and without --name it is
/// loaded under both names (as the single-name rules give each: `busybox` a short
/// name, `latest` the directory's tag).
#[test]
fn umoci_layout_with_two_tags_loads_as_one_image() {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let layout = umoci_layout(tmp.path(), "umoci-tags");
    let image = format!("{}:latest", layout.display());
    run("umoci", &["tag", "--image", &image, "busybox"]);
    let index = json_of(&layout.join("index.json"));
    let manifests = index["manifests"].as_array().unwrap();
    assert_eq!(
        manifests.len(),
        2,
        "umoci lists the manifest per tag: {index}"
    );
    assert_eq!(manifests[0]["digest"], manifests[1]["digest"], "{index}");
    let d = TestDaemon::start();
    let out = d.cli(&[
        "load",
        "--name",
        "localhost/umoci:1",
        layout.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "load --name: {}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "Loaded image: localhost/umoci:1"
    );
    let out = d.cli(&["load", layout.to_str().unwrap()]);
    assert!(out.status.success(), "load: {}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Loaded image: localhost/umoci-tags:latest")
            && stdout.contains("Loaded image: localhost/busybox:latest"),
        "{stdout}"
    );
}

/// skopeo's copies: a short name (`oci:DST:busybox`), several tags in one layout,
/// a docker-archive without RepoTags, a layout without any name — each loads by
/// the naming rules or with --name, and the ambiguous ones are refused clearly.
/// Through the CLI without a daemon (explicit --root-dir).
#[test]
fn skopeo_copies_load_by_short_name_tag_or_name() {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let src = umoci_layout(tmp.path(), "src");
    let src_ref = format!("oci:{}:latest", src.display());
    let root = tmp.path().join("root");
    let load = |args: &[&str]| {
        Command::new(BIN)
            .arg("--socket")
            .arg(tmp.path().join("no-daemon.sock"))
            .arg("load")
            .arg("--root-dir")
            .arg(&root)
            .args(args)
            .output()
            .unwrap()
    };
    let loaded = |out: &Output| {
        assert!(out.status.success(), "load: {}", stderr(out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };

    // A short name: localhost/<name>:latest.
    let short = tmp.path().join("short");
    run(
        "skopeo",
        &[
            "copy",
            &src_ref,
            &format!("oci:{}:busybox", short.display()),
        ],
    );
    let out = loaded(&load(&[short.to_str().unwrap()]));
    assert!(
        out.contains("Loaded image: localhost/busybox:latest"),
        "{out}"
    );

    // Two tags of one image in one layout: one image under both names.
    let same = tmp.path().join("same");
    for tag in ["v1", "v2"] {
        run(
            "skopeo",
            &["copy", &src_ref, &format!("oci:{}:{tag}", same.display())],
        );
    }
    let out = loaded(&load(&[same.to_str().unwrap()]));
    assert!(
        out.contains("Loaded image: localhost/same:v1")
            && out.contains("Loaded image: localhost/same:v2"),
        "{out}"
    );

    // Tags of two different images: ambiguous without --name, the tag picks with it.
    let tags = tmp.path().join("tags");
    let other = image_variant(
        &tmp.path().join("other"),
        "localhost/other:1",
        serde_json::json!({ "Env": ["OTHER=1"] }),
    );
    let other_ref = format!("oci:{}:localhost/other:1", other.display());
    for (from, tag) in [(&src_ref, "v1"), (&other_ref, "v2")] {
        run(
            "skopeo",
            &["copy", from, &format!("oci:{}:{tag}", tags.display())],
        );
    }
    let out = load(&[tags.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("\"v1\"") && err.contains("\"v2\"") && err.contains("--name"),
        "{err}"
    );
    let out = loaded(&load(&[
        "--name",
        "localhost/tags:v2",
        tags.to_str().unwrap(),
    ]));
    assert_eq!(out.trim(), "Loaded image: localhost/tags:v2");

    // A docker-archive without RepoTags: needs --name, then loads.
    let archive = tmp.path().join("bb.tar");
    run(
        "skopeo",
        &[
            "copy",
            &src_ref,
            &format!("docker-archive:{}", archive.display()),
        ],
    );
    let out = load(&[archive.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("--name localhost/NAME:TAG"),
        "{}",
        stderr(&out)
    );
    let out = loaded(&load(&[
        "--name",
        "localhost/archived:1",
        archive.to_str().unwrap(),
    ]));
    assert_eq!(out.trim(), "Loaded image: localhost/archived:1");

    // A layout whose index.json names nothing: --name.
    let unnamed = tmp.path().join("unnamed");
    run(
        "skopeo",
        &["copy", &src_ref, &format!("oci:{}", unnamed.display())],
    );
    let mut index = json_of(&unnamed.join("index.json"));
    index["manifests"][0]
        .as_object_mut()
        .unwrap()
        .remove("annotations");
    std::fs::write(unnamed.join("index.json"), index.to_string()).unwrap();
    let out = loaded(&load(&[
        "--name",
        "localhost/unnamed:2",
        unnamed.to_str().unwrap(),
    ]));
    assert_eq!(out.trim(), "Loaded image: localhost/unnamed:2");
    // --name must be a full reference.
    let out = load(&["--name", "latest", unnamed.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("full reference"), "{}", stderr(&out));

    // All of them but tags:v2 are the same image (same layers, same config).
    let store = ImageStore::open(&root).unwrap();
    assert_ne!(
        store.resolve("localhost/tags:v2").unwrap().manifest_digest,
        store.resolve("localhost/same:v2").unwrap().manifest_digest
    );
    let digests: Vec<String> = [
        "localhost/busybox:latest",
        "localhost/same:v1",
        "localhost/same:v2",
        "localhost/unnamed:2",
    ]
    .iter()
    .map(|r| store.resolve(r).unwrap().manifest_digest)
    .collect();
    assert!(digests.iter().all(|d| *d == digests[0]), "{digests:?}");
    let archived = store.resolve("localhost/archived:1").unwrap();
    assert_eq!(
        std::fs::read(archived.layers.last().unwrap().join("etc/greet")).unwrap(),
        b"hello from umoci\n"
    );
    assert!(matches!(
        store.resolve("localhost/tags:v1").unwrap_err(),
        ImageError::NotFound { .. }
    ));
}

/// `image: localhost/busybox:latest` with no imagePullPolicy runs; a missing
/// localhost/ image waits as ErrImageNeverPull with how to load it (no pull, no
/// ImagePullBackOff) and starts once it is loaded; `podhost pull localhost/x` refuses.
#[test]
fn localhost_images_are_local_only() {
    require_root();
    let d = TestDaemon::start();
    d.write_manifest(
        "local.yaml",
        &pod_yaml("local", "localhost/busybox:latest", "sleep 1000"),
    );
    d.write_manifest(
        "missing.yaml",
        &pod_yaml("missing", "localhost/missing:latest", "sleep 1000"),
    );
    let pod = d.wait_pod("local", "local pod Running", 30, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    assert_eq!(pod["spec"]["containers"][0]["imagePullPolicy"], "Always");

    let (reason, message) = d.wait_pod("missing", "ErrImageNeverPull", 30, waiting_reason);
    assert_eq!(reason, "ErrImageNeverPull", "{message}");
    // The hint names this daemon's socket: a plain `podhost load` would reach another.
    let load = format!("podhost load --socket {}", d.socket.display());
    assert!(
        message.contains(&format!("{load} DIR --name localhost/missing:latest"))
            && message.contains("never pulled"),
        "{message}"
    );
    // A second look (after the first back-off) is still ErrImageNeverPull.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let (reason, _) = waiting_reason(&d.pod("missing").unwrap()).unwrap();
    assert_eq!(reason, "ErrImageNeverPull");
    let events = d.pod_events("missing");
    assert!(
        !events.iter().any(|e| e["reason"] == "Pulling"),
        "{events:?}"
    );

    let out = d.cli(&["pull", "localhost/missing"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("never pulled") && stderr(&out).contains(&load),
        "{}",
        stderr(&out)
    );

    // Loading it under that name starts the pod.
    let layout = busybox_layout().to_str().unwrap();
    let out = d.cli(&["load", "--name", "localhost/missing:latest", layout]);
    assert!(out.status.success(), "load: {}", stderr(&out));
    d.wait_pod("missing", "missing pod Running once loaded", 30, |p| {
        (phase(p) == "Running").then_some(())
    });
}

/// `load` with no daemon at an explicit --socket fails naming the socket; only an
/// explicit --root-dir loads without a daemon.
#[test]
fn load_without_a_daemon_needs_an_explicit_root_dir() {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let socket = tmp.path().join("absent.sock");
    let layout = busybox_layout();
    let out = Command::new(BIN)
        .arg("--socket")
        .arg(&socket)
        .arg("load")
        .arg(layout)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "no podhost daemon is running at {}",
            socket.display()
        )) && err.contains("--root-dir"),
        "{err}"
    );
    // A stale socket file (a daemon that died) is no daemon either.
    let stale = tmp.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    let root = tmp.path().join("root");
    let out = Command::new(BIN)
        .arg("--socket")
        .arg(&stale)
        .args(["load", "--root-dir"])
        .arg(&root)
        .arg(layout)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("loading straight into {}", root.display())));
    ImageStore::open(&root)
        .unwrap()
        .resolve("localhost/busybox:latest")
        .unwrap();
}
