//! The on-disk layout (docs/layout.md; docs/architecture.md, "On disk"): where every
//! directory and file lives.

use std::path::{Path, PathBuf};

/// The daemon's default `--root-dir`.
pub const DEFAULT_ROOT_DIR: &str = "/var/lib/podhost";

/// Where podhost keeps its state and logs.
#[derive(Debug, Clone)]
pub struct Layout {
    pub root_dir: PathBuf,
    pub log_dir: PathBuf,
}

impl Layout {
    pub fn new(root_dir: impl Into<PathBuf>, log_dir: impl Into<PathBuf>) -> Self {
        Self {
            root_dir: root_dir.into(),
            log_dir: log_dir.into(),
        }
    }

    /// Localhost seccomp profiles (the kubelet's `<root-dir>/seccomp/`).
    pub fn seccomp_dir(&self) -> PathBuf {
        self.root_dir.join("seccomp")
    }

    pub fn pods_dir(&self) -> PathBuf {
        self.root_dir.join("pods")
    }

    pub fn pod_dir(&self, uid: &str) -> PathBuf {
        self.pods_dir().join(uid)
    }

    /// Persistent handles of the pod's shared namespaces (bind mounts of nsfs files).
    pub fn pod_ns_dir(&self, uid: &str) -> PathBuf {
        self.pod_dir(uid).join("ns")
    }

    /// The pod's volumes: `volumes/<kind>/<name>` (emptyDir, content tmpfs, subPath binds).
    pub fn pod_volumes_dir(&self, uid: &str) -> PathBuf {
        self.pod_dir(uid).join("volumes")
    }

    /// What podhost last wrote into the content volume `volume` (its payload's digest
    /// and dir): root-only, beside the volumes, never inside one a container mounts.
    pub fn content_payload_record(&self, uid: &str, volume: &str) -> PathBuf {
        self.pod_dir(uid).join("content-payloads").join(volume)
    }

    pub fn container_dir(&self, uid: &str, container: &str) -> PathBuf {
        self.pod_dir(uid).join("containers").join(container)
    }

    /// One directory per start of a container: the OCI bundle, overlay dirs, shim records.
    pub fn attempt_dir(&self, uid: &str, container: &str, attempt: u32) -> PathBuf {
        self.container_dir(uid, container).join(attempt.to_string())
    }

    /// libcontainer's state directories (`<root>/<container-id>/state.json`).
    pub fn libcontainer_root(&self) -> PathBuf {
        self.root_dir.join("run").join("libcontainer")
    }

    pub fn pod_log_dir(&self, namespace: &str, pod_name: &str, uid: &str) -> PathBuf {
        self.log_dir.join(format!("{namespace}_{pod_name}_{uid}"))
    }

    /// `<log-dir>/<ns>_<pod>_<uid>/<container>/<restart>.log`, as the kubelet names it.
    pub fn container_log(
        &self,
        namespace: &str,
        pod_name: &str,
        uid: &str,
        container: &str,
        restart: u32,
    ) -> PathBuf {
        self.pod_log_dir(namespace, pod_name, uid)
            .join(container)
            .join(format!("{restart}.log"))
    }
}

/// The libcontainer id of one container start: short, unique, valid as a file name.
pub fn container_id(uid: &str, container: &str, attempt: u32) -> String {
    let short = &uid[..uid.len().min(12)];
    format!("{short}-{container}-{attempt}")
}

/// Lists the attempt numbers present under a container dir, ascending.
pub fn attempts(container_dir: &Path) -> Vec<u32> {
    let mut out: Vec<u32> = std::fs::read_dir(container_dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    out.sort_unstable();
    out
}
