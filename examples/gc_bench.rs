//! Image GC timings over a store of many small images (run by scripts/bench-gc.sh).
//!
//! usage: gc_bench DIR [IMAGES]
//!
//! Writes one OCI layout with IMAGES (default 1000) distinct tiny images sharing a
//! base layer, loads it into a store under DIR, then times:
//! - a pass when nothing needs freeing (statvfs only), and the same with `max_age`
//!   set (reads the index too);
//! - a full pass over every image when usage is over the threshold but every image is
//!   in use (all candidates computed, nothing deleted);
//! - a full pass that deletes every image (usage faked over the threshold).

// Bench/tool code: a failed unwrap/expect is the run failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use chrono::Utc;
use podhost::image::gc::{ImageGcPolicy, image_gc, image_gc_with_usage};
use podhost::image::{FsUsage, ImageStore};
use serde_json::json;
use sha2::{Digest, Sha256};

fn sha(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(data)))
}

fn layer(name: &str, data: &[u8]) -> (Vec<u8>, String) {
    let mut tar = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_mtime(0);
    h.set_uid(0);
    h.set_gid(0);
    h.set_entry_type(tar::EntryType::Regular);
    tar.append_data(&mut h, name, data).expect("tar");
    let raw = tar.into_inner().expect("tar");
    let diff_id = sha(&raw);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&raw).expect("gzip");
    (gz.finish().expect("gzip"), diff_id)
}

fn write_layout(dir: &Path, images: usize) {
    let blobs = dir.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).expect("mkdir");
    let put = |data: &[u8]| -> (String, usize) {
        let d = sha(data);
        std::fs::write(blobs.join(&d[7..]), data).expect("write blob");
        (d, data.len())
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    let lt = "application/vnd.oci.image.layer.v1.tar+gzip";
    let (base, base_diff) = layer("base.txt", b"shared base\n");
    let (base_d, base_n) = put(&base);
    let mut manifests = Vec::new();
    for i in 0..images {
        let (top, top_diff) = layer("id.txt", format!("image {i}\n").as_bytes());
        let (top_d, top_n) = put(&top);
        let config = serde_json::to_vec(&json!({
            "architecture": arch, "os": "linux", "config": {"Cmd": ["/bin/sh"]},
            "rootfs": {"type": "layers", "diff_ids": [base_diff, top_diff]},
        }))
        .expect("json");
        let (config_d, config_n) = put(&config);
        let manifest = serde_json::to_vec(&json!({
            "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_d, "size": config_n},
            "layers": [{"mediaType": lt, "digest": base_d, "size": base_n},
                       {"mediaType": lt, "digest": top_d, "size": top_n}],
        }))
        .expect("json");
        let (m_d, m_n) = put(&manifest);
        manifests.push(json!({
            "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": m_d, "size": m_n,
            "annotations": {"org.opencontainers.image.ref.name": format!("localhost/bench/img{i}:latest")},
        }));
    }
    let index = json!({"schemaVersion": 2, "manifests": manifests});
    std::fs::write(
        dir.join("index.json"),
        serde_json::to_vec(&index).expect("json"),
    )
    .expect("write index");
    std::fs::write(dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#)
        .expect("write oci-layout");
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Runs `f` `runs` times; prints min, median and max in ms.
fn time_many(label: &str, runs: usize, mut f: impl FnMut()) {
    let mut t: Vec<Duration> = (0..runs)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed()
        })
        .collect();
    t.sort();
    println!(
        "{label}: min {:.3} ms, median {:.3} ms, max {:.3} ms ({runs} runs)",
        ms(t[0]),
        ms(t[runs / 2]),
        ms(t[runs - 1])
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(dir) = args.get(1) else {
        eprintln!("usage: gc_bench DIR [IMAGES]");
        std::process::exit(2);
    };
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1000);
    let dir = Path::new(dir);
    let layout = dir.join("layout");
    let root = dir.join("store");

    let s = Instant::now();
    write_layout(&layout, n);
    let store = ImageStore::open(&root).expect("open store");
    let refs = store.load(&layout).expect("load");
    println!(
        "store: {} images loaded in {:.0} ms",
        refs.len(),
        ms(s.elapsed())
    );
    let usage = store.image_fs_usage().expect("statvfs");
    println!(
        "filesystem: {}% used ({} MiB of {} MiB)",
        usage.used_percent(),
        (usage.capacity - usage.available) >> 20,
        usage.capacity >> 20
    );
    let none = HashSet::new();
    let policy = ImageGcPolicy::default();

    time_many("pass, nothing to free (statvfs only)", 1000, || {
        let r = image_gc(&store, &policy, &none, Utc::now(), false).expect("gc");
        assert!(r.deleted.is_empty() && r.target_bytes == 0, "{r:?}");
    });
    let with_max_age = ImageGcPolicy {
        max_age: Some(Duration::from_secs(3600)),
        ..ImageGcPolicy::default()
    };
    time_many(
        "pass, nothing to free, max_age set (index read)",
        100,
        || {
            let r = image_gc(&store, &with_max_age, &none, Utc::now(), false).expect("gc");
            assert!(r.deleted.is_empty(), "{r:?}");
        },
    );

    let over = FsUsage {
        capacity: 1 << 40,
        available: 0,
    };
    let eager = ImageGcPolicy {
        min_age: Duration::ZERO,
        ..ImageGcPolicy::default()
    };
    let all: HashSet<String> = refs.iter().cloned().collect();
    time_many(
        "full pass over every image, all in use (nothing deleted)",
        20,
        || {
            let r = image_gc_with_usage(&store, &eager, &all, Utc::now(), false, over).expect("gc");
            assert!(r.deleted.is_empty() && r.shortfall_bytes > 0, "{r:?}");
        },
    );

    let s = Instant::now();
    let r = image_gc_with_usage(&store, &eager, &none, Utc::now(), false, over).expect("gc");
    println!(
        "full pass deleting every image: {} images, {} KiB freed in {:.1} ms",
        r.deleted.len(),
        r.freed_bytes >> 10,
        ms(s.elapsed())
    );
    assert_eq!(r.deleted.len(), n);
}
