//! A small mounted filesystem for the store, and synthetic OCI image layouts.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use nix::mount::{MntFlags, MsFlags, mount, umount2};
use podhost::image::{FsUsage, ImageError};
use serde_json::json;
use sha2::{Digest, Sha256};

/// A mounted filesystem of a few MiB, unmounted (and its loop file removed) on drop,
/// even when the test fails.
pub struct SmallFs {
    _dir: tempfile::TempDir,
    pub mnt: PathBuf,
}

impl SmallFs {
    pub fn tmpfs(mib: u64) -> SmallFs {
        let dir = tempfile::tempdir().unwrap();
        let mnt = dir.path().join("mnt");
        fs::create_dir(&mnt).unwrap();
        let opts = format!("size={}m,mode=0755", mib);
        mount(
            Some("tmpfs"),
            &mnt,
            Some("tmpfs"),
            MsFlags::empty(),
            Some(opts.as_str()),
        )
        .expect("mount tmpfs");
        SmallFs { _dir: dir, mnt }
    }

    /// A loop-mounted ext4 file (no reserved blocks); `None` if the host cannot.
    pub fn ext4(mib: u64) -> Option<SmallFs> {
        if Command::new("mkfs.ext4").arg("-V").output().is_err() {
            let _ = Command::new("apt-get")
                .args(["install", "-y", "e2fsprogs"])
                .env("DEBIAN_FRONTEND", "noninteractive")
                .output();
        }
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("fs.img");
        let mnt = dir.path().join("mnt");
        fs::create_dir(&mnt).unwrap();
        fs::File::create(&img).unwrap().set_len(mib << 20).unwrap();
        let ok = |c: &mut Command| c.output().map(|o| o.status.success()).unwrap_or(false);
        if !ok(Command::new("mkfs.ext4")
            .args(["-q", "-F", "-m", "0"])
            .arg(&img))
        {
            eprintln!("mkfs.ext4 unavailable");
            return None;
        }
        if !ok(Command::new("mount")
            .args(["-o", "loop"])
            .arg(&img)
            .arg(&mnt))
        {
            eprintln!("loop mount unavailable");
            return None;
        }
        Some(SmallFs { _dir: dir, mnt })
    }

    pub fn usage(&self) -> FsUsage {
        let f = fs::File::open(&self.mnt).unwrap();
        nix::unistd::syncfs(&f).unwrap();
        FsUsage::of(&self.mnt).unwrap()
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        // A plain unmount first (releases the loop device), lazily if busy.
        if umount2(&self.mnt, MntFlags::empty()).is_err() {
            let _ = umount2(&self.mnt, MntFlags::MNT_DETACH);
        }
    }
}

fn sha(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(data)))
}

/// Deterministic incompressible bytes.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// A gzipped layer tar holding `files`; returns (blob, diff_id).
fn layer(files: &[(&str, &[u8])]) -> (Vec<u8>, String) {
    let mut tar = tar::Builder::new(Vec::new());
    for (name, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(0);
        h.set_uid(0);
        h.set_gid(0);
        h.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut h, name, *data).unwrap();
    }
    let raw = tar.into_inner().unwrap();
    let diff_id = sha(&raw);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&raw).unwrap();
    (gz.finish().unwrap(), diff_id)
}

pub struct Built {
    pub reference: String,
    pub manifest: String,
    pub top_blob: String,
    pub base_blob: String,
    /// Chain id of the top layer (its snapshot).
    pub top_chain: String,
}

fn arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// Writes an OCI layout at `dir` with one image `reference`: a small shared base layer
/// and a top layer with `size` bytes of noise from `seed`.
pub fn build_image(dir: &Path, reference: &str, seed: u64, size: usize) -> Built {
    let blobs = dir.join("blobs/sha256");
    fs::create_dir_all(&blobs).unwrap();
    let put = |data: &[u8]| -> (String, u64) {
        let d = sha(data);
        fs::write(blobs.join(d.strip_prefix("sha256:").unwrap()), data).unwrap();
        (d, data.len() as u64)
    };
    let (base, base_diff) = layer(&[("base.txt", b"shared base layer\n")]);
    let data = noise(seed, size);
    let (top, top_diff) = layer(&[("data.bin", &data)]);
    let (base_d, base_n) = put(&base);
    let (top_d, top_n) = put(&top);
    let config = serde_json::to_vec(&json!({
        "architecture": arch(), "os": "linux",
        "config": {"Cmd": ["/bin/sh"]},
        "rootfs": {"type": "layers", "diff_ids": [base_diff, top_diff]},
    }))
    .unwrap();
    let (config_d, config_n) = put(&config);
    let layer_mt = "application/vnd.oci.image.layer.v1.tar+gzip";
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_d, "size": config_n},
        "layers": [
            {"mediaType": layer_mt, "digest": base_d, "size": base_n},
            {"mediaType": layer_mt, "digest": top_d, "size": top_n},
        ],
    }))
    .unwrap();
    let (manifest_d, manifest_n) = put(&manifest);
    let index = json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": manifest_d, "size": manifest_n,
            "annotations": {"org.opencontainers.image.ref.name": reference},
        }],
    });
    fs::write(dir.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
    fs::write(dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    let top_chain = sha(format!("{base_diff} {top_diff}").as_bytes());
    Built {
        reference: reference.to_string(),
        manifest: manifest_d,
        top_blob: top_d,
        base_blob: base_d,
        top_chain,
    }
}

fn hex_of(d: &str) -> &str {
    d.strip_prefix("sha256:").unwrap()
}

pub fn blob_exists(root: &Path, digest: &str) -> bool {
    root.join("images/blobs/sha256")
        .join(hex_of(digest))
        .exists()
}

pub fn snapshot_exists(root: &Path, chain: &str) -> bool {
    root.join("snapshots").join(hex_of(chain)).exists()
}

pub fn is_not_found(r: Result<podhost::image::ResolvedImage, ImageError>) -> bool {
    matches!(r, Err(ImageError::NotFound { .. }))
}

pub fn no_temps_left(root: &Path) {
    let snaps: Vec<String> = fs::read_dir(root.join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(snaps.iter().all(|n| !n.starts_with("tmp-")), "{snaps:?}");
    assert_eq!(fs::read_dir(root.join("images/tmp")).unwrap().count(), 0);
}
