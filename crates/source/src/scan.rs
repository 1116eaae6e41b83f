//! One full read of the manifest directory, as the kubelet's `extractFromDir`.

use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::decode::read_manifest;
use super::error::ManifestError;
use super::load::load_bytes;
use super::{ScanResult, StaticPod};

/// The pods decoded from each manifest file, with the bytes they were decoded from, so
/// that a rescan decodes only files whose content changed. Every file is still read at
/// every scan and compared byte for byte (not by stat: an edit within one timestamp
/// tick that keeps the size would look unchanged), so what a scan returns is exactly
/// what decoding every file would return, except for `kubernetes.io/config.seen`, which
/// keeps the time the content was first seen (consumers keep the first one per UID
/// anyway). Decoding (YAML, validation, field report) was most of a rescan's CPU.
#[derive(Debug, Default)]
pub(crate) struct DecodedManifests {
    by_path: HashMap<PathBuf, (Vec<u8>, StaticPod)>,
}

impl DecodedManifests {
    /// The pod of the manifest at `path`: the cached one if its bytes are unchanged.
    fn load(&mut self, path: &Path, node_name: &str) -> Result<StaticPod, ManifestError> {
        let bytes = read_manifest(path).inspect_err(|_| {
            self.by_path.remove(path);
        })?;
        if let Some((cached, pod)) = self.by_path.get(path)
            && *cached == bytes
        {
            return Ok(pod.clone());
        }
        let loaded = load_bytes(path, node_name, &bytes, &mut Vec::new(), &mut None);
        match &loaded {
            Ok(pod) => {
                self.by_path
                    .insert(path.to_path_buf(), (bytes, pod.clone()));
            }
            Err(_) => {
                self.by_path.remove(path);
            }
        }
        loaded
    }
}

/// Reads every manifest in `dir` (not recursively). Names starting with `.` are
/// skipped, the rest are read in name order whatever their extension; subdirectories
/// and bad manifests are reported in [`ScanResult::errors`] without stopping the scan.
/// When two files define the same pod, the first by file name wins and the second is
/// reported. A missing directory gives no pods and one error.
pub fn scan_dir(dir: &Path, node_name: &str) -> ScanResult {
    scan_dir_with(dir, node_name, &mut DecodedManifests::default())
}

/// [`scan_dir`], decoding only the manifests whose bytes differ from `decoded`'s (which
/// is updated: files gone or broken leave it).
pub(crate) fn scan_dir_with(
    dir: &Path,
    node_name: &str,
    decoded: &mut DecodedManifests,
) -> ScanResult {
    let mut result = ScanResult::default();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            decoded.by_path.clear();
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
    decoded
        .by_path
        .retain(|p, _| paths.binary_search(p).is_ok());

    let mut by_name: HashMap<(String, String), PathBuf> = HashMap::new();
    for path in paths {
        match decoded.load(&path, node_name) {
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
