//! `load`, `pull`, `rmi` and `gc` say which image store they acted on (stderr), and
//! refuse a `--root-dir` that is not the root of the daemon answering on the socket,
//! naming both roots and the socket of the daemon on the root asked for. `load` of a
//! layout that lists one manifest under several names (as umoci writes `busybox` and
//! `latest`) loads that one image.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::common_registry;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_podhost");

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn ok(out: Output, what: &str) -> Output {
    assert!(out.status.success(), "{what}: {}", stderr(&out));
    out
}

fn refused(out: Output, what: &str) -> String {
    assert!(
        !out.status.success(),
        "{what} must be refused: {}",
        stdout(&out)
    );
    stderr(&out)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `podhost --socket SOCKET ARGS…`.
fn cli_at(socket: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("--socket")
        .arg(socket)
        .args(args)
        .output()
        .unwrap()
}

/// The store line the commands print: the daemon's root dir and its socket.
fn store_of(d: &TestDaemon) -> String {
    format!(
        "the image store of {} (daemon on {})",
        d.root.display(),
        d.socket.display()
    )
}

/// The busybox layout listing its manifest twice, as umoci does after `umoci tag`:
/// once as `busybox`, once as `latest`.
fn two_names_one_manifest(dest: &Path) -> PathBuf {
    let status = Command::new("cp")
        .arg("-a")
        .arg(busybox_layout())
        .arg(dest)
        .status()
        .unwrap();
    assert!(status.success());
    let path = dest.join("index.json");
    let mut index: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let entry = index["manifests"][0].clone();
    let named = |name: &str| {
        let mut e = entry.clone();
        e["annotations"] = serde_json::json!({ "org.opencontainers.image.ref.name": name });
        e
    };
    index["manifests"] = serde_json::json!([named("busybox"), named("latest")]);
    std::fs::write(&path, serde_json::to_vec(&index).unwrap()).unwrap();
    dest.to_path_buf()
}

fn listed(d: &TestDaemon, reference: &str) -> bool {
    stdout(&ok(d.cli(&["images"]), "images")).contains(reference)
}

#[test]
fn image_commands_refuse_another_daemons_root_and_say_which_store() {
    require_root();
    let a = TestDaemon::start();
    let b = TestDaemon::start();
    let tmp = tempfile::tempdir().unwrap();
    let layout = s(busybox_layout());

    // A answers on the socket; --root-dir names B: refused, naming both roots and
    // B's socket (from B's daemon.lock); nothing is loaded anywhere.
    let err = refused(
        a.cli(&[
            "load",
            "--root-dir",
            s(&b.root),
            "--name",
            "localhost/only-b:1",
            layout,
        ]),
        "load --root-dir B through A",
    );
    assert!(
        err.contains(&format!(
            "--root-dir {} is not the root dir",
            b.root.display()
        )) && err.contains(&format!("its root dir is {}", a.root.display()))
            && err.contains(&format!("pass --socket {}", b.socket.display())),
        "{err}"
    );
    assert!(!listed(&a, "localhost/only-b") && !listed(&b, "localhost/only-b"));

    // B's own socket: loaded into B (through a symlink to B's root too), and said so;
    // stdout stays the `Loaded image:` lines.
    let link = tmp.path().join("b-root-link");
    std::os::unix::fs::symlink(&b.root, &link).unwrap();
    let out = ok(
        b.cli(&[
            "load",
            "--root-dir",
            s(&link),
            "--name",
            "localhost/only-b:1",
            layout,
        ]),
        "load --root-dir B through B",
    );
    assert_eq!(stdout(&out).trim(), "Loaded image: localhost/only-b:1");
    assert!(
        stderr(&out).contains(&format!("loaded into {}", store_of(&b))),
        "{}",
        stderr(&out)
    );
    assert!(listed(&b, "localhost/only-b:1") && !listed(&a, "localhost/only-b"));

    // Without --root-dir: the answering daemon's store, said.
    let out = ok(
        a.cli(&["load", "--name", "localhost/only-a:1", layout]),
        "load on A",
    );
    assert!(
        stderr(&out).contains(&format!("loaded into {}", store_of(&a))),
        "{}",
        stderr(&out)
    );

    // No daemon on the socket while B's daemon serves B elsewhere: not behind its back.
    let absent = tmp.path().join("absent.sock");
    let err = refused(
        cli_at(
            &absent,
            &[
                "load",
                "--root-dir",
                s(&b.root),
                "--name",
                "localhost/x:1",
                layout,
            ],
        ),
        "load straight into a served root",
    );
    assert!(
        err.contains(&format!("answers on {}", b.socket.display()))
            && err.contains(&format!("pass --socket {}", b.socket.display())),
        "{err}"
    );
    assert!(!listed(&b, "localhost/x:1"));
    // A root no daemon serves: straight into its store, said.
    let idle = tmp.path().join("idle-root");
    let out = ok(
        cli_at(&absent, &["load", "--root-dir", s(&idle), layout]),
        "load with no daemon",
    );
    assert!(
        stderr(&out).contains(&format!(
            "loaded into the image store of {} (no daemon: {}/images directly)",
            idle.display(),
            idle.display()
        )),
        "{}",
        stderr(&out)
    );

    // rmi: refused through A for B; through B it removes from B and says so.
    let err = refused(
        a.cli(&["rmi", "--root-dir", s(&b.root), "localhost/only-b:1"]),
        "rmi --root-dir B through A",
    );
    assert!(
        err.contains(&b.root.display().to_string()) && err.contains(&a.root.display().to_string()),
        "{err}"
    );
    assert!(
        listed(&b, "localhost/only-b:1"),
        "the refused rmi removed nothing"
    );
    let out = ok(
        b.cli(&["rmi", "--root-dir", s(&b.root), "localhost/only-b:1"]),
        "rmi on B",
    );
    assert!(
        stdout(&out).starts_with("Deleted: localhost/only-b:1"),
        "{}",
        stdout(&out)
    );
    assert!(
        stderr(&out).contains(&format!("removed from {}", store_of(&b))),
        "{}",
        stderr(&out)
    );
    assert!(!listed(&b, "localhost/only-b:1"));

    // gc: refused for another root; its report on stdout stays JSON.
    let err = refused(
        a.cli(&["gc", "--root-dir", s(&b.root)]),
        "gc --root-dir B via A",
    );
    assert!(
        err.contains(&format!("pass --socket {}", b.socket.display())),
        "{err}"
    );
    let out = ok(a.cli(&["gc"]), "gc on A");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["bytes_freed"].is_u64(), "{report}");
    assert!(
        stderr(&out).contains(&format!("collected garbage in {}", store_of(&a))),
        "{}",
        stderr(&out)
    );

    // A root whose daemon is not running: the hint says to start one with its own socket.
    let err = refused(
        a.cli(&["gc", "--root-dir", s(&idle)]),
        "gc --root-dir of an idle root",
    );
    assert!(
        err.contains("No daemon answers for") && err.contains("a --socket of its own"),
        "{err}"
    );
}

#[test]
fn pull_says_which_store_and_refuses_another_root() {
    require_root();
    let registry = common_registry::Registry::start();
    registry.push_busybox("v1", &[]);
    let d = TestDaemon::start_on_machine_network(&["--insecure-registry", &registry.addr]);
    let image = format!("{}/busybox:v1", registry.addr);
    let other = tempfile::tempdir().unwrap();
    let err = refused(
        d.cli(&["pull", "--root-dir", s(other.path()), &image]),
        "pull --root-dir OTHER",
    );
    assert!(
        err.contains(&format!("its root dir is {}", d.root.display()))
            && err.contains(&other.path().display().to_string()),
        "{err}"
    );
    assert!(!listed(&d, &image), "the refused pull pulled nothing");
    let out = ok(d.cli(&["pull", "--root-dir", s(&d.root), &image]), "pull");
    assert!(
        stdout(&out).starts_with(&format!("{image}@sha256:")),
        "{}",
        stdout(&out)
    );
    assert!(
        stderr(&out).contains(&format!("pulled into {}", store_of(&d))),
        "{}",
        stderr(&out)
    );
    assert!(listed(&d, &image));
}

/// One manifest listed as `busybox` and as `latest`: `--name` loads it under REF (a tag
/// the layout does not list, too); without `--name`, under both names.
#[test]
fn a_manifest_listed_under_two_names_loads_as_one_image() {
    require_root();
    let d = TestDaemon::start();
    let tmp = tempfile::tempdir().unwrap();
    let layout = two_names_one_manifest(&tmp.path().join("bb"));
    let out = ok(
        d.cli(&["load", "--name", "localhost/mine:1", s(&layout)]),
        "load --name",
    );
    assert_eq!(stdout(&out).trim(), "Loaded image: localhost/mine:1");
    let out = ok(d.cli(&["load", s(&layout)]), "load without --name");
    let loaded = stdout(&out);
    assert!(
        loaded.contains("Loaded image: localhost/busybox:latest")
            && loaded.contains("Loaded image: localhost/bb:latest"),
        "{loaded}"
    );
    // Both names, and --name's, are the one manifest.
    let images: Vec<Value> = podhost::api::client::Client::new(&d.socket)
        .get_json("/images")
        .unwrap();
    let digest_of = |r: &str| {
        images
            .iter()
            .find(|i| i["reference"] == r)
            .unwrap_or_else(|| panic!("{r} not in {images:?}"))["digest"]
            .clone()
    };
    let mine = digest_of("localhost/mine:1");
    assert_eq!(digest_of("localhost/busybox:latest"), mine);
    assert_eq!(digest_of("localhost/bb:latest"), mine);
}
