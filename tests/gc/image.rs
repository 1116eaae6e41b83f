//! Image GC on real filesystems and stores.

use std::collections::HashSet;
use std::fs;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::Utc;
use podhost::image::gc::{
    GcReport, ImageGcPolicy, ImageLeases, collect_unreferenced, collect_unreferenced_keeping,
    image_gc, image_gc_with_usage,
};
use podhost::image::{FsUsage, ImageError, ImageStore};

use super::fixtures::{
    Built, SmallFs, blob_exists, build_image, is_not_found, no_temps_left, snapshot_exists,
};
use super::is_root;

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
    let sfs = SmallFs::ext4(80).expect(
        "a loop-mounted ext4 (mkfs.ext4 from e2fsprogs, loop devices); see the lines above",
    );
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
                std::thread::sleep(Duration::from_millis(8));
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
                        n += 1;
                        for _ in 0..10 {
                            assert!(
                                r.layers[0].join("base.txt").exists(),
                                "leased layer deleted"
                            );
                            assert!(
                                r.layers[1].join("data.bin").exists(),
                                "leased layer deleted"
                            );
                            std::thread::sleep(Duration::from_millis(3));
                        }
                    }
                    Err(ImageError::NotFound { .. }) => {}
                    Err(e) => panic!("resolve: {e}"),
                }
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
    eprintln!("loads, resolved, audits: {counts:?}; images deleted by GC: {deleted}");
    assert!(counts.iter().all(|&c| c > 0) && deleted > 0);
    no_temps_left(root.path());
}
