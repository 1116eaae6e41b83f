//! The rule of `podhost rmi`: an image a pod uses is not removed. A pod uses an image
//! when one of its containers names the reference, when a container runs (or ran) the
//! image's digest, or while a starting container holds a lease on the reference.

use std::collections::HashSet;

use super::error::ImageError;
use super::reference::normalize_reference;
use super::store::ImageStore;

/// What one pod uses: the images its containers name and the digests they run.
#[derive(Debug, Clone, Default)]
pub struct PodImages {
    /// The pod's name, for the refusal message.
    pub pod: String,
    /// The containers' `image` fields, as written in the spec.
    pub references: Vec<String>,
    /// The containers' `imageID`s from the pod's status.
    pub image_ids: Vec<String>,
}

/// The normalized reference to remove, or [`ImageError::InUse`] naming the pods that
/// use it ("being started" when only a lease holds it).
pub fn check_removable(
    store: &ImageStore,
    reference: &str,
    pods: &[PodImages],
    leased: &HashSet<String>,
) -> Result<String, ImageError> {
    let reference = normalize_reference(reference);
    let digest = store.resolve(&reference).ok().map(|i| i.manifest_digest);
    let users: Vec<String> = pods
        .iter()
        .filter(|p| {
            let names_it = p
                .references
                .iter()
                .any(|r| normalize_reference(r) == reference);
            let runs_it = digest
                .as_ref()
                .is_some_and(|d| p.image_ids.iter().any(|id| id == d));
            names_it || runs_it
        })
        .map(|p| p.pod.clone())
        .collect();
    if users.is_empty() && !leased.contains(&reference) {
        return Ok(reference);
    }
    Err(ImageError::InUse { reference, users })
}

/// "a, b", or "being started" when only a starting container's lease holds the image.
pub(crate) fn users_text(users: &[String]) -> String {
    if users.is_empty() {
        "being started".to_string()
    } else {
        users.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, references: &[&str], image_ids: &[&str]) -> PodImages {
        PodImages {
            pod: name.into(),
            references: references.iter().map(|s| s.to_string()).collect(),
            image_ids: image_ids.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn empty_store() -> (tempfile::TempDir, ImageStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = ImageStore::open(dir.path()).unwrap();
        (dir, store)
    }

    #[test]
    fn an_unused_image_may_go_under_its_normalized_name() {
        let (_dir, store) = empty_store();
        let pods = [pod("web", &["nginx"], &[])];
        let r = check_removable(&store, "busybox", &pods, &HashSet::new()).unwrap();
        assert_eq!(r, "docker.io/library/busybox:latest");
    }

    #[test]
    fn a_pod_naming_it_in_any_spelling_keeps_it_and_is_named() {
        let (_dir, store) = empty_store();
        let pods = [
            pod("a", &["busybox"], &[]),
            pod("b", &["nginx"], &[]),
            pod("c", &["docker.io/library/busybox:latest"], &[]),
        ];
        let err = check_removable(&store, "busybox:latest", &pods, &HashSet::new()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "image docker.io/library/busybox:latest is in use by pod(s) a, c; remove those \
             pods first"
        );
    }

    #[test]
    fn a_lease_alone_keeps_it_as_being_started() {
        let (_dir, store) = empty_store();
        let leased: HashSet<String> = ["localhost/x:1".to_string()].into();
        let err = check_removable(&store, "localhost/x:1", &[], &leased).unwrap_err();
        assert!(matches!(&err, ImageError::InUse { users, .. } if users.is_empty()));
        assert_eq!(
            err.to_string(),
            "image localhost/x:1 is in use by pod(s) being started; remove those pods first"
        );
    }

    #[test]
    fn a_digest_in_status_counts_only_when_the_store_resolves_the_reference() {
        // Not in the store: nothing to compare the pod's imageID with.
        let (_dir, store) = empty_store();
        let pods = [pod("p", &["other"], &["sha256:aa"])];
        assert!(check_removable(&store, "localhost/x:1", &pods, &HashSet::new()).is_ok());
    }
}
