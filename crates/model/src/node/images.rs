//! The images a Node lists in `status.images`, as the kubelet's `Images` status setter
//! writes them: one entry per image (a manifest, whatever number of references name
//! it), its names the repo digests first and then the tags (at most 5), the entries
//! largest first, at most `nodeStatusMaxImages` (50) of them. The scheduler's
//! ImageLocality plugin scores nodes by these.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::ContainerImage;

/// The kubelet's default `nodeStatusMaxImages`.
pub const MAX_IMAGES: usize = 50;
/// The kubelet's `MaxNamesPerImageInNodeStatus`.
const MAX_NAMES_PER_IMAGE: usize = 5;

/// One reference of the node's image store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredImage {
    /// The normalized reference: `repo:tag` or `repo@sha256:…`.
    pub reference: String,
    /// The digest of the manifest it names.
    pub manifest_digest: String,
    pub size_bytes: u64,
}

/// `status.images` for the store's references.
pub fn node_images(stored: &[StoredImage]) -> Vec<ContainerImage> {
    #[derive(Default)]
    struct Image {
        digests: BTreeSet<String>,
        tags: BTreeSet<String>,
        size: u64,
    }
    let mut by_manifest: BTreeMap<&str, Image> = BTreeMap::new();
    for s in stored {
        let image = by_manifest.entry(&s.manifest_digest).or_default();
        image.size = image.size.max(s.size_bytes);
        let repo = repository(&s.reference);
        image
            .digests
            .insert(format!("{repo}@{}", s.manifest_digest));
        if !s.reference.contains('@') {
            image.tags.insert(s.reference.clone());
        }
    }
    let mut images: Vec<ContainerImage> = by_manifest
        .into_values()
        .map(|i| {
            let mut names: Vec<String> = i.digests.into_iter().chain(i.tags).collect();
            names.truncate(MAX_NAMES_PER_IMAGE);
            ContainerImage {
                names: Some(names),
                size_bytes: i64::try_from(i.size).ok(),
            }
        })
        .collect();
    // Largest first; equal sizes by name, so that an unchanged store posts the same list.
    images.sort_by(|a, b| {
        b.size_bytes
            .cmp(&a.size_bytes)
            .then_with(|| a.names.cmp(&b.names))
    });
    images.truncate(MAX_IMAGES);
    images
}

/// The repository of a reference: without its `@digest` or `:tag` (a `:` before the
/// last `/` is a registry's port).
fn repository(reference: &str) -> &str {
    let without_digest = reference.split_once('@').map_or(reference, |(r, _)| r);
    match without_digest.rfind(':') {
        Some(colon) if !without_digest[colon..].contains('/') => &without_digest[..colon],
        _ => without_digest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(reference: &str, digest: &str, size: u64) -> StoredImage {
        StoredImage {
            reference: reference.into(),
            manifest_digest: digest.into(),
            size_bytes: size,
        }
    }

    fn names(image: &ContainerImage) -> Vec<&str> {
        image
            .names
            .as_deref()
            .unwrap_or_default()
            .iter()
            .map(String::as_str)
            .collect()
    }

    #[test]
    fn references_of_one_manifest_are_one_image_digests_first_largest_image_first() {
        let images = node_images(&[
            stored("localhost/busybox:latest", "sha256:bb", 2_000_000),
            stored("registry.k8s.io/pause:3.10", "sha256:aa", 300_000),
            stored("localhost/busybox:1.36", "sha256:bb", 2_000_000),
            stored("localhost:5000/app@sha256:cc", "sha256:cc", 9_000_000),
        ]);
        assert_eq!(images.len(), 3);
        assert_eq!(names(&images[0]), ["localhost:5000/app@sha256:cc"]);
        assert_eq!(images[0].size_bytes, Some(9_000_000));
        assert_eq!(
            names(&images[1]),
            [
                "localhost/busybox@sha256:bb",
                "localhost/busybox:1.36",
                "localhost/busybox:latest"
            ]
        );
        assert_eq!(
            names(&images[2]),
            [
                "registry.k8s.io/pause@sha256:aa",
                "registry.k8s.io/pause:3.10"
            ]
        );
    }

    #[test]
    fn a_registry_port_is_not_a_tag() {
        assert_eq!(repository("localhost:5000/app:v1"), "localhost:5000/app");
        assert_eq!(repository("localhost:5000/app"), "localhost:5000/app");
        assert_eq!(
            repository("localhost:5000/app@sha256:cc"),
            "localhost:5000/app"
        );
    }

    #[test]
    fn at_most_five_names_and_fifty_images() {
        let many_tags: Vec<StoredImage> = (0..8)
            .map(|i| stored(&format!("x/app:v{i}"), "sha256:aa", 10))
            .collect();
        let images = node_images(&many_tags);
        assert_eq!(names(&images[0]).len(), 5);
        assert_eq!(names(&images[0])[0], "x/app@sha256:aa");
        let many_images: Vec<StoredImage> = (0..60)
            .map(|i| stored(&format!("x/app{i}:v1"), &format!("sha256:{i:02}"), i))
            .collect();
        let images = node_images(&many_images);
        assert_eq!(images.len(), MAX_IMAGES);
        // The 50 largest: sizes 59 down to 10.
        assert_eq!(images[0].size_bytes, Some(59));
        assert_eq!(images[49].size_bytes, Some(10));
    }
}
