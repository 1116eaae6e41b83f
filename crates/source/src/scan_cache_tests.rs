//! The rescan's decode cache (`scan::DecodedManifests`) on real files: unchanged bytes
//! reuse the decoded pod, any change of the bytes is decoded again (even one that keeps
//! the size and the modification time), and a removed or broken file leaves it.

use std::fs;
use std::path::Path;
use std::time::SystemTime;

use tempfile::TempDir;

use super::scan::{DecodedManifests, scan_dir_with};
use super::{ANNOTATION_CONFIG_SEEN, ScanResult};

const NODE: &str = "node-1";

fn pod_yaml(name: &str, image: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: c\n    image: {image}\n"
    )
}

fn seen(scan: &ScanResult, name: &str) -> String {
    let pod = scan
        .pods
        .iter()
        .find(|p| p.name == format!("{name}-{NODE}"))
        .unwrap_or_else(|| panic!("no pod {name} in {:?}", scan.pods));
    pod.pod.metadata.annotations.as_ref().unwrap()[ANNOTATION_CONFIG_SEEN].clone()
}

fn mtime(path: &Path) -> SystemTime {
    fs::metadata(path).unwrap().modified().unwrap()
}

#[test]
fn unchanged_manifests_are_not_decoded_again() {
    let d = TempDir::new().unwrap();
    fs::write(d.path().join("a.yaml"), pod_yaml("a", "busybox")).unwrap();
    fs::write(d.path().join("b.yaml"), pod_yaml("b", "busybox")).unwrap();
    let mut cache = DecodedManifests::default();
    let first = scan_dir_with(d.path(), NODE, &mut cache);
    std::thread::sleep(std::time::Duration::from_millis(2));
    let second = scan_dir_with(d.path(), NODE, &mut cache);
    // A decode stamps a fresh config.seen: the same stamp is the cached pod.
    assert_eq!(seen(&first, "a"), seen(&second, "a"));
    assert_eq!(seen(&first, "b"), seen(&second, "b"));
    assert!(std::sync::Arc::ptr_eq(
        &first.pods[0].pod,
        &second.pods[0].pod
    ));
    // Without the cache, a scan decodes (a later stamp).
    let uncached = super::scan_dir(d.path(), NODE);
    assert_ne!(seen(&first, "a"), seen(&uncached, "a"));
}

#[test]
fn a_change_with_the_same_size_and_mtime_is_decoded() {
    let d = TempDir::new().unwrap();
    let path = d.path().join("a.yaml");
    fs::write(&path, pod_yaml("a", "busybox:1")).unwrap();
    let mut cache = DecodedManifests::default();
    let before = scan_dir_with(d.path(), NODE, &mut cache);
    let stamp = mtime(&path);
    // Rewritten in place, same length, then the old modification time put back: a
    // stat-based cache would miss this edit.
    fs::write(&path, pod_yaml("a", "busybox:2")).unwrap();
    fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(stamp)
        .unwrap();
    assert_eq!(mtime(&path), stamp);
    let after = scan_dir_with(d.path(), NODE, &mut cache);
    assert_ne!(before.pods[0].uid, after.pods[0].uid);
    let image = |s: &ScanResult| {
        s.pods[0].pod.spec.as_ref().unwrap().containers[0]
            .image
            .clone()
            .unwrap()
    };
    assert_eq!(image(&after), "busybox:2");
}

#[test]
fn removed_and_broken_files_leave_the_cache() {
    let d = TempDir::new().unwrap();
    let a = d.path().join("a.yaml");
    let b = d.path().join("b.yaml");
    fs::write(&a, pod_yaml("a", "busybox")).unwrap();
    fs::write(&b, pod_yaml("b", "busybox")).unwrap();
    let mut cache = DecodedManifests::default();
    let first = scan_dir_with(d.path(), NODE, &mut cache);
    assert_eq!(first.pods.len(), 2);

    fs::remove_file(&a).unwrap();
    fs::write(
        &b,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: b}\nspec: {}\n",
    )
    .unwrap();
    let second = scan_dir_with(d.path(), NODE, &mut cache);
    assert!(second.pods.is_empty(), "{:?}", second.pods);
    assert_eq!(second.errors.len(), 1, "{:?}", second.errors);

    // The same good content again is decoded afresh, not served from before the break.
    fs::write(&b, pod_yaml("b", "busybox")).unwrap();
    fs::write(&a, pod_yaml("a", "busybox")).unwrap();
    let third = scan_dir_with(d.path(), NODE, &mut cache);
    assert_eq!(third.pods.len(), 2);
    assert_ne!(seen(&first, "a"), seen(&third, "a"));
    assert_ne!(seen(&first, "b"), seen(&third, "b"));
    assert_eq!(first.pods[1].uid, third.pods[1].uid);
}
