//! Image references cut into their parts, as written: pure, shared by `image` (which
//! normalizes and resolves them) and `source` (which derives the default pull policy).

/// An image reference cut into its parts, as written (not normalized, not checked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefParts<'a> {
    /// Registry (if written) and repository: everything before the tag and digest.
    pub name: &'a str,
    pub tag: Option<&'a str>,
    pub digest: Option<&'a str>,
}

/// Splits `name[:tag][@digest]`: the digest follows the first `@`; the tag follows the
/// last `:` after the last `/` (a `:` before it is a registry's port).
pub fn split_reference(reference: &str) -> RefParts<'_> {
    let (name_and_tag, digest) = match reference.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (reference, None),
    };
    let last_slash = name_and_tag.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match name_and_tag[last_slash..].rfind(':') {
        Some(i) => (
            &name_and_tag[..last_slash + i],
            Some(&name_and_tag[last_slash + i + 1..]),
        ),
        None => (name_and_tag, None),
    };
    RefParts { name, tag, digest }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_reference_tells_a_port_from_a_tag() {
        let parts = |name, tag, digest| RefParts { name, tag, digest };
        assert_eq!(split_reference("busybox"), parts("busybox", None, None));
        assert_eq!(
            split_reference("registry:5000/x"),
            parts("registry:5000/x", None, None)
        );
        assert_eq!(
            split_reference("registry:5000/a/b:v1@sha256:ab"),
            parts("registry:5000/a/b", Some("v1"), Some("sha256:ab"))
        );
        assert_eq!(
            split_reference("x@sha256:ab"),
            parts("x", None, Some("sha256:ab"))
        );
        assert_eq!(split_reference("x:"), parts("x", Some(""), None));
    }
}
