//! Root integration tests of the image store: the reproducible busybox image from
//! oci/busybox/build.sh, oci-archives, multi-layer whiteouts checked through a real
//! overlay mount, image indexes, and hostile layers.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use podhost::image::{ImageError, ImageStore, chain_ids};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tar::{EntryType, Header};

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

macro_rules! require_root {
    () => {
        assert!(
            is_root(),
            "this test needs root (mknod, chown, trusted xattrs, mount): run it as root"
        );
    };
}

fn sha(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(data)))
}

/// Runs oci/busybox/build.sh OUT and returns the digest it prints.
fn build_busybox(out: &Path) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("oci/busybox/build.sh");
    let output = Command::new("bash")
        .arg(&script)
        .arg(out)
        .output()
        .expect("run build.sh");
    assert!(
        output.status.success(),
        "build.sh failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    let digest = stdout.lines().last().unwrap_or_default().trim().to_string();
    assert!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "{stdout}"
    );
    digest
}

fn count(dir: &Path) -> usize {
    fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
}

/// No temp leftovers, `n` snapshots.
fn assert_clean(root: &Path, snapshots: usize) {
    assert_eq!(
        count(&root.join("images/tmp")),
        0,
        "temps left in images/tmp"
    );
    let names: Vec<String> = fs::read_dir(root.join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.starts_with("tmp-")), "{names:?}");
    assert_eq!(names.len(), snapshots, "{names:?}");
}

#[test]
fn busybox_builds_reproducibly_loads_and_resolves() {
    require_root!();
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let digest = build_busybox(&a);
    assert_eq!(
        build_busybox(&b),
        digest,
        "two builds gave different digests"
    );
    assert_eq!(
        fs::read(a.join("index.json")).unwrap(),
        fs::read(b.join("index.json")).unwrap()
    );

    let root = tmp.path().join("root");
    let store = ImageStore::open(&root).unwrap();
    assert_eq!(store.load(&a).unwrap(), vec!["localhost/busybox:latest"]);

    let img = store.resolve("localhost/busybox").unwrap();
    assert_eq!(img.reference, "localhost/busybox:latest");
    assert_eq!(img.manifest_digest, digest);
    assert_eq!(img.layers.len(), 1);
    let snap = &img.layers[0];
    let bb = fs::symlink_metadata(snap.join("bin/busybox")).unwrap();
    assert!(bb.is_file() && bb.len() > 100_000);
    assert_eq!(bb.mode() & 0o7777, 0o755);
    assert_eq!((bb.uid(), bb.gid(), bb.mtime()), (0, 0, 0));
    let sh = fs::symlink_metadata(snap.join("bin/sh")).unwrap();
    assert!(sh.file_type().is_symlink());
    // Applet links resolve to busybox inside the snapshot too.
    assert!(fs::metadata(snap.join("usr/bin/env")).unwrap().is_file());
    assert_eq!(
        fs::metadata(snap.join("tmp")).unwrap().mode() & 0o7777,
        0o1777
    );
    let passwd = fs::read_to_string(snap.join("etc/passwd")).unwrap();
    assert!(passwd.starts_with("root:x:0:0:") && passwd.contains(":65534:"));
    let cfg = img.config.config().as_ref().unwrap();
    assert_eq!(cfg.cmd().as_deref(), Some(&["sh".to_string()][..]));
    assert!(cfg.env().as_ref().unwrap()[0].starts_with("PATH=/usr/local/sbin:"));
    assert_eq!(
        snap.file_name().unwrap().to_string_lossy(),
        chain_ids(img.config.rootfs().diff_ids())[0].trim_start_matches("sha256:")
    );

    // By digest, and by name@digest.
    assert_eq!(
        store.resolve(&digest).unwrap().reference,
        "localhost/busybox:latest"
    );
    let pinned = store
        .resolve(&format!("localhost/busybox@{digest}"))
        .unwrap();
    assert_eq!(pinned.manifest_digest, digest);

    // Unknown names fail with a message that says what to do.
    let err = store.resolve("busybox").unwrap_err();
    assert!(matches!(err, ImageError::NotFound { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("docker.io/library/busybox:latest") && msg.contains("podhost load"),
        "{msg}"
    );

    // list + touch, persisted across a reopen.
    let list = store.list().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].digest, digest);
    assert!(list[0].size > 500_000 && list[0].last_used.is_none());
    store.touch("localhost/busybox:latest").unwrap();
    store.touch(&digest).unwrap();
    assert!(matches!(
        store.touch("localhost/other").unwrap_err(),
        ImageError::NotFound { .. }
    ));

    // Loading again is idempotent.
    assert_eq!(store.load(&a).unwrap(), vec!["localhost/busybox:latest"]);
    assert_eq!(count(&root.join("images/blobs/sha256")), 3);
    assert_clean(&root, 1);
    let reopened = ImageStore::open(&root).unwrap();
    let list = reopened.list().unwrap();
    assert!(
        list[0].last_used.is_some(),
        "last_used lost on reload/reopen"
    );

    // oci-archive (plain and gzipped), into a fresh store and into this one.
    let tar_path = tmp.path().join("x.tar");
    let st = Command::new("tar")
        .arg("-C")
        .arg(&a)
        .arg("-cf")
        .arg(&tar_path)
        .arg(".")
        .status()
        .unwrap();
    assert!(st.success());
    let root2 = tmp.path().join("root2");
    let fresh = ImageStore::open(&root2).unwrap();
    assert_eq!(
        fresh.load(&tar_path).unwrap(),
        vec!["localhost/busybox:latest"]
    );
    let img2 = fresh.resolve("localhost/busybox:latest").unwrap();
    assert_eq!(img2.manifest_digest, digest);
    assert!(img2.layers[0].join("bin/busybox").is_file());
    assert_clean(&root2, 1);
    assert!(
        Command::new("gzip")
            .arg("-k")
            .arg(&tar_path)
            .status()
            .unwrap()
            .success()
    );
    assert_eq!(
        reopened.load(&tmp.path().join("x.tar.gz")).unwrap(),
        vec!["localhost/busybox:latest"]
    );
    assert_clean(&root, 1);

    // Something that is not a layout.
    let junk = tmp.path().join("junk");
    fs::write(&junk, b"not a tar").unwrap();
    let err = store.load(&junk).unwrap_err();
    assert!(matches!(err, ImageError::NotALayout { .. }), "{err}");
}

// ---- hand-made layouts -------------------------------------------------------------

/// A tar entry for hand-made layers. Paths and link names are written raw, so
/// hostile names ("../x", "/x") can be produced.
struct E<'a> {
    path: &'a str,
    kind: EntryType,
    data: &'a [u8],
    link: &'a str,
    mode: u32,
}

fn file<'a>(path: &'a str, data: &'a [u8]) -> E<'a> {
    E {
        path,
        kind: EntryType::Regular,
        data,
        link: "",
        mode: 0o644,
    }
}
fn dir(path: &str) -> E<'_> {
    E {
        path,
        kind: EntryType::Directory,
        data: b"",
        link: "",
        mode: 0o755,
    }
}
fn link<'a>(path: &'a str, kind: EntryType, target: &'a str) -> E<'a> {
    E {
        path,
        kind,
        data: b"",
        link: target,
        mode: 0o777,
    }
}

fn layer_tar(entries: &[E]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for e in entries {
        let mut h = Header::new_gnu();
        let g = h.as_gnu_mut().unwrap();
        g.name[..e.path.len()].copy_from_slice(e.path.as_bytes());
        g.linkname[..e.link.len()].copy_from_slice(e.link.as_bytes());
        h.set_entry_type(e.kind);
        h.set_size(e.data.len() as u64);
        h.set_mode(e.mode);
        h.set_uid(1000);
        h.set_gid(1000);
        h.set_mtime(1_000_000);
        h.set_cksum();
        b.append(&h, e.data).unwrap();
    }
    b.into_inner().unwrap()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(data).unwrap();
    gz.finish().unwrap()
}

/// Writes OCI layouts by hand.
struct Layout {
    dir: PathBuf,
    index: Vec<Value>,
}

impl Layout {
    fn new(dir: PathBuf) -> Layout {
        fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
        fs::write(dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
        Layout {
            dir,
            index: Vec::new(),
        }
    }

    fn blob(&self, media_type: &str, data: &[u8]) -> Value {
        let d = sha(data);
        fs::write(self.dir.join("blobs/sha256").join(&d[7..]), data).unwrap();
        json!({"mediaType": media_type, "digest": d, "size": data.len()})
    }

    /// An image manifest of these layers (gzipped when `gz`), returns its descriptor.
    fn image(&self, layers: &[(Vec<u8>, bool)]) -> Value {
        let diff_ids: Vec<String> = layers.iter().map(|(t, _)| sha(t)).collect();
        let layer_descs: Vec<Value> = layers
            .iter()
            .map(|(t, gz)| match gz {
                true => self.blob("application/vnd.oci.image.layer.v1.tar+gzip", &gzip(t)),
                false => self.blob("application/vnd.oci.image.layer.v1.tar", t),
            })
            .collect();
        let config = json!({"architecture": "amd64", "os": "linux",
            "config": {"Cmd": ["/bin/true"]},
            "rootfs": {"type": "layers", "diff_ids": diff_ids}});
        let config = self.blob(
            "application/vnd.oci.image.config.v1+json",
            config.to_string().as_bytes(),
        );
        let manifest = json!({"schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": config, "layers": layer_descs});
        self.blob(
            "application/vnd.oci.image.manifest.v1+json",
            manifest.to_string().as_bytes(),
        )
    }

    fn add(&mut self, mut desc: Value, annotations: Value) -> &mut Self {
        desc["annotations"] = annotations;
        self.index.push(desc);
        self
    }

    fn write(&self) -> &Path {
        let index = json!({"schemaVersion": 2, "manifests": self.index});
        fs::write(self.dir.join("index.json"), index.to_string()).unwrap();
        &self.dir
    }
}

fn named(name: &str) -> Value {
    json!({"org.opencontainers.image.ref.name": name})
}

/// Unmounts on drop.
struct Mount(PathBuf);

impl Mount {
    /// A read-only overlay of `upper` over `lower` at `mnt` (created).
    fn overlay(mnt: &Path, upper: &Path, lower: &Path) -> Mount {
        fs::create_dir(mnt).unwrap();
        let opts = format!("lowerdir={}:{}", upper.display(), lower.display());
        let st = Command::new("mount")
            .args(["-t", "overlay", "overlay", "-o", &opts])
            .arg(mnt)
            .status()
            .unwrap();
        assert!(st.success(), "overlay mount failed");
        Mount(mnt.to_path_buf())
    }
}
impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn whiteouts_and_opaque_dirs_stack_in_overlay() {
    require_root!();
    let tmp = tempfile::tempdir().unwrap();
    let lower = layer_tar(&[
        dir("etc/"),
        file("etc/keep", b"keep"),
        file("etc/gone", b"gone"),
        link("etc/hard", EntryType::Link, "etc/keep"),
        link("etc/sym", EntryType::Symlink, "/etc/keep"),
        dir("opq/"),
        file("opq/old", b"old"),
    ]);
    let upper = layer_tar(&[
        file("etc/.wh.gone", b""),
        file("opq/.wh..wh..opq", b""),
        file("opq/new", b"new"),
        file("top", b"top"),
    ]);
    let mut layout = Layout::new(tmp.path().join("layout"));
    let desc = layout.image(&[(lower.clone(), true), (upper.clone(), false)]);
    let src = layout
        .add(desc, named("localhost/two:v1"))
        .write()
        .to_path_buf();

    let root = tmp.path().join("root");
    let store = ImageStore::open(&root).unwrap();
    assert_eq!(store.load(&src).unwrap(), vec!["localhost/two:v1"]);
    let img = store.resolve("localhost/two:v1").unwrap();
    assert_eq!(img.layers.len(), 2);
    let chains = chain_ids(&[sha(&lower), sha(&upper)]);
    for (layer, chain) in img.layers.iter().zip(&chains) {
        assert_eq!(layer, &root.join("snapshots").join(&chain[7..]));
    }
    let (lo, up) = (&img.layers[0], &img.layers[1]);

    // Lower: content, ownership, mtime, hardlink, symlink kept as written.
    assert_eq!(fs::read(lo.join("etc/gone")).unwrap(), b"gone");
    let keep = fs::metadata(lo.join("etc/keep")).unwrap();
    assert_eq!(
        (keep.uid(), keep.gid(), keep.mtime()),
        (1000, 1000, 1_000_000)
    );
    assert_eq!(keep.permissions().mode() & 0o7777, 0o644);
    assert_eq!(fs::metadata(lo.join("etc/hard")).unwrap().ino(), keep.ino());
    assert_eq!(
        fs::read_link(lo.join("etc/sym")).unwrap(),
        Path::new("/etc/keep")
    );
    assert_eq!(fs::metadata(lo.join("etc")).unwrap().mtime(), 1_000_000);

    // Upper: a whiteout is a char device 0:0, an opaque dir has the xattr, and
    // the lower content is not copied.
    let wh = fs::symlink_metadata(up.join("etc/gone")).unwrap();
    assert!(wh.file_type().is_char_device(), "{wh:?}");
    assert_eq!(wh.rdev(), 0);
    assert!(!up.join("etc/.wh.gone").exists());
    assert!(!up.join("etc/keep").exists());
    assert_eq!(
        xattr::get(up.join("opq"), "trusted.overlay.opaque").unwrap(),
        Some(b"y".to_vec())
    );
    assert!(!up.join("opq/.wh..wh..opq").exists());
    assert!(
        xattr::get(lo.join("opq"), "trusted.overlay.opaque")
            .unwrap()
            .is_none()
    );

    // The real test: overlayfs sees the stack the way the image means it.
    let guard = Mount::overlay(&tmp.path().join("mnt"), up, lo);
    let mnt = guard.0.clone();
    assert!(mnt.join("etc/keep").is_file());
    assert!(
        !mnt.join("etc/gone").exists(),
        "whiteout did not hide etc/gone"
    );
    assert!(
        !mnt.join("opq/old").exists(),
        "opaque dir did not hide opq/old"
    );
    assert_eq!(fs::read(mnt.join("opq/new")).unwrap(), b"new");
    assert_eq!(fs::read(mnt.join("top")).unwrap(), b"top");
}

#[test]
fn a_layer_writing_through_a_lower_symlink_keeps_the_symlink() {
    require_root!();
    let tmp = tempfile::tempdir().unwrap();
    // A merged-/usr base, then a layer made by hand that writes lib/b and
    // srv/data/f without listing lib/ or srv/data/.
    let lower = layer_tar(&[
        dir("usr/"),
        dir("usr/lib/"),
        file("usr/lib/a", b"a"),
        link("lib", EntryType::Symlink, "usr/lib"),
        dir("srv/"),
        E {
            mode: 0o700,
            ..dir("srv/data/")
        },
    ]);
    let upper = layer_tar(&[file("lib/b", b"b"), file("srv/data/f", b"f")]);
    let mut layout = Layout::new(tmp.path().join("layout"));
    let desc = layout.image(&[(lower, true), (upper, true)]);
    let src = layout
        .add(desc, named("localhost/usrmerge:v1"))
        .write()
        .to_path_buf();
    let root = tmp.path().join("root");
    let store = ImageStore::open(&root).unwrap();
    store.load(&src).unwrap();
    let img = store.resolve("localhost/usrmerge:v1").unwrap();
    let (lo, up) = (&img.layers[0], &img.layers[1]);
    assert_eq!(fs::read(up.join("usr/lib/b")).unwrap(), b"b");
    assert!(
        fs::symlink_metadata(up.join("lib")).is_err(),
        "no lib/ hiding the link"
    );
    // srv/data stands for the lower directory: same owner and mode.
    let data = fs::metadata(up.join("srv/data")).unwrap();
    assert_eq!((data.mode() & 0o7777, data.uid()), (0o700, 1000));

    let guard = Mount::overlay(&tmp.path().join("mnt"), up, lo);
    let mnt = guard.0.clone();
    assert!(
        fs::symlink_metadata(mnt.join("lib"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        fs::read(mnt.join("lib/a")).unwrap(),
        b"a",
        "the base's files are still there"
    );
    assert_eq!(fs::read(mnt.join("lib/b")).unwrap(), b"b");
    assert_eq!(fs::read(mnt.join("srv/data/f")).unwrap(), b"f");
}

#[test]
fn image_index_picks_linux_amd64_and_names_are_checked() {
    require_root!();
    let tmp = tempfile::tempdir().unwrap();
    let mut layout = Layout::new(tmp.path().join("layout"));
    let amd = layout.image(&[(layer_tar(&[file("arch", b"amd64")]), true)]);
    let arm = layout.image(&[(layer_tar(&[file("arch", b"arm64")]), true)]);
    let mut amd_p = amd.clone();
    amd_p["platform"] = json!({"os": "linux", "architecture": "amd64"});
    let mut arm_p = arm;
    arm_p["platform"] = json!({"os": "linux", "architecture": "arm64"});
    let index = json!({"schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [arm_p, amd_p]});
    let index_desc = layout.blob(
        "application/vnd.oci.image.index.v1+json",
        index.to_string().as_bytes(),
    );
    // docker save style: ref.name is only a tag, the full name is containerd's.
    let src = layout
        .add(
            index_desc.clone(),
            json!({"org.opencontainers.image.ref.name": "latest",
                   "io.containerd.image.name": "docker.io/library/multi:latest"}),
        )
        .write()
        .to_path_buf();
    let store = ImageStore::open(&tmp.path().join("root")).unwrap();
    assert_eq!(
        store.load(&src).unwrap(),
        vec!["docker.io/library/multi:latest"]
    );
    let img = store.resolve("multi").unwrap();
    if cfg!(target_arch = "x86_64") {
        assert_eq!(img.manifest_digest, amd["digest"].as_str().unwrap());
        assert_eq!(fs::read(img.layers[0].join("arch")).unwrap(), b"amd64");
    }
    // The index digest also resolves.
    let by_index = store
        .resolve(index_desc["digest"].as_str().unwrap())
        .unwrap();
    assert_eq!(by_index.manifest_digest, img.manifest_digest);

    // A tag-only name (umoci, skopeo oci:DIR:latest) names localhost/<dir>:<tag>.
    let mut tagged = Layout::new(tmp.path().join("tagged"));
    let d = tagged.image(&[(layer_tar(&[file("x", b"x")]), false)]);
    let tagged_src = tagged.add(d, named("latest")).write().to_path_buf();
    assert_eq!(
        store.load(&tagged_src).unwrap(),
        vec!["localhost/tagged:latest"]
    );
    // Two of them are ambiguous: refused, both listed.
    let mut two = Layout::new(tmp.path().join("two"));
    let d1 = two.image(&[(layer_tar(&[file("x", b"1")]), false)]);
    let d2 = two.image(&[(layer_tar(&[file("x", b"2")]), false)]);
    let two_src = two
        .add(d1, named("v1"))
        .add(d2, named("v2"))
        .write()
        .to_path_buf();
    let err = store.load(&two_src).unwrap_err();
    assert!(matches!(err, ImageError::AmbiguousNames { .. }), "{err}");
    assert!(
        err.to_string().contains("\"v1\"") && err.to_string().contains("\"v2\""),
        "{err}"
    );
}

/// Loads a one-layer image with these entries; returns (error, tempdir).
fn load_hostile(entries: &[E]) -> (ImageError, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let mut layout = Layout::new(tmp.path().join("layout"));
    let d = layout.image(&[(layer_tar(entries), true)]);
    let src = layout
        .add(d, named("localhost/evil:1"))
        .write()
        .to_path_buf();
    let root = tmp.path().join("root");
    let store = ImageStore::open(&root).unwrap();
    let err = store.load(&src).unwrap_err();
    // Nothing half-done remains, and the reference is not recorded.
    assert_clean(&root, 0);
    assert!(matches!(
        store.resolve("localhost/evil:1").unwrap_err(),
        ImageError::NotFound { .. }
    ));
    (err, tmp)
}

#[test]
fn hostile_layers_are_rejected() {
    require_root!();
    // "../escape" from snapshots/tmp-… would land in snapshots/escape.
    let (err, tmp) = load_hostile(&[file("ok", b"ok"), file("../escape", b"pwned")]);
    assert!(matches!(err, ImageError::UnsafeEntry { .. }), "{err}");
    assert!(err.to_string().contains("../escape"), "{err}");
    assert!(!tmp.path().join("root/snapshots/escape").exists());
    assert!(!tmp.path().join("root/escape").exists());
    assert!(!tmp.path().join("escape").exists());

    let (err, _tmp) = load_hostile(&[file("a/../../../escape", b"pwned")]);
    assert!(matches!(err, ImageError::UnsafeEntry { .. }), "{err}");

    let outside = tempfile::tempdir().unwrap();
    let abs = format!("{}/abs", outside.path().display());
    // An absolute name is relative to the layer root (as containerd reads it): it
    // lands inside the snapshot, never at the host path (checked at the end).
    let abs_tmp = tempfile::tempdir().unwrap();
    let mut layout = Layout::new(abs_tmp.path().join("layout"));
    let d = layout.image(&[(layer_tar(&[file(&abs, b"inside")]), true)]);
    let src = layout
        .add(d, named("localhost/abs:1"))
        .write()
        .to_path_buf();
    let store = ImageStore::open(&abs_tmp.path().join("root")).unwrap();
    store.load(&src).unwrap();
    let img = store.resolve("localhost/abs:1").unwrap();
    let inside = img.layers[0].join(abs.trim_start_matches('/'));
    assert_eq!(fs::read(&inside).unwrap(), b"inside");

    // Writing through a symlink that points outside.
    let target = outside.path().display().to_string();
    let (err, _tmp) = load_hostile(&[
        link("out", EntryType::Symlink, &target),
        file("out/pwned", b"pwned"),
    ]);
    assert!(matches!(err, ImageError::UnsafeEntry { .. }), "{err}");

    // Hardlinks to outside files.
    let secret = outside.path().join("secret");
    fs::write(&secret, b"secret").unwrap();
    let (err, _tmp) = load_hostile(&[link("h", EntryType::Link, "../../../../../../etc/passwd")]);
    assert!(matches!(err, ImageError::UnsafeEntry { .. }), "{err}");
    let (err, _tmp) = load_hostile(&[link("h", EntryType::Link, &secret.display().to_string())]);
    assert!(matches!(err, ImageError::UnsafeEntry { .. }), "{err}");
    // Hardlink through a symlinked parent.
    let (err, _tmp) = load_hostile(&[
        link("out", EntryType::Symlink, &target),
        link("h", EntryType::Link, "out/secret"),
    ]);
    assert!(matches!(err, ImageError::UnsafeEntry { .. }), "{err}");

    assert_eq!(count(outside.path()), 1, "something was written outside");
    assert_eq!(fs::metadata(&secret).unwrap().nlink(), 1);
}

#[test]
fn corrupt_blob_is_rejected() {
    require_root!();
    let tmp = tempfile::tempdir().unwrap();
    let mut layout = Layout::new(tmp.path().join("layout"));
    let d = layout.image(&[(layer_tar(&[file("x", b"x")]), true)]);
    let layer_digest = {
        let m: Value = serde_json::from_slice(
            &fs::read(
                layout
                    .dir
                    .join("blobs/sha256")
                    .join(&d["digest"].as_str().unwrap()[7..]),
            )
            .unwrap(),
        )
        .unwrap();
        m["layers"][0]["digest"].as_str().unwrap().to_string()
    };
    let src = layout.add(d, named("localhost/c:1")).write().to_path_buf();
    let blob = src.join("blobs/sha256").join(&layer_digest[7..]);
    let mut data = fs::read(&blob).unwrap();
    let last = data.len() - 1;
    data[last] ^= 0xff;
    fs::write(&blob, data).unwrap();
    let root = tmp.path().join("root");
    let store = ImageStore::open(&root).unwrap();
    let err = store.load(&src).unwrap_err();
    assert!(matches!(err, ImageError::DigestMismatch { .. }), "{err}");
    assert!(
        !root
            .join("images/blobs/sha256")
            .join(&layer_digest[7..])
            .exists()
    );
    assert_clean(&root, 0);
}

#[test]
fn open_removes_leftovers_of_dead_writers() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    ImageStore::open(root).unwrap();
    // A pid above pid_max (2^22) is never alive.
    let stale_snap = root.join("snapshots/tmp-99999999-0-snapshot");
    fs::create_dir_all(stale_snap.join("bin")).unwrap();
    let stale_blob = root.join("images/tmp/tmp-99999999-1-blob");
    fs::write(&stale_blob, b"half").unwrap();
    ImageStore::open(root).unwrap();
    assert!(!stale_snap.exists() && !stale_blob.exists());
}
