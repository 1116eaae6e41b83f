//! The static-pod source: the manifest directory → validated pods with the kubelet's
//! static-pod identity (`pkg/kubelet/config/file.go`, `common.go`).
//!
//! - [`load_manifest`]: one file → one [`StaticPod`] (or a [`ManifestError`] naming the
//!   file, the fields and what to do); [`check_manifest`] also keeps what podhost does
//!   with each field (the table in `fields.rs`), for `podhost validate`.
//! - [`scan_dir`]: the whole directory → [`ScanResult`] (authoritative: a pod absent
//!   from it was removed).
//! - [`watch`]: inotify + periodic rescans → a stream of changed [`ScanResult`]s.
//! - [`poll_url`]: the http source (`--manifest-url`), the same stream from a URL;
//!   [`merge_sources`] puts both side by side.
//!
//! Identity is the UID: any edit of a manifest gives a new UID, so the consumer sees
//! the old pod removed and a new one added.
//!
//! - [`configdir`]: the other file input, the ConfigMap and Secret objects of
//!   `--config-dir` that static pods' volumes and environment name.
//!
//! In the workspace (docs/architecture.md, "Crates"): uses model, disk, metrics. It may
//! not: the runtime or the pods' state: it turns inputs into validated pods and nothing
//! else.

pub mod configdir;
mod decode;
mod defaults;
mod error;
mod error_clone;
mod field_report;
mod fields;
mod host_enforcement;
mod identity;
mod load;
mod manifest_url;
mod merge;
mod read_only_mounts;
mod scan;
mod spelling;
mod validate;
mod watch;

#[cfg(test)]
mod scan_cache_tests;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

pub use defaults::{
    DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS, DEFAULT_TERMINATION_MESSAGE_PATH, default_pull_policy,
};
pub use error::{FieldError, MAX_MANIFEST_BYTES, ManifestError, ValueError};
pub use field_report::{
    FieldReport, field_report, field_report_for, unhonoured_fields, unhonoured_fields_for,
};
pub use fields::FieldOrigin;
pub use fields::{FIELDS, FieldStatus, NOT_YET, honoured_fields};
pub use host_enforcement::mark_host_enforcement;
pub use identity::{
    ANNOTATION_CONFIG_HASH, ANNOTATION_CONFIG_SEEN, ANNOTATION_CONFIG_SOURCE, Fnv128a, PodOrigin,
    SOURCE_API, fnv128a, http_pod_uid, is_api_pod, pod_uid, static_pod_name, static_pod_uid,
};
pub use load::{ManifestCheck, check_manifest, load_manifest};
pub use manifest_url::{
    HTTP_TIMEOUT, ManifestUrlError, UrlSource, parse_headers, pods_from_body, poll_url,
    read_url_once,
};
pub use merge::{combine, merge_sources};
pub use scan::scan_dir;
pub use watch::watch;

pub use validate::dns1123_subdomain;

/// A pod read from a manifest file, defaulted and with its static-pod identity.
#[derive(Debug, Clone)]
pub struct StaticPod {
    /// The pod as podhost runs it: API defaults applied, `metadata.name` =
    /// [`StaticPod::name`], `metadata.uid` = [`StaticPod::uid`], config annotations,
    /// `spec.nodeName`, the NoExecute toleration, phase Pending. Immutable and shared:
    /// the rescans, the manager and the pod's worker hold this one copy.
    pub pod: Arc<Pod>,
    /// 32 hex digits, FNV-128a of the pod ‖ node ‖ path; changes with any edit.
    pub uid: String,
    /// `<metadata.name>-<lowercase node name>`.
    pub name: String,
    /// `metadata.namespace`, `default` when not set.
    pub namespace: String,
    /// The manifest file; for a pod of the manifest URL, the URL (`<url> items[i]` for
    /// the items of a PodList).
    pub path: PathBuf,
    /// Fields set in the manifest that podhost ignores, one sentence each.
    pub warnings: Vec<String>,
}

/// One full read of the manifest directory (or the manifest URL, or both merged).
#[derive(Debug, Default, Clone)]
pub struct ScanResult {
    /// The pods, in manifest file name order, unique by namespace and name.
    pub pods: Vec<StaticPod>,
    /// Every manifest (or the directory) that could not be used, in file name order.
    pub errors: Vec<ManifestError>,
}
