//! Image GC and container GC, as root: image GC on a small real filesystem (tmpfs
//! and a loop-mounted ext4) filled with synthetic images past the high threshold;
//! leases, pins, re-tagged in-use images, max age and concurrent loads; container GC
//! on fake attempt dirs with exit records, logs and real mounts.

use std::collections::HashSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use nix::mount::{MntFlags, MsFlags, mount, umount2};
use podhost::gc::{
    ContainerGcPolicy, DeadContainer, collect, plan, remove, remove_orphans_older_than, scan,
};
use podhost::image::gc::{
    GcReport, ImageGcPolicy, ImageLeases, collect_unreferenced, collect_unreferenced_keeping,
    image_gc, image_gc_with_usage,
};
use podhost::image::{FsUsage, ImageError, ImageStore};
use podhost::runtime::paths::Layout;
use serde_json::json;
use sha2::{Digest, Sha256};

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

macro_rules! require_root {
    () => {
        if !is_root() {
            eprintln!("SKIP: this test needs root (mounts)");
            return;
        }
    };
}

// ---- a small filesystem for the store ---------------------------------------------

/// A mounted filesystem of a few MiB, unmounted (and its loop file removed) on drop,
/// even when the test fails.
struct SmallFs {
    _dir: tempfile::TempDir,
    mnt: PathBuf,
}

impl SmallFs {
    fn tmpfs(mib: u64) -> SmallFs {
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
    fn ext4(mib: u64) -> Option<SmallFs> {
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

    fn usage(&self) -> FsUsage {
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

// ---- synthetic OCI layouts ----------------------------------------------------------

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
        h.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut h, name, *data).unwrap();
    }
    let raw = tar.into_inner().unwrap();
    let diff_id = sha(&raw);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&raw).unwrap();
    (gz.finish().unwrap(), diff_id)
}

struct Built {
    reference: String,
    manifest: String,
    top_blob: String,
    base_blob: String,
    /// Chain id of the top layer (its snapshot).
    top_chain: String,
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
fn build_image(dir: &Path, reference: &str, seed: u64, size: usize) -> Built {
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

fn blob_exists(root: &Path, digest: &str) -> bool {
    root.join("images/blobs/sha256")
        .join(hex_of(digest))
        .exists()
}

fn snapshot_exists(root: &Path, chain: &str) -> bool {
    root.join("snapshots").join(hex_of(chain)).exists()
}

fn is_not_found(r: Result<podhost::image::ResolvedImage, ImageError>) -> bool {
    matches!(r, Err(ImageError::NotFound { .. }))
}

fn no_temps_left(root: &Path) {
    let snaps: Vec<String> = fs::read_dir(root.join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(snaps.iter().all(|n| !n.starts_with("tmp-")), "{snaps:?}");
    assert_eq!(fs::read_dir(root.join("images/tmp")).unwrap().count(), 0);
}

// ---- image GC ----------------------------------------------------------------------

/// Fills the store on `sfs` past 85 % with 3 MiB images, protects some, touches some,
/// and checks what one GC pass deletes.
fn threshold_scenario(sfs: &SmallFs) {
    let src = tempfile::tempdir().unwrap();
    let root = sfs.mnt.join("root");
    let store = ImageStore::open(&root).unwrap();
    let mut images: Vec<Built> = Vec::new();
    let mut young_from = None;
    for i in 0..40u64 {
        let used = sfs.usage().used_percent();
        if used >= 87 {
            break;
        }
        if used >= 72 && young_from.is_none() {
            // The last images loaded count as too young for min_age.
            young_from = Some((Utc::now(), images.len()));
            std::thread::sleep(Duration::from_millis(20));
        }
        let dir = src.path().join(format!("img{i}"));
        let b = build_image(&dir, &format!("localhost/gc/img{i}:latest"), i + 1, 3 << 20);
        store.load(&dir).unwrap();
        images.push(b);
    }
    let usage = sfs.usage();
    assert!(usage.used_percent() >= 85, "could not fill: {usage:?}");
    let (young_time, young_idx) = young_from.expect("young images");
    assert!(
        young_idx >= 7 && images.len() > young_idx,
        "{young_idx} of {}",
        images.len()
    );
    let n = images.len();
    eprintln!(
        "{n} images, usage {}%, young from #{young_idx}",
        usage.used_percent()
    );

    // #0 in use by a container, #1 pinned, #2 leased by a starting pod.
    let in_use: HashSet<String> = HashSet::from([images[0].manifest.clone()]);
    store.set_pinned(&images[1].reference, true).unwrap();
    let leases = ImageLeases::new();
    let _lease = leases.lease(&images[2].reference);
    // Used: #5 first, then #3 (most recent).
    store.touch(&images[5].reference).unwrap();
    std::thread::sleep(Duration::from_millis(5));
    store.touch(&images[3].reference).unwrap();

    let now = Utc::now();
    let policy = ImageGcPolicy {
        // Free 25 points below the current usage: about three images.
        low_threshold_percent: usage.used_percent() - 25,
        min_age: (now - young_time).to_std().unwrap(),
        ..ImageGcPolicy::default()
    };
    // Never used (by detection), then by last use.
    let mut expected: Vec<usize> = (4..young_idx).filter(|&i| i != 5).collect();
    expected.extend([5, 3]);

    let report = image_gc(&store, &policy, &(&in_use, &leases), now, false).unwrap();
    eprintln!("{report:?}");
    let after = sfs.usage();
    let deleted_idx: Vec<usize> = report
        .deleted
        .iter()
        .map(|r| images.iter().position(|b| &b.reference == r).unwrap())
        .collect();
    let mut in_order = deleted_idx.clone();
    in_order.sort_by_key(|i| expected.iter().position(|e| e == i).unwrap_or(usize::MAX));
    assert_eq!(
        in_order,
        expected[..deleted_idx.len()],
        "LRU order: deleted {deleted_idx:?}, expected a prefix of {expected:?}"
    );
    assert!(
        (1..expected.len()).contains(&deleted_idx.len()),
        "{deleted_idx:?}"
    );
    assert!(
        report.target_bytes > 0 && report.freed_bytes >= report.target_bytes,
        "{report:?}"
    );
    assert_eq!(report.shortfall_bytes, 0);
    assert!(
        after.used_percent() <= policy.low_threshold_percent,
        "usage after {}% > low {}%",
        after.used_percent(),
        policy.low_threshold_percent
    );

    for (i, b) in images.iter().enumerate() {
        if deleted_idx.contains(&i) {
            assert!(is_not_found(store.resolve(&b.reference)), "#{i} resolves");
            assert!(!blob_exists(&root, &b.top_blob), "#{i} top blob left");
            assert!(!blob_exists(&root, &b.manifest), "#{i} manifest left");
            assert!(!snapshot_exists(&root, &b.top_chain), "#{i} snapshot left");
        } else {
            let r = store.resolve(&b.reference).unwrap();
            let data = r.layers.last().unwrap().join("data.bin");
            assert_eq!(fs::metadata(&data).unwrap().len(), 3 << 20, "#{i}");
            assert!(blob_exists(&root, &b.top_blob) && blob_exists(&root, &b.base_blob));
        }
    }
    no_temps_left(&root);

    // Below the high threshold now: the next pass only looks at statvfs.
    let again = image_gc(&store, &policy, &(&in_use, &leases), now, false).unwrap();
    assert_eq!(again, GcReport::default());
}

#[test]
fn image_gc_on_tmpfs_frees_lru_images_down_to_the_low_threshold() {
    require_root!();
    let sfs = SmallFs::tmpfs(64);
    threshold_scenario(&sfs);
}

#[test]
fn image_gc_on_loop_ext4_frees_lru_images_down_to_the_low_threshold() {
    require_root!();
    let Some(sfs) = SmallFs::ext4(80) else {
        eprintln!("SKIP: no loop-mounted ext4 on this host");
        return;
    };
    threshold_scenario(&sfs);
}

/// A fake usage that asks for more than the store holds.
fn everything() -> FsUsage {
    FsUsage {
        capacity: 1 << 50,
        available: 0,
    }
}

fn eager() -> ImageGcPolicy {
    ImageGcPolicy {
        min_age: Duration::ZERO,
        low_threshold_percent: 0,
        ..ImageGcPolicy::default()
    }
}

#[test]
fn shortfall_is_reported_and_protected_images_survive() {
    require_root!();
    let src = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let store = ImageStore::open(root.path()).unwrap();
    let built: Vec<Built> = (0..4)
        .map(|i| {
            let dir = src.path().join(format!("i{i}"));
            let b = build_image(&dir, &format!("localhost/s/i{i}:v1"), 100 + i, 64 << 10);
            store.load(&dir).unwrap();
            b
        })
        .collect();
    store.set_pinned(&built[0].reference, true).unwrap();
    let leases = ImageLeases::new();
    let lease = leases.lease(&built[1].reference);
    let in_use = HashSet::from([built[2].reference.clone()]);
    let r = image_gc_with_usage(
        &store,
        &eager(),
        &(&in_use, &leases),
        Utc::now(),
        false,
        everything(),
    )
    .unwrap();
    assert_eq!(r.deleted, vec![built[3].reference.clone()]);
    assert!(r.shortfall_bytes > 0 && r.freed_bytes >= 64 << 10, "{r:?}");
    for b in &built[..3] {
        store.resolve(&b.reference).unwrap();
    }
    // The lease released: it goes next time; the pinned one never.
    drop(lease);
    let r =
        image_gc_with_usage(&store, &eager(), &in_use, Utc::now(), false, everything()).unwrap();
    assert_eq!(r.deleted, vec![built[1].reference.clone()]);
    store.set_pinned(&built[0].reference, false).unwrap();
    store.remove(&built[2].reference).unwrap();
    // Removed but in use: its content stays while the in-use set names its manifest.
    let in_use_digest = HashSet::from([built[2].manifest.clone()]);
    assert_eq!(
        collect_unreferenced_keeping(&store, &in_use_digest).unwrap(),
        0
    );
    assert!(snapshot_exists(root.path(), &built[2].top_chain));
    // high = 100 disables threshold GC (kubernetes#79929) unless forced.
    let off = ImageGcPolicy {
        high_threshold_percent: 100,
        ..eager()
    };
    let r = image_gc_with_usage(
        &store,
        &off,
        &HashSet::new(),
        Utc::now(),
        false,
        everything(),
    )
    .unwrap();
    assert_eq!(r, GcReport::default());
    let r = image_gc_with_usage(
        &store,
        &off,
        &HashSet::new(),
        Utc::now(),
        true,
        everything(),
    )
    .unwrap();
    assert_eq!(r.deleted, vec![built[0].reference.clone()]);
    // Nothing named: everything is gone, the shared base layer too.
    assert!(!blob_exists(root.path(), &built[0].base_blob));
    assert!(!snapshot_exists(root.path(), &built[2].top_chain));
    let blobs = fs::read_dir(root.path().join("images/blobs/sha256"))
        .unwrap()
        .count();
    let snaps = fs::read_dir(root.path().join("snapshots")).unwrap().count();
    assert_eq!((blobs, snaps), (0, 0));
}

#[test]
fn retagged_image_in_use_keeps_its_content_and_rmi_content_is_collected() {
    require_root!();
    let src = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let store = ImageStore::open(root.path()).unwrap();
    let old = build_image(&src.path().join("a"), "localhost/x:latest", 1, 32 << 10);
    store.load(&src.path().join("a")).unwrap();
    let first = store.list().unwrap()[0].first_detected.unwrap();
    // Loading the same content again keeps its first detection.
    store.load(&src.path().join("a")).unwrap();
    assert_eq!(store.list().unwrap()[0].first_detected.unwrap(), first);
    let running = store.resolve("localhost/x").unwrap();
    let new = build_image(&src.path().join("b"), "localhost/x:latest", 2, 32 << 10);
    store.load(&src.path().join("b")).unwrap();
    assert!(store.list().unwrap()[0].first_detected.unwrap() > first);
    // A container still runs the old manifest, which no reference names now.
    let in_use = HashSet::from([old.manifest.clone()]);
    let r =
        image_gc_with_usage(&store, &eager(), &in_use, Utc::now(), false, everything()).unwrap();
    assert_eq!(r.deleted, vec!["localhost/x:latest".to_string()]);
    assert!(running.layers[0].join("base.txt").exists());
    assert!(running.layers[1].join("data.bin").exists());
    assert!(blob_exists(root.path(), &old.manifest) && !blob_exists(root.path(), &new.manifest));
    // The container is gone: a plain collection takes the rest.
    let freed = collect_unreferenced(&store).unwrap();
    assert!(freed >= 64 << 10, "{freed}");
    assert!(!snapshot_exists(root.path(), &old.top_chain));
    // rmi then collect.
    store.load(&src.path().join("b")).unwrap();
    assert!(matches!(
        store.remove("localhost/nope"),
        Err(ImageError::NotFound { .. })
    ));
    store.remove("localhost/x").unwrap();
    assert!(snapshot_exists(root.path(), &new.top_chain));
    assert!(collect_unreferenced(&store).unwrap() > 0);
    assert!(!snapshot_exists(root.path(), &new.top_chain));
    no_temps_left(root.path());
}

#[test]
fn max_age_deletes_idle_images_whatever_the_usage() {
    require_root!();
    let src = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let store = ImageStore::open(root.path()).unwrap();
    let a = build_image(&src.path().join("a"), "localhost/old:1", 1, 4096);
    store.load(&src.path().join("a")).unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    let b = build_image(&src.path().join("b"), "localhost/new:1", 2, 4096);
    store.load(&src.path().join("b")).unwrap();
    let policy = ImageGcPolicy {
        min_age: Duration::ZERO,
        max_age: Some(Duration::from_secs(1)),
        ..ImageGcPolicy::default()
    };
    let idle = FsUsage {
        capacity: 100,
        available: 90,
    };
    let r = image_gc_with_usage(&store, &policy, &HashSet::new(), Utc::now(), false, idle).unwrap();
    assert_eq!(r.deleted, vec![a.reference.clone()]);
    assert_eq!(r.target_bytes, 0);
    store.resolve(&b.reference).unwrap();
}

#[test]
fn concurrent_loads_resolves_and_gc_never_leave_a_dangling_reference() {
    require_root!();
    let src = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let store = ImageStore::open(root.path()).unwrap();
    let layouts: Vec<(PathBuf, Built)> = (0..6)
        .map(|i| {
            let dir = src.path().join(format!("c{i}"));
            let b = build_image(&dir, &format!("localhost/c/c{i}:latest"), 50 + i, 128 << 10);
            (dir, b)
        })
        .collect();
    let layouts = Arc::new(layouts);
    let leases = ImageLeases::new();
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    // A loader.
    {
        let (store, layouts, stop) = (store.clone(), layouts.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let (dir, _) = &layouts[n % layouts.len()];
                store.load(dir).expect("load must not fail under GC");
                n += 1;
                std::thread::sleep(Duration::from_millis(2));
            }
            n
        }));
    }
    // A starting pod: lease, resolve, check the layers stay while leased.
    {
        let (store, layouts, stop, leases) =
            (store.clone(), layouts.clone(), stop.clone(), leases.clone());
        threads.push(std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let (_, b) = &layouts[n % layouts.len()];
                let _lease = leases.lease(&b.reference);
                match store.resolve(&b.reference) {
                    Ok(r) => {
                        for _ in 0..3 {
                            for l in &r.layers {
                                assert!(l.join("base.txt").exists(), "leased layer deleted");
                            }
                            std::thread::sleep(Duration::from_millis(2));
                        }
                    }
                    Err(ImageError::NotFound { .. }) => {}
                    Err(e) => panic!("resolve: {e}"),
                }
                n += 1;
            }
            n
        }));
    }
    // An auditor: every reference's content is whole (GC holds off meanwhile).
    {
        let (store, stop, root) = (store.clone(), stop.clone(), root.path().to_path_buf());
        threads.push(std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let _guard = store.content_guard().unwrap();
                for img in store.list().unwrap() {
                    let b = layouts
                        .iter()
                        .map(|(_, b)| b)
                        .find(|b| b.reference == img.reference)
                        .unwrap();
                    for d in [&b.manifest, &b.top_blob, &b.base_blob] {
                        assert!(blob_exists(&root, d), "{}: blob {d} missing", b.reference);
                    }
                    assert!(snapshot_exists(&root, &b.top_chain), "{}", b.reference);
                }
                drop(_guard);
                n += 1;
                std::thread::sleep(Duration::from_millis(2));
            }
            n
        }));
    }
    let mut deleted = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(4);
    while std::time::Instant::now() < deadline {
        let r = image_gc_with_usage(&store, &eager(), &leases, Utc::now(), false, everything())
            .unwrap();
        deleted += r.deleted.len();
        std::thread::sleep(Duration::from_millis(3));
    }
    stop.store(true, Ordering::Relaxed);
    let counts: Vec<usize> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    eprintln!("loads, resolves, audits: {counts:?}; images deleted by GC: {deleted}");
    assert!(counts.iter().all(|&c| c > 0) && deleted > 0);
    no_temps_left(root.path());
}

// ---- container GC -------------------------------------------------------------------

fn t(secs: i64) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp(1_700_000_000 + secs, 0).unwrap()
}

/// Writes an attempt dir (with `exit.json` if `finished` is given) and its log.
fn attempt(
    layout: &Layout,
    ns_pod: Option<(&str, &str)>,
    uid: &str,
    name: &str,
    n: u32,
    finished: Option<i64>,
) {
    let dir = layout.attempt_dir(uid, name, n);
    fs::create_dir_all(dir.join("upper")).unwrap();
    fs::write(dir.join("config.json"), b"{}").unwrap();
    fs::write(
        dir.join("started.json"),
        serde_json::to_vec(&json!({"shim_pid": 999_999_999, "init_pid": 999_999_998,
            "started_at": t(0)}))
        .unwrap(),
    )
    .unwrap();
    if let Some(f) = finished {
        let exit = json!({"exit_code": 1, "signal": null, "started_at": t(0), "finished_at": t(f)});
        fs::write(dir.join("exit.json"), serde_json::to_vec(&exit).unwrap()).unwrap();
    }
    if let Some((ns, pod)) = ns_pod {
        let log = layout.container_log(ns, pod, uid, name, n);
        fs::create_dir_all(log.parent().unwrap()).unwrap();
        fs::write(&log, b"2024-01-01T00:00:00Z stdout F hi\n").unwrap();
    }
}

fn status(layout: &Layout, uid: &str, ns: &str, pod: &str) {
    let rec =
        json!({"pod": {"metadata": {"name": pod, "namespace": ns, "uid": uid}}, "events": []});
    fs::create_dir_all(layout.pod_dir(uid)).unwrap();
    fs::write(
        layout.pod_dir(uid).join("status.json"),
        serde_json::to_vec(&rec).unwrap(),
    )
    .unwrap();
}

fn key(d: &DeadContainer) -> String {
    format!("{}/{}/{}", d.pod_uid, d.container, d.attempt)
}

#[test]
fn scan_finds_dead_attempts_with_their_logs() {
    let tmp = tempfile::tempdir().unwrap();
    let layout = Layout::new(tmp.path().join("root"), tmp.path().join("logs"));
    status(&layout, "u1", "default", "web-node");
    for n in 0..3 {
        attempt(
            &layout,
            Some(("default", "web-node")),
            "u1",
            "app",
            n,
            Some(10 * n as i64),
        );
    }
    // Running: no exit record.
    attempt(&layout, Some(("default", "web-node")), "u1", "app", 3, None);
    // No status.json: the log dir is found by its UID.
    attempt(
        &layout,
        Some(("kube-system", "dns-node")),
        "u2",
        "dns",
        0,
        Some(5),
    );
    // A shim still cleaning up (its cmdline names the attempt's shim-config.json).
    attempt(&layout, None, "u3", "c", 0, Some(5));
    let bundle = layout.attempt_dir("u3", "c", 0);
    let mut shim = Command::new("sh")
        .arg("-c")
        .arg("sleep 30")
        .arg(bundle.join("shim-config.json"))
        .spawn()
        .unwrap();
    fs::write(
        bundle.join("started.json"),
        serde_json::to_vec(&json!({"shim_pid": shim.id(), "init_pid": 1, "started_at": t(0)}))
            .unwrap(),
    )
    .unwrap();
    let mut dead = scan(&layout);
    let _ = shim.kill();
    let _ = shim.wait();
    dead.sort_by_key(key);
    assert_eq!(
        dead.iter().map(key).collect::<Vec<_>>(),
        ["u1/app/0", "u1/app/1", "u1/app/2", "u2/dns/0"]
    );
    assert_eq!(dead[1].finished_at, t(10));
    assert_eq!(
        dead[1].log_file,
        layout.container_log("default", "web-node", "u1", "app", 1)
    );
    assert_eq!(
        dead[3].log_file,
        layout.container_log("kube-system", "dns-node", "u2", "dns", 0)
    );
    assert!(
        dead.iter()
            .all(|d| d.log_file.exists() && d.attempt_dir.is_dir())
    );
}

#[test]
fn collect_removes_old_attempts_and_their_logs_keeps_current_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let layout = Layout::new(tmp.path().join("root"), tmp.path().join("logs"));
    status(&layout, "live", "default", "web-node");
    for n in 0..4 {
        attempt(
            &layout,
            Some(("default", "web-node")),
            "live",
            "app",
            n,
            Some(10 * n as i64),
        );
    }
    attempt(
        &layout,
        Some(("default", "web-node")),
        "live",
        "app",
        4,
        None,
    );
    attempt(
        &layout,
        Some(("default", "web-node")),
        "live",
        "side",
        0,
        Some(1),
    );
    status(&layout, "gone", "default", "old-node");
    attempt(
        &layout,
        Some(("default", "old-node")),
        "gone",
        "app",
        0,
        Some(1),
    );
    attempt(
        &layout,
        Some(("default", "old-node")),
        "gone",
        "app",
        1,
        Some(2),
    );
    let live = HashSet::from(["live".to_string()]);
    let planned = plan(&scan(&layout), &live, &ContainerGcPolicy::default(), t(100));
    assert_eq!(
        planned.iter().map(key).collect::<Vec<_>>(),
        [
            "live/app/0",
            "gone/app/0",
            "gone/app/1",
            "live/app/1",
            "live/app/2"
        ]
    );
    let report = collect(&layout, &live, &ContainerGcPolicy::default(), t(100));
    assert_eq!(report.removed.len(), 5);
    assert_eq!(report.failed, 0);
    let left: Vec<u32> = podhost::runtime::paths::attempts(&layout.container_dir("live", "app"));
    assert_eq!(left, [3, 4]);
    assert!(layout.attempt_dir("live", "side", 0).is_dir());
    for n in 0..3 {
        assert!(
            !layout
                .container_log("default", "web-node", "live", "app", n)
                .exists()
        );
    }
    assert!(
        layout
            .container_log("default", "web-node", "live", "app", 3)
            .exists()
    );
    // The gone pod's dirs were modified just now: kept for the grace period…
    assert!(report.orphans.pod_dirs.is_empty());
    assert!(layout.pod_dir("gone").exists());
    // …and removed after it.
    let orphans = remove_orphans_older_than(&layout, &live, Duration::ZERO);
    assert_eq!(orphans.pod_dirs, ["gone"]);
    assert_eq!(
        orphans.log_dirs,
        [layout.pod_log_dir("default", "old-node", "gone")]
    );
    assert!(!layout.pod_dir("gone").exists());
    assert!(layout.pod_dir("live").exists());
    assert!(layout.pod_log_dir("default", "web-node", "live").exists());
    // No trash left anywhere.
    let trash = walk_names(tmp.path())
        .into_iter()
        .filter(|n| n.starts_with(".gc-"))
        .count();
    assert_eq!(trash, 0);
}

fn walk_names(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            out.push(e.file_name().to_string_lossy().into_owned());
            if e.file_type().unwrap().is_dir() {
                out.extend(walk_names(&e.path()));
            }
        }
    }
    out
}

#[test]
fn remove_unmounts_a_mounted_rootfs_and_orphans_with_ns_mounts() {
    require_root!();
    let tmp = tempfile::tempdir().unwrap();
    let layout = Layout::new(tmp.path().join("root"), tmp.path().join("logs"));
    attempt(&layout, Some(("default", "p-node")), "u", "app", 0, Some(1));
    attempt(&layout, Some(("default", "p-node")), "u", "app", 1, Some(2));
    let rootfs = layout.attempt_dir("u", "app", 0).join("rootfs");
    fs::create_dir_all(&rootfs).unwrap();
    mount(
        Some("tmpfs"),
        &rootfs,
        Some("tmpfs"),
        MsFlags::empty(),
        Some("size=1m"),
    )
    .unwrap();
    fs::write(rootfs.join("inside"), b"x").unwrap();
    let dead = scan(&layout);
    let d0 = dead.iter().find(|d| d.attempt == 0).unwrap();
    remove(d0).unwrap();
    assert!(!layout.attempt_dir("u", "app", 0).exists());
    assert!(
        !fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .contains(rootfs.to_str().unwrap())
    );
    assert!(!d0.log_file.exists());
    remove(d0).unwrap();

    // The pod's namespace handle: a bind mount of an nsfs file.
    let ns = layout.pod_ns_dir("u");
    fs::create_dir_all(&ns).unwrap();
    fs::write(ns.join("net"), b"").unwrap();
    mount(
        Some("/proc/self/ns/net"),
        &ns.join("net"),
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .unwrap();
    let report = remove_orphans_older_than(&layout, &HashSet::new(), Duration::ZERO);
    assert_eq!(report.pod_dirs, ["u"]);
    assert!(!layout.pod_dir("u").exists());
    assert!(!layout.pod_log_dir("default", "p-node", "u").exists());
}
