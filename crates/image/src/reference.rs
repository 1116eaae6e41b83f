//! Image reference normalization, following the Docker/Kubernetes rules
//! (github.com/distribution/reference `ParseNormalizedNamed` + `TagNameOnly`).

const DEFAULT_DOMAIN: &str = "docker.io";
const LEGACY_DEFAULT_DOMAIN: &str = "index.docker.io";
const OFFICIAL_REPO_PREFIX: &str = "library/";
const DEFAULT_TAG: &str = "latest";

/// Normalizes an image reference the way the kubelet and containerd do.
///
/// - `busybox` → `docker.io/library/busybox:latest`
/// - `foo/bar` → `docker.io/foo/bar:latest`
/// - `localhost/busybox` → `localhost/busybox:latest`
/// - `registry:5000/x` → `registry:5000/x:latest`
/// - `name@sha256:…` keeps the digest and gets no default tag.
///
/// A first component containing `.` or `:`, or equal to `localhost`, is a registry.
/// A bare digest (`sha256:<64 hex>`) is returned unchanged. Surrounding whitespace
/// is trimmed; anything else is kept as written (the store's lookup then fails
/// with a clear "not in the store" error for malformed names).
pub fn normalize_reference(s: &str) -> String {
    let s = s.trim();
    if s.is_empty() || is_bare_digest(s) {
        return s.to_string();
    }
    let RefParts { name, tag, digest } = split_reference(s);
    let (domain, mut remainder) = split_domain(name);
    if domain == DEFAULT_DOMAIN && !remainder.contains('/') {
        remainder = format!("{OFFICIAL_REPO_PREFIX}{remainder}");
    }

    let mut out = format!("{domain}/{remainder}");
    match (tag, digest) {
        (Some(t), _) => {
            out.push(':');
            out.push_str(t);
        }
        (None, None) => {
            out.push(':');
            out.push_str(DEFAULT_TAG);
        }
        (None, Some(_)) => {}
    }
    if let Some(d) = digest {
        out.push('@');
        out.push_str(d);
    }
    out
}

pub(crate) use podhost_model::image_ref::{RefParts, split_reference};

/// Splits `name` (no tag, no digest) into registry domain and repository path.
fn split_domain(name: &str) -> (String, String) {
    match name.split_once('/') {
        Some((first, rest))
            if first.contains('.') || first.contains(':') || first == "localhost" =>
        {
            let domain = if first == LEGACY_DEFAULT_DOMAIN {
                DEFAULT_DOMAIN
            } else {
                first
            };
            (domain.to_string(), rest.to_string())
        }
        _ => (DEFAULT_DOMAIN.to_string(), name.to_string()),
    }
}

/// True when `reference` names a local image only, by podman's convention: its
/// registry is exactly `localhost` (no port; `localhost:5000/x` is a real registry).
/// Such an image is never pulled, whatever imagePullPolicy says: it can only come
/// from `podhost load`.
pub fn is_local_only(reference: &str) -> bool {
    normalize_reference(reference)
        .split_once('/')
        .is_some_and(|(registry, _)| registry == "localhost")
}

/// What to tell a user whose local-only `reference` is not in the store. `load` is the
/// command that loads into the store in question, with the `--socket` (or `--root-dir`)
/// that reaches it: `podhost load --socket /run/x.sock`.
pub fn local_only_hint(reference: &str, load: &str) -> String {
    let reference = normalize_reference(reference);
    format!(
        "\"{reference}\" names a local image (registry \"localhost\"), which is never pulled; \
         load it with \"{load} DIR --name {reference}\" (DIR an OCI layout, oci-archive \
         or docker-archive), or build the built-in busybox with \"oci/busybox/build.sh DIR\" \
         and \"{load} DIR\" (it is localhost/busybox:latest)"
    )
}

/// True for `sha256:<64 lowercase hex>`.
pub(crate) fn is_bare_digest(s: &str) -> bool {
    s.strip_prefix("sha256:")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// The digest part of `name@sha256:…`, if any.
pub(crate) fn digest_part(reference: &str) -> Option<&str> {
    split_reference(reference).digest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_hub_short_names() {
        assert_eq!(
            normalize_reference("busybox"),
            "docker.io/library/busybox:latest"
        );
        assert_eq!(
            normalize_reference("busybox:1.36"),
            "docker.io/library/busybox:1.36"
        );
        assert_eq!(normalize_reference("foo/bar"), "docker.io/foo/bar:latest");
        assert_eq!(
            normalize_reference("foo/bar/baz:v1"),
            "docker.io/foo/bar/baz:v1"
        );
        assert_eq!(
            normalize_reference("docker.io/busybox"),
            "docker.io/library/busybox:latest"
        );
        assert_eq!(
            normalize_reference("index.docker.io/library/busybox:1"),
            "docker.io/library/busybox:1"
        );
    }

    #[test]
    fn registries() {
        assert_eq!(
            normalize_reference("localhost/busybox"),
            "localhost/busybox:latest"
        );
        assert_eq!(
            normalize_reference("localhost/busybox:latest"),
            "localhost/busybox:latest"
        );
        assert_eq!(
            normalize_reference("registry:5000/x"),
            "registry:5000/x:latest"
        );
        assert_eq!(
            normalize_reference("registry:5000/x:tag"),
            "registry:5000/x:tag"
        );
        assert_eq!(
            normalize_reference("localhost:5000/a/b"),
            "localhost:5000/a/b:latest"
        );
        assert_eq!(
            normalize_reference("registry.k8s.io/pause:3.9"),
            "registry.k8s.io/pause:3.9"
        );
        // A first component without '.', ':' or "localhost" is a Docker Hub user.
        assert_eq!(
            normalize_reference("myregistry/x"),
            "docker.io/myregistry/x:latest"
        );
    }

    #[test]
    fn digests_are_kept() {
        let d = format!("sha256:{}", "a".repeat(64));
        assert_eq!(
            normalize_reference(&format!("busybox@{d}")),
            format!("docker.io/library/busybox@{d}")
        );
        assert_eq!(
            normalize_reference(&format!("localhost/bb:1@{d}")),
            format!("localhost/bb:1@{d}")
        );
        assert_eq!(normalize_reference(&d), d);
        assert_eq!(digest_part(&format!("x@{d}")), Some(d.as_str()));
        assert!(is_bare_digest(&d));
        assert!(!is_bare_digest("sha256:abc"));
    }

    #[test]
    fn localhost_without_a_port_is_local_only() {
        assert!(is_local_only("localhost/busybox"));
        assert!(is_local_only("localhost/busybox:latest"));
        assert!(is_local_only(" localhost/a/b:1 "));
        assert!(is_local_only(&format!(
            "localhost/x@sha256:{}",
            "a".repeat(64)
        )));
        assert!(!is_local_only("localhost:5000/busybox"));
        assert!(!is_local_only("busybox"));
        assert!(!is_local_only("localhost"));
        assert!(!is_local_only("docker.io/localhost/x"));
        assert!(!is_local_only("registry.local/x"));
        let hint = local_only_hint("localhost/busybox", "podhost load --socket /s.sock");
        assert!(
            hint.contains("\"podhost load --socket /s.sock DIR --name localhost/busybox:latest\""),
            "{hint}"
        );
        assert!(
            hint.contains("\"podhost load --socket /s.sock DIR\" (it is"),
            "{hint}"
        );
        assert!(hint.contains("oci/busybox/build.sh"), "{hint}");
    }

    #[test]
    fn whitespace() {
        assert_eq!(
            normalize_reference("  busybox \n"),
            "docker.io/library/busybox:latest"
        );
    }
}
