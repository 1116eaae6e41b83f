//! `podhost load` of docker-archives (`docker save`, `skopeo copy ...
//! docker-archive:`): references from RepoTags (or `repositories`), blobs
//! content-addressed, a synthesized manifest that resolves like any other image.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use podhost::image::{ImageError, ImageStore};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tar::{EntryType, Header};

fn sha(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(data)))
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(data).unwrap();
    gz.finish().unwrap()
}

/// A tar of `(path, content)` regular files and `(path, None)` directories.
fn tar_of(files: &[(&str, Option<&[u8]>)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (path, data) in files {
        let mut h = Header::new_gnu();
        h.set_path(path).unwrap();
        match data {
            Some(d) => {
                h.set_entry_type(EntryType::Regular);
                h.set_size(d.len() as u64);
                h.set_mode(0o644);
            }
            None => {
                h.set_entry_type(EntryType::Directory);
                h.set_size(0);
                h.set_mode(0o755);
            }
        }
        h.set_cksum();
        b.append(&h, data.unwrap_or_default()).unwrap();
    }
    b.into_inner().unwrap()
}

/// Builds docker-save archives member by member.
struct Archive(tar::Builder<Vec<u8>>);

impl Archive {
    fn new() -> Archive {
        Archive(tar::Builder::new(Vec::new()))
    }
    fn file(&mut self, path: &str, data: &[u8]) -> &mut Self {
        let mut h = Header::new_gnu();
        h.set_path(path).unwrap();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        self.0.append(&h, data).unwrap();
        self
    }
    fn symlink(&mut self, path: &str, target: &str) -> &mut Self {
        let mut h = Header::new_gnu();
        h.set_entry_type(EntryType::Symlink);
        h.set_size(0);
        self.0.append_link(&mut h, path, target).unwrap();
        self
    }
    /// A v1 layer dir as `docker save` writes it.
    fn layer(&mut self, id: &str, tar: &[u8]) -> &mut Self {
        self.file(&format!("{id}/VERSION"), b"1.0")
            .file(
                &format!("{id}/json"),
                format!("{{\"id\":\"{id}\"}}").as_bytes(),
            )
            .file(&format!("{id}/layer.tar"), tar)
    }
    /// A config of these (uncompressed) layer tars; returns its member name.
    fn config(&mut self, arch: &str, cmd: &str, layers: &[&[u8]]) -> String {
        let diff_ids: Vec<String> = layers.iter().map(|l| sha(l)).collect();
        let config = json!({"architecture": arch, "os": "linux",
            "config": {"Cmd": [cmd], "Env": ["PATH=/bin"]},
            "container_config": {"Hostname": "x"}, "docker_version": "24.0.5",
            "rootfs": {"type": "layers", "diff_ids": diff_ids}});
        let data = config.to_string();
        let name = format!("{}.json", &sha(data.as_bytes())[7..]);
        self.file(&name, data.as_bytes());
        name
    }
    /// Adds manifest.json last (as docker save does) and returns the tar.
    fn into_tar(mut self, manifest: Value) -> Vec<u8> {
        self.file("manifest.json", manifest.to_string().as_bytes());
        self.0.into_inner().unwrap()
    }
    fn finish(self, dir: &Path, manifest: Value, gz: bool) -> PathBuf {
        let data = self.into_tar(manifest);
        let path = dir.join(if gz { "image.tar.gz" } else { "image.tar" });
        fs::write(&path, if gz { gzip(&data) } else { data }).unwrap();
        path
    }
}

fn id(n: u8) -> String {
    format!("{n:x}").repeat(64)
}

#[test]
fn docker_save_archive_loads_and_resolves() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tar_of(&[
        ("bin/", None),
        ("bin/sh", Some(b"#!sh")),
        ("etc/", None),
        ("etc/gone", Some(b"gone")),
    ]);
    let top = tar_of(&[("etc/.wh.gone", Some(b"")), ("etc/new", Some(b"new"))]);
    let other_top = tar_of(&[("srv/", None), ("srv/app", Some(b"app"))]);
    let (l1, l2, l3) = (id(1), id(2), id(3));
    let mut a = Archive::new();
    a.layer(&l1, &base).layer(&l2, &top);
    // docker save writes a layer shared by two images once; the second image's
    // directory links to it.
    a.file(&format!("{l3}/VERSION"), b"1.0")
        .symlink(&format!("{l3}/layer.tar"), &format!("../{l1}/layer.tar"));
    let app_layer = "f00d.tar";
    a.file(app_layer, &other_top);
    let c1 = a.config("amd64", "sh", &[&base, &top]);
    let c2 = a.config("amd64", "app", &[&base, &other_top]);
    a.file(
        "repositories",
        json!({"old": {"v0": l2}}).to_string().as_bytes(),
    );
    let manifest = json!([
        {"Config": c1, "RepoTags": ["busybox:1", "example.com/team/tool:2"],
         "Layers": [format!("{l1}/layer.tar"), format!("{l2}/layer.tar")]},
        {"Config": c2, "RepoTags": ["localhost/app:3"],
         "Layers": [format!("{l3}/layer.tar"), app_layer]},
        {"Config": c1, "RepoTags": null,
         "Layers": [format!("{l1}/layer.tar"), format!("{l2}/layer.tar")]},
    ]);
    let data = a.into_tar(manifest);
    for gz in [false, true] {
        let dir = tmp.path().join(format!("gz{gz}"));
        fs::create_dir(&dir).unwrap();
        let path = dir.join("image.tar");
        fs::write(&path, if gz { gzip(&data) } else { data.clone() }).unwrap();
        let root = dir.join("root");
        let store = ImageStore::open(&root).unwrap();
        let refs = store.load(&path).unwrap();
        assert_eq!(
            refs,
            [
                "docker.io/library/busybox:1",
                "docker.io/library/old:v0",
                "example.com/team/tool:2",
                "localhost/app:3"
            ]
        );
        let img = store.resolve("busybox:1").unwrap();
        assert_eq!(img.layers.len(), 2);
        assert_eq!(fs::read(img.layers[0].join("bin/sh")).unwrap(), b"#!sh");
        assert_eq!(fs::read(img.layers[1].join("etc/new")).unwrap(), b"new");
        let cfg = img.config.config().as_ref().unwrap();
        assert_eq!(cfg.cmd().as_deref(), Some(&["sh".to_string()][..]));
        // Same manifest under every name of the image, and for the repositories name.
        for r in ["example.com/team/tool:2", "old:v0"] {
            assert_eq!(
                store.resolve(r).unwrap().manifest_digest,
                img.manifest_digest
            );
        }
        let app = store.resolve("localhost/app:3").unwrap();
        assert_eq!(
            app.layers[0], img.layers[0],
            "the shared layer is one snapshot"
        );
        assert_eq!(fs::read(app.layers[1].join("srv/app")).unwrap(), b"app");
        // Uncompressed layers are stored as they are: their digest is the diff_id.
        let manifest: Value = serde_json::from_slice(
            &fs::read(
                root.join("images/blobs/sha256")
                    .join(&img.manifest_digest[7..]),
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(manifest["layers"][0]["digest"], sha(&base));
        assert_eq!(
            manifest["layers"][0]["mediaType"],
            "application/vnd.oci.image.layer.v1.tar"
        );
        assert_eq!(
            manifest["config"]["digest"],
            format!("sha256:{}", &c1[..64])
        );
        // Loading again gives the same digests and nothing new.
        let blobs = fs::read_dir(root.join("images/blobs/sha256"))
            .unwrap()
            .count();
        assert_eq!(store.load(&path).unwrap().len(), 4);
        assert_eq!(
            store.resolve("busybox:1").unwrap().manifest_digest,
            img.manifest_digest
        );
        assert_eq!(
            fs::read_dir(root.join("images/blobs/sha256"))
                .unwrap()
                .count(),
            blobs
        );
        assert_eq!(fs::read_dir(root.join("images/tmp")).unwrap().count(), 0);
    }
}

#[test]
fn compressed_layers_wrong_layers_and_other_platforms() {
    let tmp = tempfile::tempdir().unwrap();
    let layer = tar_of(&[("hello", Some(b"hello"))]);

    // A gzipped layer member: stored as is (tar+gzip), checked when unpacked.
    let mut a = Archive::new();
    a.file("l.tar.gz", &gzip(&layer));
    let c = a.config("amd64", "x", &[&layer]);
    let m = json!([{"Config": c, "RepoTags": ["localhost/gz:1"], "Layers": ["l.tar.gz"]}]);
    let path = a.finish(tmp.path(), m, false);
    let store = ImageStore::open(&tmp.path().join("root")).unwrap();
    store.load(&path).unwrap();
    let img = store.resolve("localhost/gz:1").unwrap();
    assert_eq!(fs::read(img.layers[0].join("hello")).unwrap(), b"hello");

    // An uncompressed layer that is not the config's diff_id.
    let mut a = Archive::new();
    a.file("l.tar", &tar_of(&[("other", Some(b"other"))]));
    let c = a.config("amd64", "x", &[&layer]);
    let m = json!([{"Config": c, "RepoTags": ["localhost/bad:1"], "Layers": ["l.tar"]}]);
    let path = a.finish(tmp.path(), m, false);
    let err = store.load(&path).unwrap_err();
    assert!(matches!(err, ImageError::DigestMismatch { .. }), "{err}");
    assert!(err.to_string().contains("l.tar"), "{err}");

    // A layer listed but missing.
    let mut a = Archive::new();
    let c = a.config("amd64", "x", &[&layer]);
    let m = json!([{"Config": c, "RepoTags": ["localhost/bad:1"], "Layers": ["gone/layer.tar"]}]);
    let path = a.finish(tmp.path(), m, false);
    let err = store.load(&path).unwrap_err();
    assert!(matches!(err, ImageError::NotALayout { .. }), "{err}");
    assert!(err.to_string().contains("gone/layer.tar"), "{err}");

    // Built for another architecture.
    let mut a = Archive::new();
    a.file("l.tar", &layer);
    let c = a.config("riscv64", "x", &[&layer]);
    let m = json!([{"Config": c, "RepoTags": ["localhost/riscv:1"], "Layers": ["l.tar"]}]);
    let path = a.finish(tmp.path(), m, false);
    let err = store.load(&path).unwrap_err();
    assert!(
        matches!(err, ImageError::NoMatchingPlatform { .. }),
        "{err}"
    );
    for r in ["localhost/bad:1", "localhost/riscv:1"] {
        assert!(matches!(
            store.resolve(r).unwrap_err(),
            ImageError::NotFound { .. }
        ));
    }
}

/// Runs oci/busybox/build.sh OUT; fails the test when it cannot.
fn build_busybox(out: &Path) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("oci/busybox/build.sh");
    let output = Command::new("bash")
        .arg(&script)
        .arg(out)
        .output()
        .expect("run oci/busybox/build.sh");
    assert!(
        output.status.success(),
        "oci/busybox/build.sh failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn skopeo_docker_archive_of_busybox_loads_like_the_oci_layout() {
    assert!(
        Command::new("skopeo").arg("--version").output().is_ok(),
        "skopeo is not installed: run scripts/install-deps.sh --test (apt-get install skopeo)"
    );
    let tmp = tempfile::tempdir().unwrap();
    let layout = tmp.path().join("layout");
    build_busybox(&layout);
    let archive = tmp.path().join("busybox-docker.tar");
    let out = Command::new("skopeo")
        .arg("copy")
        .arg(format!("oci:{}:localhost/busybox:latest", layout.display()))
        .arg(format!(
            "docker-archive:{}:localhost/busybox:latest",
            archive.display()
        ))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "skopeo: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The CLI, offline (no daemon on that socket): loads straight into the root.
    let root = tmp.path().join("root");
    let out = Command::new(env!("CARGO_BIN_EXE_podhost"))
        .args([
            "load",
            "--socket",
            "/nonexistent/podhost.sock",
            "--root-dir",
        ])
        .arg(&root)
        .arg(&archive)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("localhost/busybox:latest"), "{stdout}");

    let store = ImageStore::open(&root).unwrap();
    let img = store.resolve("localhost/busybox").unwrap();
    assert_eq!(img.layers.len(), 1);
    assert!(
        fs::metadata(img.layers[0].join("bin/busybox"))
            .unwrap()
            .len()
            > 100_000
    );
    assert!(
        fs::symlink_metadata(img.layers[0].join("bin/sh"))
            .unwrap()
            .is_symlink()
    );
    let cfg = img.config.config().as_ref().unwrap();
    assert_eq!(cfg.cmd().as_deref(), Some(&["sh".to_string()][..]));

    // The OCI layout of the same image has the same config and layer: loading
    // it too shares the snapshot.
    store.load(&layout).unwrap();
    let from_oci = store.resolve("localhost/busybox").unwrap();
    assert_eq!(from_oci.layers, img.layers);
    assert_eq!(fs::read_dir(root.join("snapshots")).unwrap().count(), 1);
}
