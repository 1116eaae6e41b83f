//! Static-pod identity, as the kubelet's `applyDefaults` (`pkg/kubelet/config/common.go`):
//! UID = FNV-128a over the decoded pod ‖ `host:<node>` ‖ `file:<path>` (a pod of the
//! http source: the pod ‖ `url:<url>`), name suffixed with the node name, namespace
//! `default`, config annotations, the NoExecute toleration (file pods only, as the
//! kubelet) and phase Pending.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use k8s_openapi::api::core::v1::{Pod, PodStatus, Toleration};

/// FNV-128 offset basis.
pub const FNV128_OFFSET_BASIS: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
/// FNV-128 prime (2^88 + 2^8 + 0x3b).
pub const FNV128_PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013B;

/// Annotation holding the pod's config hash (= its UID), as the kubelet.
pub const ANNOTATION_CONFIG_HASH: &str = "kubernetes.io/config.hash";
/// Annotation naming the config source (`file` or `http`), as the kubelet.
pub const ANNOTATION_CONFIG_SOURCE: &str = "kubernetes.io/config.source";
/// The `kubernetes.io/config.source` of pods from the API server (cluster mode).
pub const SOURCE_API: &str = "api";

/// Whether the pod came from the API server (by its config source annotation).
pub fn is_api_pod(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_CONFIG_SOURCE))
        .is_some_and(|s| s == SOURCE_API)
}

/// Annotation holding when the pod was read (RFC 3339 with nanoseconds), as the kubelet.
pub const ANNOTATION_CONFIG_SEEN: &str = "kubernetes.io/config.seen";

/// Incremental FNV-1a, 128-bit variant (Go's `hash/fnv.New128a`).
#[derive(Debug, Clone, Copy)]
pub struct Fnv128a(u128);

impl Default for Fnv128a {
    fn default() -> Self {
        Self(FNV128_OFFSET_BASIS)
    }
}

impl Fnv128a {
    /// A hasher in its initial state.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes into the hash.
    pub fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u128::from(b);
            self.0 = self.0.wrapping_mul(FNV128_PRIME);
        }
    }

    /// The hash value so far.
    pub fn finish(&self) -> u128 {
        self.0
    }
}

/// FNV-128a of `bytes`.
pub fn fnv128a(bytes: &[u8]) -> u128 {
    let mut h = Fnv128a::new();
    h.write(bytes);
    h.finish()
}

/// The UID of a static pod: 32 lowercase hex digits of FNV-128a over the canonical
/// serialization of the decoded (not yet defaulted) pod, then `host:<node_name>`, then
/// `file:<path>`. Any change of the pod, the node name or the file path changes it.
pub fn static_pod_uid(decoded: &Pod, node_name: &str, path: &Path) -> String {
    // Serializing a k8s-openapi type cannot fail: every field is a plain value and
    // every map has string keys.
    let canonical = serde_json::to_vec(decoded).unwrap_or_default();
    let mut h = Fnv128a::new();
    h.write(&canonical);
    h.write(b"host:");
    h.write(node_name.as_bytes());
    h.write(b"file:");
    h.write(path.as_os_str().as_bytes());
    format!("{:032x}", h.finish())
}

/// Where a static pod was read from: it is part of the pod's UID and annotations.
#[derive(Debug, Clone, Copy)]
pub enum PodOrigin<'a> {
    /// A manifest file (`--pod-manifest-path`).
    File(&'a Path),
    /// The http source (`--manifest-url`), with the URL as given on the command line.
    Url(&'a str),
}

impl PodOrigin<'_> {
    /// The `kubernetes.io/config.source` value: `file` or `http`.
    pub fn source_name(&self) -> &'static str {
        match self {
            PodOrigin::File(_) => "file",
            PodOrigin::Url(_) => "http",
        }
    }
}

/// The UID of a pod from the http source: 32 lowercase hex digits of FNV-128a over the
/// canonical serialization of the decoded pod, then `url:<url>`. The kubelet writes no
/// `host:` for URL pods, so every node reading the same URL gives a pod the same UID.
pub fn http_pod_uid(decoded: &Pod, url: &str) -> String {
    let canonical = serde_json::to_vec(decoded).unwrap_or_default();
    let mut h = Fnv128a::new();
    h.write(&canonical);
    h.write(b"url:");
    h.write(url.as_bytes());
    format!("{:032x}", h.finish())
}

/// The UID of a pod read from `origin` (see [`static_pod_uid`], [`http_pod_uid`]).
pub fn pod_uid(decoded: &Pod, node_name: &str, origin: PodOrigin<'_>) -> String {
    match origin {
        PodOrigin::File(path) => static_pod_uid(decoded, node_name, path),
        PodOrigin::Url(url) => http_pod_uid(decoded, url),
    }
}

/// The name a static pod runs under: `<metadata.name>-<lowercase(node_name)>`.
pub fn static_pod_name(name: &str, node_name: &str) -> String {
    format!("{name}-{}", node_name.to_lowercase())
}

/// Applies the kubelet's static-pod identity to `pod` (which must already carry
/// `metadata.name`): name, namespace, node name, UID, config annotations, the
/// NoExecute toleration (pods of files only, as the kubelet) and phase Pending. `seen`
/// is the RFC 3339 time the file was read; it is not part of the UID.
pub fn apply_identity(
    pod: &mut Pod,
    uid: &str,
    node_name: &str,
    seen: &str,
    origin: PodOrigin<'_>,
) {
    let meta = &mut pod.metadata;
    let name = meta.name.as_deref().unwrap_or_default();
    meta.name = Some(static_pod_name(name, node_name));
    if meta.namespace.as_deref().unwrap_or_default().is_empty() {
        meta.namespace = Some("default".to_string());
    }
    meta.uid = Some(uid.to_string());
    // Stamped here rather than at admission: the status store then shares this pod
    // with the worker instead of copying it to add the stamp.
    meta.creation_timestamp
        .get_or_insert_with(|| podhost_model::k8s_time::to_k8s(chrono::Utc::now()));
    let annotations = meta.annotations.get_or_insert_with(Default::default);
    annotations.insert(ANNOTATION_CONFIG_HASH.to_string(), uid.to_string());
    annotations.insert(
        ANNOTATION_CONFIG_SOURCE.to_string(),
        origin.source_name().to_string(),
    );
    annotations.insert(ANNOTATION_CONFIG_SEEN.to_string(), seen.to_string());

    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.node_name = Some(node_name.to_string());
    if let PodOrigin::File(_) = origin {
        spec.tolerations
            .get_or_insert_with(Vec::new)
            .push(Toleration {
                operator: Some("Exists".to_string()),
                effect: Some("NoExecute".to_string()),
                ..Default::default()
            });
    }

    // A status written in the file means nothing; the pod starts Pending.
    pod.status = Some(PodStatus {
        phase: Some("Pending".to_string()),
        ..Default::default()
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    #[test]
    fn fnv128a_known_vectors() {
        assert_eq!(
            format!("{:032x}", fnv128a(b"")),
            "6c62272e07bb014262b821756295c58d"
        );
        assert_eq!(
            format!("{:032x}", fnv128a(b"a")),
            "d228cb696f1a8caf78912b704e4a8964"
        );
        // Incremental writes equal one write.
        let mut h = Fnv128a::new();
        h.write(b"fo");
        h.write(b"obar");
        assert_eq!(h.finish(), fnv128a(b"foobar"));
        assert_ne!(fnv128a(b"foobar"), fnv128a(b"foobaz"));
    }

    fn pod(name: &str, image: &str) -> Pod {
        let mut p = Pod {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        p.spec = Some(k8s_openapi::api::core::v1::PodSpec {
            containers: vec![k8s_openapi::api::core::v1::Container {
                name: "c".into(),
                image: Some(image.into()),
                ..Default::default()
            }],
            ..Default::default()
        });
        p
    }

    #[test]
    fn uid_is_stable_and_sensitive() {
        let p = Path::new("/etc/podhost/manifests/web.yaml");
        let a = static_pod_uid(&pod("web", "nginx:1"), "node1", p);
        assert_eq!(a.len(), 32);
        assert!(
            a.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_eq!(a, static_pod_uid(&pod("web", "nginx:1"), "node1", p));
        assert_ne!(a, static_pod_uid(&pod("web", "nginx:2"), "node1", p));
        assert_ne!(a, static_pod_uid(&pod("web", "nginx:1"), "node2", p));
        assert_ne!(
            a,
            static_pod_uid(&pod("web", "nginx:1"), "node1", Path::new("/other.yaml"))
        );
    }

    /// Pins the canonical serialization and the hash layout: a change here changes every
    /// static pod's UID, so every pod would restart on a podhost upgrade. The expected
    /// value was computed independently (Python FNV-128a over the same bytes).
    #[test]
    fn uid_golden_value() {
        let p = pod("web", "nginx:1");
        assert_eq!(
            serde_json::to_string(&p).unwrap(),
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"containers":[{"image":"nginx:1","name":"c"}]}}"#
        );
        assert_eq!(
            static_pod_uid(&p, "node1", Path::new("/m/web.yaml")),
            "879b169f928a51f5219147253cd40695"
        );
    }

    #[test]
    fn identity_fields() {
        let mut p = pod("web", "nginx:1");
        apply_identity(
            &mut p,
            "0123",
            "Node-A",
            "2024-01-01T00:00:00Z",
            PodOrigin::File(Path::new("/m/web.yaml")),
        );
        assert_eq!(p.metadata.name.as_deref(), Some("web-node-a"));
        assert_eq!(p.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(p.metadata.uid.as_deref(), Some("0123"));
        let ann = p.metadata.annotations.as_ref().unwrap();
        assert_eq!(ann[ANNOTATION_CONFIG_HASH], "0123");
        assert_eq!(ann[ANNOTATION_CONFIG_SOURCE], "file");
        assert_eq!(ann[ANNOTATION_CONFIG_SEEN], "2024-01-01T00:00:00Z");
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("Node-A"));
        let tol = spec.tolerations.as_ref().unwrap();
        assert_eq!(tol.len(), 1);
        assert_eq!(tol[0].operator.as_deref(), Some("Exists"));
        assert_eq!(tol[0].effect.as_deref(), Some("NoExecute"));
        assert_eq!(p.status.as_ref().unwrap().phase.as_deref(), Some("Pending"));
    }

    /// The http source's UID: the pod ‖ `url:<url>`, no node name (as the kubelet's
    /// `applyDefaults` with isFile=false). The expected value was computed
    /// independently (Python FNV-128a over the same bytes).
    #[test]
    fn http_uid_golden_value_and_node_independence() {
        let p = pod("web", "nginx:1");
        let url = "http://10.0.0.1/pods";
        let uid = http_pod_uid(&p, url);
        assert_eq!(uid, "1ed50f5733a81080d2be8087c5a56510");
        assert_eq!(pod_uid(&p, "node1", PodOrigin::Url(url)), uid);
        assert_eq!(pod_uid(&p, "node2", PodOrigin::Url(url)), uid);
        assert_ne!(http_pod_uid(&p, "http://10.0.0.1/other"), uid);
        assert_ne!(
            pod_uid(&p, "node1", PodOrigin::File(Path::new(url))),
            uid,
            "a file and a URL of the same name are different origins"
        );
    }

    #[test]
    fn http_pods_get_source_http_and_no_toleration() {
        let mut p = pod("web", "nginx:1");
        apply_identity(
            &mut p,
            "0123",
            "node-a",
            "2024-01-01T00:00:00Z",
            PodOrigin::Url("http://h/p"),
        );
        let ann = p.metadata.annotations.as_ref().unwrap();
        assert_eq!(ann[ANNOTATION_CONFIG_SOURCE], "http");
        assert_eq!(ann[ANNOTATION_CONFIG_HASH], "0123");
        assert_eq!(p.spec.as_ref().unwrap().tolerations, None);
        assert_eq!(p.metadata.name.as_deref(), Some("web-node-a"));
    }
}
