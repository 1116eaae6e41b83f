//! Bad images given to `podhost load` through the daemon: each is refused with a
//! message naming the path or blob, and the store and the running pod are untouched.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use super::common::*;
use super::{Healthy, Outcome, print_outcomes};

/// A copy of the busybox layout at `dir/name`.
fn layout_copy(dir: &Path, name: &str) -> PathBuf {
    let dest = dir.join(name);
    let ok = Command::new("cp")
        .arg("-a")
        .arg(busybox_layout())
        .arg(&dest)
        .status()
        .unwrap()
        .success();
    assert!(ok, "cp -a the busybox layout");
    dest
}

fn index_of(layout: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap()
}

/// A busybox variant named `localhost/corpus-NAME:1` with one more layer of its own
/// (a blob the store does not hold yet, so the load must read it); returns the layout
/// and that layer's digest and blob path.
fn variant_with_own_layer(dir: &Path, name: &str) -> (PathBuf, String, PathBuf) {
    let l = image_variant(
        &dir.join(name),
        &format!("localhost/corpus-{name}:1"),
        json!({}),
    );
    let layer = small_layer(&format!("{name}-{}", "x".repeat(4000)));
    append_layer(&l, &layer);
    let (digest, _) = write_blob(&l, &layer);
    let path = l
        .join("blobs/sha256")
        .join(digest.trim_start_matches("sha256:"));
    (l, digest, path)
}

/// A plain tar holding one small file.
fn small_layer(name: &str) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(2);
    h.set_mode(0o644);
    h.set_cksum();
    b.append_data(&mut h, name, &b"x\n"[..]).unwrap();
    b.into_inner().unwrap()
}

struct Case {
    kind: &'static str,
    path: PathBuf,
    expect: Vec<String>,
}

fn cases(dir: &Path) -> Vec<Case> {
    let mut cases = Vec::new();
    let mut add = |kind, path: PathBuf, expect: &[&str]| {
        cases.push(Case {
            kind,
            path,
            expect: expect.iter().map(|s| s.to_string()).collect(),
        })
    };

    // A layer blob cut in half (an interrupted copy).
    let (l, digest, blob) = variant_with_own_layer(dir, "truncated");
    let len = std::fs::metadata(&blob).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&blob)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    add(
        "truncated layer blob",
        l,
        &[&digest, "does not match its descriptor", "re-export"],
    );

    // Same size, other content: the digest does not match.
    let (l, digest, blob) = variant_with_own_layer(dir, "wrong-digest");
    let mut bytes = std::fs::read(&blob).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&blob, bytes).unwrap();
    add(
        "layer with a wrong digest",
        l,
        &[&digest, "does not match its descriptor"],
    );

    // A blob the manifest names is not there.
    let (l, digest, blob) = variant_with_own_layer(dir, "missing-blob");
    std::fs::remove_file(&blob).unwrap();
    add(
        "missing layer blob",
        l.clone(),
        &[&format!("blob {digest} is missing from {}", l.display())],
    );

    // index.json that is not JSON.
    let l = layout_copy(dir, "bad-index");
    std::fs::write(l.join("index.json"), b"{\"manifests\": [").unwrap();
    add(
        "index.json not JSON",
        l.clone(),
        &[&format!(
            "cannot parse {}/index.json: serde failed: EOF while parsing a list at line 1 column 15",
            l.display()
        )],
    );

    // A zstd layer: podhost does not decompress zstd and must say so.
    let l = layout_copy(dir, "zstd");
    let mut zstd = vec![0x28, 0xb5, 0x2f, 0xfd];
    zstd.extend_from_slice(&[0u8; 60]);
    append_layer(&l, &zstd);
    let (zstd_digest, _) = write_blob(&l, &zstd);
    add(
        "zstd layer",
        l,
        &[&format!(
            "layer {zstd_digest}: zstd compression is not supported; re-export with gzip"
        )],
    );

    // An image index whose only manifest is for another platform.
    let l = layout_copy(dir, "arm-only");
    let mut index = index_of(&l);
    let mut entry = index["manifests"][0].clone();
    entry["platform"] = json!({"architecture": "arm64", "os": "linux", "variant": "v8"});
    let nested = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [entry],
    });
    let (nested_digest, nested_size) = write_blob(&l, &serde_json::to_vec(&nested).unwrap());
    index["manifests"][0]["mediaType"] = "application/vnd.oci.image.index.v1+json".into();
    index["manifests"][0]["digest"] = nested_digest.clone().into();
    index["manifests"][0]["size"] = nested_size.into();
    std::fs::write(l.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
    add(
        "manifest list, no amd64",
        l,
        &[&format!(
            "image index {nested_digest} has no manifest for linux/amd64"
        )],
    );

    // A docker-archive whose manifest.json names files it does not hold.
    let archive = dir.join("broken-docker.tar");
    let mut b = tar::Builder::new(Vec::new());
    let manifest = br#"[{"Config":"cfg.json","RepoTags":["broken:1"],"Layers":["l/layer.tar"]}]"#;
    let mut h = tar::Header::new_gnu();
    h.set_size(manifest.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    b.append_data(&mut h, "manifest.json", &manifest[..])
        .unwrap();
    std::fs::write(&archive, b.into_inner().unwrap()).unwrap();
    add(
        "docker-archive missing its files",
        archive.clone(),
        &[&archive.display().to_string(), "cfg.json"],
    );

    // Random bytes named like an archive.
    let garbage = dir.join("garbage.tar");
    std::fs::write(
        &garbage,
        (0..65536u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13).to_le_bytes()[0])
            .collect::<Vec<_>>(),
    )
    .unwrap();
    add(
        "garbage file",
        garbage.clone(),
        &[
            &garbage.display().to_string(),
            "is not a usable OCI image layout",
        ],
    );

    // A tar cut in the middle (an interrupted download of an oci-archive).
    let cut = dir.join("cut.tar");
    let full = Command::new("tar")
        .arg("-C")
        .arg(busybox_layout())
        .args(["-cf", "-", "."])
        .output()
        .unwrap()
        .stdout;
    std::fs::write(&cut, &full[..full.len() / 3]).unwrap();
    add(
        "oci-archive cut short",
        cut.clone(),
        &[&cut.display().to_string()],
    );

    let empty = dir.join("empty-dir");
    std::fs::create_dir(&empty).unwrap();
    add(
        "empty directory",
        empty.clone(),
        &[
            &empty.display().to_string(),
            "is not a usable OCI image layout",
        ],
    );

    let missing = dir.join("no-such-image");
    add(
        "path that does not exist",
        missing.clone(),
        &[&missing.display().to_string()],
    );

    cases
}

#[test]
fn bad_images_are_refused_by_name_and_leave_the_store_as_it_was() {
    require_root();
    let d = TestDaemon::start();
    let healthy = Healthy::start(&d);
    let blobs_before = blob_names(&d.root);
    let tmp = tempfile::tempdir().unwrap();
    let mut outcomes = Vec::new();
    let mut wrong = Vec::new();
    for case in cases(tmp.path()) {
        let out = d.cli(&["load", case.path.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if out.status.success() {
            wrong.push(format!(
                "{}: loaded: {}",
                case.kind,
                String::from_utf8_lossy(&out.stdout)
            ));
        }
        for fragment in &case.expect {
            if !err.contains(fragment.as_str()) {
                wrong.push(format!("{}: no {fragment:?} in {err:?}", case.kind));
            }
        }
        outcomes.push(Outcome {
            kind: case.kind,
            message: err.chars().take(220).collect(),
        });
    }
    print_outcomes("bad images", &outcomes);
    assert!(
        wrong.is_empty(),
        "unclear or missing refusals:\n{}",
        wrong.join("\n")
    );
    // Blobs stored for a refused image are unreferenced: GC may take them, but no blob
    // the healthy image uses is touched.
    let blobs_after = blob_names(&d.root);
    for b in &blobs_before {
        assert!(
            blobs_after.contains(b),
            "blob {b} of the stored image is gone"
        );
    }
    healthy.assert_undisturbed(&d, &["localhost/busybox:latest"]);
}

/// The stored blobs' file names.
fn blob_names(root: &Path) -> Vec<String> {
    std::fs::read_dir(root.join("images/blobs/sha256"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// An image of 120 layers (more than a page of overlay `lowerdir=` options with
/// podhost's snapshot paths): it loads, and a pod runs from it or is refused clearly.
#[test]
fn an_image_of_120_layers_runs() {
    require_root();
    let d = TestDaemon::start();
    let healthy = Healthy::start(&d);
    let tmp = tempfile::tempdir().unwrap();
    let l = image_variant(&tmp.path().join("many"), "localhost/many:layers", json!({}));
    for i in 0..120 {
        append_layer(&l, &small_layer(&format!("layer-{i:03}")));
    }
    d.load(&l);
    d.write_manifest(
        "many.yaml",
        &busybox_pod(
            "many",
            "  restartPolicy: Never\n",
            "",
            "ls / | grep -c '^layer-'",
        )
        .replace("localhost/busybox:latest", "localhost/many:layers"),
    );
    let pod = d.wait_pod("many", "120-layer pod finished", 60, |p| {
        let cs = container_status(p, "main")?;
        cs["state"]["terminated"].is_object().then(|| p.clone())
    });
    let cs = container_status(&pod, "main").unwrap();
    assert_eq!(
        cs["state"]["terminated"]["exitCode"],
        0,
        "{cs:#}\n{}",
        d.daemon_log()
    );
    assert_eq!(d.logs_of("many", "main").trim(), "120");
    d.remove_manifest("many.yaml");
    d.wait_gone("many", 30);
    healthy.assert_undisturbed(&d, &["localhost/busybox:latest", "localhost/many:layers"]);
}
