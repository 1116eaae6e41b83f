//! A layer that fails half-way — a truncated gzip stream, a full disk, a
//! `podhost load` killed with SIGKILL — leaves no image and no snapshot visible,
//! and the next `ImageStore::open` removes the temp files.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use podhost::image::{ImageError, ImageStore};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::corpus::{self, E};
use super::is_root;

fn sha(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(data)))
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(data).unwrap();
    gz.finish().unwrap()
}

/// Writes a one-image OCI layout at `dir`: `layer` is the blob as stored,
/// `diff_id` the digest of its uncompressed tar.
fn layout(dir: &Path, name: &str, layer: &[u8], diff_id: &str) -> PathBuf {
    let blobs = dir.join("blobs/sha256");
    fs::create_dir_all(&blobs).unwrap();
    let put = |data: &[u8], media_type: &str| {
        let d = sha(data);
        fs::write(blobs.join(&d[7..]), data).unwrap();
        json!({"mediaType": media_type, "digest": d, "size": data.len()})
    };
    let layer_desc = put(layer, "application/vnd.oci.image.layer.v1.tar+gzip");
    let config = json!({"architecture": "amd64", "os": "linux", "config": {},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]}});
    let config_desc = put(
        config.to_string().as_bytes(),
        "application/vnd.oci.image.config.v1+json",
    );
    let manifest = json!({"schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": config_desc, "layers": [layer_desc]});
    let mut m = put(
        manifest.to_string().as_bytes(),
        "application/vnd.oci.image.manifest.v1+json",
    );
    m["annotations"] = json!({"org.opencontainers.image.ref.name": name});
    fs::write(dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    let index = json!({"schemaVersion": 2, "manifests": [m]});
    fs::write(dir.join("index.json"), index.to_string()).unwrap();
    dir.to_path_buf()
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// No snapshot (finished or temp), no temp blob, and `reference` unknown.
/// (Opening the store first, as the next start would.)
fn assert_nothing_visible(root: &Path, reference: &str) {
    let store = ImageStore::open(root).unwrap();
    assert_eq!(names(&root.join("snapshots")), Vec::<String>::new());
    assert_eq!(names(&root.join("images/tmp")), Vec::<String>::new());
    let err = store.resolve(reference).unwrap_err();
    assert!(matches!(err, ImageError::NotFound { .. }), "{err}");
}

/// A tar of `n` small files in a few directories.
fn many_files(n: usize) -> Vec<u8> {
    let entries: Vec<E> = (0..n)
        .map(|i| {
            E::file(
                &format!("d{}/f{i}", i % 50),
                format!("content {i}").as_bytes(),
            )
        })
        .collect();
    corpus::tar(&entries)
}

#[test]
fn truncated_gzip_layer_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let tar = many_files(2000);
    let gz = gzip(&tar);
    // The blob is what the manifest says (its digest matches), but the gzip
    // stream stops half-way: unpack fails after writing part of the layer.
    let cut = &gz[..gz.len() / 2];
    let src = layout(
        &tmp.path().join("layout"),
        "localhost/cut:1",
        cut,
        &sha(&tar),
    );
    let root = tmp.path().join("root");
    let store = ImageStore::open(&root).unwrap();
    let err = store.load(&src).unwrap_err();
    assert!(matches!(err, ImageError::Unpack { .. }), "{err}");
    let msg = err.to_string();
    // Where it broke: inside an entry ("cannot unpack \"d2/f1002\": incomplete
    // deflate stream") or between two ("(after \"d2/f1002\")").
    assert!(
        msg.contains("\"d") && (msg.contains("after") || msg.contains("deflate")),
        "{msg}"
    );
    assert_nothing_visible(&root, "localhost/cut:1");

    // The store still works: the whole layer loads.
    let good = layout(&tmp.path().join("good"), "localhost/cut:1", &gz, &sha(&tar));
    store.load(&good).unwrap();
    let img = store.resolve("localhost/cut:1").unwrap();
    assert_eq!(
        fs::read(img.layers[0].join("d7/f1007")).unwrap(),
        b"content 1007"
    );
}

/// Unmounts on drop.
struct Mount(PathBuf);
impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn full_disk_mid_layer_leaves_nothing() {
    assert!(
        is_root(),
        "this test needs root to mount a small tmpfs: run it as root"
    );
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    fs::create_dir(&root).unwrap();
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=8m", "tmpfs"])
        .arg(&root)
        .status()
        .unwrap();
    assert!(st.success(), "mount tmpfs");
    let _guard = Mount(root.clone());
    // 32 MiB of zeros gzip to a few KiB: the blob fits, the snapshot does not.
    let zeros = vec![0u8; 32 << 20];
    let tar = corpus::tar(&[E::file("small", b"small"), E::file("big", &zeros)]);
    let gz = gzip(&tar);
    let src = layout(
        &tmp.path().join("layout"),
        "localhost/full:1",
        &gz,
        &sha(&tar),
    );
    let store = ImageStore::open(&root).unwrap();
    let err = store.load(&src).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("big") && msg.contains("No space left"),
        "{msg}"
    );
    assert_nothing_visible(&root, "localhost/full:1");
}

#[test]
fn killed_load_leaves_nothing_and_next_open_cleans_up() {
    let tmp = tempfile::tempdir().unwrap();
    let tar = many_files(60_000);
    let gz = gzip(&tar);
    let src = layout(
        &tmp.path().join("layout"),
        "localhost/killed:1",
        &gz,
        &sha(&tar),
    );
    let root = tmp.path().join("root");
    let mut child = Command::new(env!("CARGO_BIN_EXE_podhost"))
        .args([
            "load",
            "--socket",
            "/nonexistent/podhost.sock",
            "--root-dir",
        ])
        .arg(&root)
        .arg(&src)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until it is half-way through the snapshot, then SIGKILL it.
    let snapshots = root.join("snapshots");
    let deadline = Instant::now() + Duration::from_secs(60);
    let tmp_snapshot = loop {
        let found = names(&snapshots)
            .into_iter()
            .find(|n| n.starts_with("tmp-"));
        if let Some(t) = found.map(|n| snapshots.join(n))
            && names(&t).len() >= 10
        {
            break t;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "load finished before it could be killed"
        );
        assert!(Instant::now() < deadline, "no snapshot temp dir appeared");
        std::thread::sleep(Duration::from_millis(2));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    // What the crash left is only a temp dir, never a snapshot or a reference.
    assert!(tmp_snapshot.is_dir());
    let visible: Vec<String> = names(&snapshots)
        .into_iter()
        .filter(|n| !n.starts_with("tmp-"))
        .collect();
    assert!(visible.is_empty(), "{visible:?}");
    // The next start removes the leftovers of the dead writer.
    assert_nothing_visible(&root, "localhost/killed:1");
    assert!(!tmp_snapshot.exists());
}
