//! What a pull asks the registry for: a normalized reference split into
//! registry, repository, tag and digest, checked so that it can go into a URL,
//! and turned into `oci_client` references without its (slow, regex-based)
//! parser.

use oci_client::Reference;

use super::super::reference::{
    RefParts, is_bare_digest, is_local_only, normalize_reference, split_reference,
};
use super::error::PullError;

/// A parsed, normalized reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Target {
    /// The normalized reference (the key the image is stored under).
    pub reference: String,
    /// `host[:port]`.
    pub registry: String,
    /// The repository path, e.g. `library/busybox`.
    pub repository: String,
    /// The tag, if given (or defaulted to `latest`).
    pub tag: Option<String>,
    /// The manifest digest, if given.
    pub digest: Option<String>,
}

impl Target {
    /// Normalizes `input` (`busybox` → `docker.io/library/busybox:latest`) and
    /// splits it.
    pub(super) fn parse(input: &str) -> Result<Target, PullError> {
        let reference = normalize_reference(input);
        let bad = |reason: &str| PullError::BadReference {
            reference: reference.clone(),
            reason: reason.to_string(),
        };
        if reference.is_empty() {
            return Err(bad("it is empty"));
        }
        if is_local_only(&reference) {
            return Err(PullError::LocalOnly { reference });
        }
        if is_bare_digest(&reference) {
            return Err(bad(
                "a bare digest names no repository; use NAME@sha256:...",
            ));
        }
        let RefParts { name, tag, digest } = split_reference(&reference);
        if let Some(d) = digest.filter(|d| !is_bare_digest(d)) {
            return Err(bad(&format!(
                "digest \"{d}\" is not sha256:<64 lowercase hex>"
            )));
        }
        // normalize_reference always puts a registry first.
        let Some((registry, repository)) = name.split_once('/') else {
            return Err(bad("no repository"));
        };
        if !valid_registry(registry) {
            return Err(bad(&format!("registry \"{registry}\" is not host[:port]")));
        }
        if !valid_repository(repository) {
            return Err(bad(&format!(
                "repository \"{repository}\" must be lowercase letters, digits and . _ - \
                 separated by /"
            )));
        }
        if let Some(t) = tag.filter(|t| !valid_tag(t)) {
            return Err(bad(&format!(
                "tag \"{t}\" must be 1-128 letters, digits, _ . - (not starting with . or -)"
            )));
        }
        Ok(Target {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag: tag.map(str::to_string),
            digest: digest.map(str::to_string),
            reference,
        })
    }

    /// The reference to ask for the top-level manifest: by digest when one is
    /// given (the tag is then only a label), else by tag.
    pub(super) fn manifest_ref(&self) -> Reference {
        match (&self.digest, &self.tag) {
            (Some(d), _) => self.at_digest(d),
            (None, tag) => Reference::with_tag(
                self.registry.clone(),
                self.repository.clone(),
                tag.clone().unwrap_or_else(|| "latest".to_string()),
            ),
        }
    }

    /// This repository at `digest` (a manifest or a blob).
    pub(super) fn at_digest(&self, digest: &str) -> Reference {
        Reference::with_digest(
            self.registry.clone(),
            self.repository.clone(),
            digest.to_string(),
        )
    }
}

fn valid_registry(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 255
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'))
}

fn valid_repository(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 255
        && s.split('/').all(|part| {
            !part.is_empty()
                && part.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
                })
                && part.as_bytes()[0].is_ascii_alphanumeric()
                && part.as_bytes()[part.len() - 1].is_ascii_alphanumeric()
        })
}

fn valid_tag(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && !s.starts_with(['.', '-'])
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

    #[test]
    fn splits_normalized_references() {
        let t = Target::parse("busybox").unwrap();
        assert_eq!(t.reference, "docker.io/library/busybox:latest");
        assert_eq!(
            (t.registry.as_str(), t.repository.as_str()),
            ("docker.io", "library/busybox")
        );
        assert_eq!(
            (t.tag.as_deref(), t.digest.as_deref()),
            (Some("latest"), None)
        );

        let t = Target::parse("127.0.0.1:5000/a/b:v1").unwrap();
        assert_eq!(
            (t.registry.as_str(), t.repository.as_str(), t.tag.as_deref()),
            ("127.0.0.1:5000", "a/b", Some("v1"))
        );
        let r = t.manifest_ref();
        assert_eq!(
            (r.registry(), r.repository(), r.tag(), r.digest()),
            ("127.0.0.1:5000", "a/b", Some("v1"), None)
        );

        let t = Target::parse(&format!("localhost:5000/bb@{D}")).unwrap();
        assert_eq!(t.reference, format!("localhost:5000/bb@{D}"));
        assert_eq!((t.tag.as_deref(), t.digest.as_deref()), (None, Some(D)));
        assert_eq!(t.manifest_ref().digest(), Some(D));

        let t = Target::parse(&format!("localhost:5000/bb:v2@{D}")).unwrap();
        assert_eq!(
            (t.tag.as_deref(), t.digest.as_deref()),
            (Some("v2"), Some(D))
        );
        assert_eq!(t.manifest_ref().digest(), Some(D));
    }

    #[test]
    fn rejects_what_cannot_go_into_a_url() {
        for bad in [
            "",
            D,
            "localhost:5000/BB",
            "localhost:5000/a//b",
            "localhost:5000/a?x=1",
            "localhost:5000/bb:-x",
            "localhost:5000/bb@sha256:abc",
            "localhost:5000/bb@sha512:aa",
            "bad host/x",
        ] {
            let err = Target::parse(bad).unwrap_err();
            assert!(
                matches!(err, PullError::BadReference { .. }),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn localhost_without_a_port_is_never_pulled() {
        for local in [
            "localhost/busybox",
            "localhost/busybox:latest",
            "localhost/a/b:1",
        ] {
            let err = Target::parse(local).unwrap_err();
            assert!(matches!(err, PullError::LocalOnly { .. }), "{local}: {err}");
            let msg = err.to_string();
            assert!(
                msg.contains("never pulled") && msg.contains("podhost load"),
                "{msg}"
            );
        }
        let t = Target::parse("localhost:5000/busybox").unwrap();
        assert_eq!(t.registry, "localhost:5000");
    }
}
