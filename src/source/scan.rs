//! One full read of the manifest directory, as the kubelet's `extractFromDir`.

use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::error::ManifestError;
use super::load::load_manifest;
use super::{ScanResult, StaticPod};

/// Reads every manifest in `dir` (not recursively). Names starting with `.` are
/// skipped, the rest are read in name order whatever their extension; subdirectories
/// and bad manifests are reported in [`ScanResult::errors`] without stopping the scan.
/// When two files define the same pod, the first by file name wins and the second is
/// reported. A missing directory gives no pods and one error.
pub fn scan_dir(dir: &Path, node_name: &str) -> ScanResult {
    let mut result = ScanResult::default();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            result.errors.push(ManifestError::DirMissing {
                path: dir.to_path_buf(),
            });
            return result;
        }
        Err(source) => {
            result.errors.push(ManifestError::DirRead {
                path: dir.to_path_buf(),
                source,
            });
            return result;
        }
    };
    let mut paths: Vec<PathBuf> = Vec::new();
    for entry in entries {
        match entry {
            Ok(entry) if entry.file_name().as_bytes().starts_with(b".") => {}
            Ok(entry) => paths.push(entry.path()),
            Err(source) => result.errors.push(ManifestError::DirRead {
                path: dir.to_path_buf(),
                source,
            }),
        }
    }
    paths.sort();

    let mut by_name: HashMap<(String, String), PathBuf> = HashMap::new();
    for path in paths {
        match load_manifest(&path, node_name) {
            Ok(pod) => add_unique(&mut result, &mut by_name, pod),
            Err(e) => result.errors.push(e),
        }
    }
    result
}

/// Adds `pod` unless a pod of its namespace/name is already in, which is reported.
pub(crate) fn add_unique(
    result: &mut ScanResult,
    by_name: &mut HashMap<(String, String), PathBuf>,
    pod: StaticPod,
) {
    let key = (pod.namespace.clone(), pod.name.clone());
    if let Some(first) = by_name.get(&key) {
        result.errors.push(ManifestError::DuplicatePod {
            path: pod.path,
            first: first.clone(),
            namespace: pod.namespace,
            name: pod.name,
        });
        return;
    }
    by_name.insert(key, pod.path.clone());
    result.pods.push(pod);
}
