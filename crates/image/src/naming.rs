//! Which reference each image of a loaded layout or archive gets.
//!
//! An `org.opencontainers.image.ref.name` (or `io.containerd.image.name`) is:
//!
//! - a full reference (it has a `/`, `:` or `@`): normalized by the Kubernetes
//!   rules (`busybox:1.36` is `docker.io/library/busybox:1.36`);
//! - a bare word, which tools write for a tag (`umoci new --image D:latest`,
//!   `skopeo copy … oci:D:latest`) or a short name (`skopeo copy … oci:D:busybox`).
//!   podman names such an image `localhost/<word>:latest` whatever the word, which
//!   turns `latest` into `localhost/latest:latest`. podhost tells the two apart:
//!   a word that cannot be a repository name or reads as a version (`latest`,
//!   `1.36`, `v2`, `Stable`) is a tag T and names `localhost/<D>:T`, D being the
//!   layout directory's (or archive file's) name, as the user gave it to the tool;
//!   any other word W is a short name and names `localhost/W:latest`.
//!   Bare words on different manifests are refused (which is which image?);
//!   `--name` settles it. Several bare words on one manifest (umoci writes
//!   `busybox` and `latest` for the same digest) are one image under each name.
//!
//! `podhost load SOURCE --name REF` names one image REF (a full reference with a
//! registry or repository path, such as `localhost/busybox:1`): the only image of
//! SOURCE (however many entries list its digest), or the one whose name is REF or
//! REF's tag. Only that image is loaded.

use std::path::Path;

use super::error::ImageError;
use super::reference::{normalize_reference, split_reference};

const LOCAL_REGISTRY: &str = "localhost";
const DEFAULT_TAG: &str = "latest";

/// The name an index.json entry carries, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RawName {
    /// A reference with a `/`, `:` or `@`.
    Full(String),
    /// A word alone: a tag or a short name.
    Bare(String),
    /// No name annotation.
    Unnamed,
}

impl RawName {
    /// Classifies an annotation value (trimmed; empty is no name).
    pub(crate) fn of(value: Option<&str>) -> RawName {
        match value.map(str::trim).filter(|v| !v.is_empty()) {
            None => RawName::Unnamed,
            Some(v) if v.contains(['/', ':', '@']) => RawName::Full(v.to_string()),
            Some(v) => RawName::Bare(v.to_string()),
        }
    }

    fn shown(&self) -> String {
        match self {
            RawName::Full(v) | RawName::Bare(v) => format!("\"{v}\""),
            RawName::Unnamed => "no name".to_string(),
        }
    }
}

/// One index.json entry to name: its manifest (or index) digest and raw name.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub digest: String,
    pub raw: RawName,
}

/// The normalized reference of each entry (`None`: not loaded), in order.
/// `source` is the path given to `load`; `name` its `--name`.
pub(crate) fn assign(
    source: &Path,
    entries: &[Entry],
    name: Option<&str>,
) -> Result<Vec<Option<String>>, ImageError> {
    match name {
        Some(name) => assign_given(source, entries, name),
        None => assign_from_annotations(source, entries),
    }
}

fn assign_from_annotations(
    source: &Path,
    entries: &[Entry],
) -> Result<Vec<Option<String>>, ImageError> {
    let bare: Vec<&Entry> = entries
        .iter()
        .filter(|e| matches!(e.raw, RawName::Bare(_)))
        .collect();
    if distinct_digests(&bare).len() > 1 {
        return Err(ImageError::AmbiguousNames {
            path: source.to_path_buf(),
            entries: listing(&bare),
        });
    }
    entries
        .iter()
        .map(|e| match &e.raw {
            RawName::Full(v) => Ok(Some(normalize_reference(v))),
            RawName::Bare(word) => bare_word_reference(source, word, &e.digest).map(Some),
            RawName::Unnamed => Ok(None),
        })
        .collect()
}

fn assign_given(
    source: &Path,
    entries: &[Entry],
    name: &str,
) -> Result<Vec<Option<String>>, ImageError> {
    let reference = checked_name(name)?;
    let all: Vec<&Entry> = entries.iter().collect();
    let images = distinct_digests(&all);
    let chosen = match images.as_slice() {
        // One image, however many names index.json lists it under.
        [only] => *only,
        _ => {
            let tag = tag_of(&reference);
            let matching: Vec<&Entry> = entries
                .iter()
                .filter(|e| match &e.raw {
                    RawName::Full(v) => normalize_reference(v) == reference,
                    RawName::Bare(w) => Some(w.as_str()) == tag,
                    RawName::Unnamed => false,
                })
                .collect();
            match distinct_digests(&matching).as_slice() {
                [one] => *one,
                _ => {
                    return Err(ImageError::NameMatchesNone {
                        path: source.to_path_buf(),
                        name: reference,
                        entries: listing(&all),
                    });
                }
            }
        }
    };
    // The image is loaded once, under REF: the first entry of its digest carries it.
    let first = entries.iter().position(|e| e.digest == chosen);
    Ok((0..entries.len())
        .map(|i| (Some(i) == first).then(|| reference.clone()))
        .collect())
}

/// The digests of `entries`, each once, in order.
fn distinct_digests<'a>(entries: &[&'a Entry]) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for e in entries {
        if !out.contains(&e.digest.as_str()) {
            out.push(&e.digest);
        }
    }
    out
}

/// `--name`: a full reference that names an image (no digest).
fn checked_name(name: &str) -> Result<String, ImageError> {
    let bad = |reason: &str| ImageError::BadLoadName {
        name: name.to_string(),
        reason: reason.to_string(),
    };
    let name = name.trim();
    if !name.contains('/') {
        return Err(bad(
            "give a full reference with a registry or repository path, e.g. localhost/busybox:latest",
        ));
    }
    if name.contains('@') {
        return Err(bad(
            "a digest names content, not a name to give it; use NAME:TAG",
        ));
    }
    let reference = normalize_reference(name);
    let (registry, rest) = reference.split_once('/').unwrap_or_default();
    let (repository, tag) = rest.rsplit_once(':').unwrap_or((rest, DEFAULT_TAG));
    if registry.is_empty() || !repository.split('/').all(is_repository_component) || !is_tag(tag) {
        return Err(bad(
            "not a valid reference: the repository is lowercase letters, digits and . _ - \
             separated by /, the tag 1-128 letters, digits, _ . -",
        ));
    }
    Ok(reference)
}

/// The tag of a normalized `registry/repo:tag`.
fn tag_of(reference: &str) -> Option<&str> {
    split_reference(reference).tag
}

/// `localhost/<dir>:<tag>` for a tag, `localhost/<word>:latest` for a short name.
fn bare_word_reference(source: &Path, word: &str, digest: &str) -> Result<String, ImageError> {
    if !reads_as_tag(word) {
        return Ok(format!("{LOCAL_REGISTRY}/{word}:{DEFAULT_TAG}"));
    }
    let stem = source_stem(source);
    match stem.filter(|s| is_repository_component(s)) {
        Some(repo) if is_tag(word) => Ok(format!("{LOCAL_REGISTRY}/{repo}:{word}")),
        _ => Err(ImageError::UnnamableTag {
            path: source.to_path_buf(),
            digest: digest.to_string(),
            tag: word.to_string(),
        }),
    }
}

/// A bare word that is a tag rather than a repository name: not a valid
/// repository component (capitals, a leading `_`), or a version (`latest`,
/// starting with a digit, or `v` and a digit).
fn reads_as_tag(word: &str) -> bool {
    let b = word.as_bytes();
    word == DEFAULT_TAG
        || !is_repository_component(word)
        || b.first().is_some_and(u8::is_ascii_digit)
        || (b.first() == Some(&b'v') && b.get(1).is_some_and(u8::is_ascii_digit))
}

/// The layout directory's name, or the archive's without `.tar`, `.tar.gz`, `.tgz`.
fn source_stem(source: &Path) -> Option<String> {
    let name = source.file_name()?.to_str()?;
    let stem = [".tar.gz", ".tgz", ".tar"]
        .iter()
        .find_map(|ext| name.strip_suffix(ext))
        .unwrap_or(name);
    Some(stem.to_string())
}

/// One path component of a repository: `[a-z0-9]+` joined by `.`, `_`, `__` or `-`s.
fn is_repository_component(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    if b.is_empty() || !alnum(&b[0]) || !alnum(&b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if alnum(&b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && !alnum(&b[i]) {
            i += 1;
        }
        let sep = &s[start..i];
        let ok = sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|c| c == b'-');
        if !ok {
            return false;
        }
    }
    true
}

/// A tag: `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`.
fn is_tag(s: &str) -> bool {
    let b = s.as_bytes();
    let word = |c: &u8| c.is_ascii_alphanumeric() || *c == b'_';
    !b.is_empty()
        && b.len() <= 128
        && word(&b[0])
        && b.iter().all(|c| word(c) || *c == b'.' || *c == b'-')
}

/// `sha256:… "busybox" "latest"` per image for an error message: each digest once,
/// with every name index.json lists it under.
fn listing(entries: &[&Entry]) -> String {
    distinct_digests(entries)
        .into_iter()
        .map(|digest| {
            let names: Vec<String> = entries
                .iter()
                .filter(|e| e.digest == digest)
                .map(|e| e.raw.shown())
                .collect();
            format!("{digest} {}", names.join(" "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(digest: &str, raw: RawName) -> Entry {
        Entry {
            digest: digest.to_string(),
            raw,
        }
    }
    fn bare(w: &str) -> RawName {
        RawName::Bare(w.to_string())
    }

    #[test]
    fn raw_names_are_classified() {
        assert_eq!(RawName::of(Some(" latest ")), bare("latest"));
        assert_eq!(RawName::of(Some("")), RawName::Unnamed);
        assert_eq!(RawName::of(None), RawName::Unnamed);
        assert_eq!(
            RawName::of(Some("busybox:1")),
            RawName::Full("busybox:1".into())
        );
        assert_eq!(
            RawName::of(Some("localhost/x")),
            RawName::Full("localhost/x".into())
        );
    }

    #[test]
    fn a_bare_tag_takes_the_directory_name_and_a_short_name_is_localhost() {
        let dir = Path::new("/tmp/x/busybox");
        let one = |w: &str| assign(dir, &[entry("sha256:a", bare(w))], None);
        assert_eq!(
            one("latest").unwrap(),
            [Some("localhost/busybox:latest".into())]
        );
        assert_eq!(
            one("1.36").unwrap(),
            [Some("localhost/busybox:1.36".into())]
        );
        assert_eq!(one("v2").unwrap(), [Some("localhost/busybox:v2".into())]);
        assert_eq!(
            one("Stable").unwrap(),
            [Some("localhost/busybox:Stable".into())]
        );
        assert_eq!(
            one("alpine").unwrap(),
            [Some("localhost/alpine:latest".into())]
        );
        assert_eq!(
            one("my-app").unwrap(),
            [Some("localhost/my-app:latest".into())]
        );
        // Archives: the file name without its extension.
        let tar = Path::new("/tmp/app.tar.gz");
        let r = assign(tar, &[entry("sha256:a", bare("latest"))], None).unwrap();
        assert_eq!(r, [Some("localhost/app:latest".into())]);
        // A directory that cannot be a repository name: --name is needed.
        let odd = Path::new("/tmp/My Layout");
        let err = assign(odd, &[entry("sha256:a", bare("latest"))], None).unwrap_err();
        assert!(matches!(err, ImageError::UnnamableTag { .. }), "{err}");
        assert!(err.to_string().contains("--name"), "{err}");
    }

    #[test]
    fn full_names_keep_the_kubernetes_rules_and_unnamed_are_skipped() {
        let entries = [
            entry("sha256:a", RawName::Full("busybox:1".into())),
            entry("sha256:b", RawName::Unnamed),
            entry("sha256:c", bare("latest")),
        ];
        let r = assign(Path::new("/l/bb"), &entries, None).unwrap();
        assert_eq!(
            r,
            [
                Some("docker.io/library/busybox:1".into()),
                None,
                Some("localhost/bb:latest".into())
            ]
        );
    }

    #[test]
    fn several_bare_names_are_ambiguous_and_listed() {
        let entries = [entry("sha256:a", bare("v1")), entry("sha256:b", bare("v2"))];
        let err = assign(Path::new("/l/bb"), &entries, None).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, ImageError::AmbiguousNames { .. }), "{msg}");
        assert!(
            msg.contains("sha256:a \"v1\"") && msg.contains("sha256:b \"v2\""),
            "{msg}"
        );
        assert!(msg.contains("--name"), "{msg}");
    }

    #[test]
    fn name_picks_the_only_image_or_the_one_it_names() {
        let dir = Path::new("/l/bb");
        let only = [entry("sha256:a", RawName::Unnamed)];
        assert_eq!(
            assign(dir, &only, Some("localhost/bb")).unwrap(),
            [Some("localhost/bb:latest".into())]
        );
        let two = [entry("sha256:a", bare("v1")), entry("sha256:b", bare("v2"))];
        assert_eq!(
            assign(dir, &two, Some("localhost/bb:v2")).unwrap(),
            [None, Some("localhost/bb:v2".into())]
        );
        let err = assign(dir, &two, Some("localhost/bb:v3")).unwrap_err();
        assert!(matches!(err, ImageError::NameMatchesNone { .. }), "{err}");
        assert!(err.to_string().contains("sha256:a \"v1\""), "{err}");
        let full = [
            entry("sha256:a", RawName::Full("localhost/x:1".into())),
            entry("sha256:b", RawName::Full("localhost/y:1".into())),
        ];
        assert_eq!(
            assign(dir, &full, Some("localhost/y:1")).unwrap(),
            [None, Some("localhost/y:1".into())]
        );
    }

    /// umoci's index.json: one manifest listed twice, as `busybox` and `latest`.
    fn umoci_two_tags() -> [Entry; 2] {
        [
            entry("sha256:a", bare("busybox")),
            entry("sha256:a", bare("latest")),
        ]
    }

    #[test]
    fn one_manifest_under_several_names_is_one_image_for_name() {
        let dir = Path::new("/l/bb");
        // --name with a tag the layout does not list: still that one image, once.
        assert_eq!(
            assign(dir, &umoci_two_tags(), Some("localhost/mine:1")).unwrap(),
            [Some("localhost/mine:1".into()), None]
        );
        // With an unnamed entry of the same digest too.
        let three = [
            entry("sha256:a", RawName::Unnamed),
            entry("sha256:a", RawName::Full("localhost/x:1".into())),
            entry("sha256:a", bare("v1")),
        ];
        assert_eq!(
            assign(dir, &three, Some("localhost/y:2")).unwrap(),
            [Some("localhost/y:2".into()), None, None]
        );
        // Two images: the tag picks the one that lists it, loaded once.
        let two = [
            entry("sha256:a", bare("busybox")),
            entry("sha256:a", bare("latest")),
            entry("sha256:b", bare("v2")),
        ];
        assert_eq!(
            assign(dir, &two, Some("localhost/bb:latest")).unwrap(),
            [Some("localhost/bb:latest".into()), None, None]
        );
        assert_eq!(
            assign(dir, &two, Some("localhost/bb:v2")).unwrap(),
            [None, None, Some("localhost/bb:v2".into())]
        );
        // Different digests and no name matching: refused, each image listed once
        // with all its names.
        let err = assign(dir, &two, Some("localhost/bb:v9")).unwrap_err();
        assert!(matches!(err, ImageError::NameMatchesNone { .. }), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains("sha256:a \"busybox\" \"latest\", sha256:b \"v2\""),
            "{msg}"
        );
    }

    #[test]
    fn one_manifest_under_several_bare_names_keeps_each_name() {
        let r = assign(Path::new("/l/bb"), &umoci_two_tags(), None).unwrap();
        assert_eq!(
            r,
            [
                Some("localhost/busybox:latest".into()),
                Some("localhost/bb:latest".into())
            ]
        );
        // Bare names on two digests stay ambiguous.
        let two = [
            entry("sha256:a", bare("busybox")),
            entry("sha256:a", bare("latest")),
            entry("sha256:b", bare("v2")),
        ];
        let err = assign(Path::new("/l/bb"), &two, None).unwrap_err();
        assert!(matches!(err, ImageError::AmbiguousNames { .. }), "{err}");
    }

    #[test]
    fn name_must_be_a_full_reference() {
        let one = [entry("sha256:a", RawName::Unnamed)];
        for bad in [
            "busybox",
            "latest",
            "localhost/BB",
            "localhost/x@sha256:ab",
            "localhost/x:-t",
        ] {
            let err = assign(Path::new("/l"), &one, Some(bad)).unwrap_err();
            assert!(
                matches!(err, ImageError::BadLoadName { .. }),
                "{bad}: {err}"
            );
        }
        assert_eq!(
            assign(Path::new("/l"), &one, Some("docker.io/library/busybox:1")).unwrap(),
            [Some("docker.io/library/busybox:1".into())]
        );
        assert_eq!(
            assign(Path::new("/l"), &one, Some("localhost:5000/a/b")).unwrap(),
            [Some("localhost:5000/a/b:latest".into())]
        );
    }

    #[test]
    fn repository_components() {
        for ok in ["a", "busybox", "my-app", "a.b", "a_b", "a__b", "a--b", "0x"] {
            assert!(is_repository_component(ok), "{ok}");
        }
        for bad in ["", "A", "-a", "a-", "a..b", "a___b", "a b", "_a"] {
            assert!(!is_repository_component(bad), "{bad}");
        }
    }
}
