//! `Clone` for [`ManifestError`]: merging the manifest directory's scans with the
//! manifest URL's answers re-sends each source's latest errors with every merged scan,
//! and the manager recognises an error it already reported by its text. The I/O and
//! parser errors inside are not `Clone`; their copies keep the kind and the message,
//! so a copy displays exactly as the original.

use serde::de::Error as _;

use super::error::ManifestError;

fn copy_io(e: &std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), e.to_string())
}

impl Clone for ManifestError {
    fn clone(&self) -> Self {
        match self {
            Self::DirMissing { path } => Self::DirMissing { path: path.clone() },
            Self::DirRead { path, source } => Self::DirRead {
                path: path.clone(),
                source: copy_io(source),
            },
            Self::Subdirectory { path } => Self::Subdirectory { path: path.clone() },
            Self::NotAFile { path } => Self::NotAFile { path: path.clone() },
            Self::Read { path, source } => Self::Read {
                path: path.clone(),
                source: copy_io(source),
            },
            Self::TooLarge { path, size, limit } => Self::TooLarge {
                path: path.clone(),
                size: *size,
                limit: *limit,
            },
            Self::Empty { path } => Self::Empty { path: path.clone() },
            Self::Yaml { path, source } => Self::Yaml {
                path: path.clone(),
                source: serde_yaml_ng::Error::custom(source.to_string()),
            },
            Self::MultipleDocuments { path, count } => Self::MultipleDocuments {
                path: path.clone(),
                count: *count,
            },
            Self::WrongKind { path, found } => Self::WrongKind {
                path: path.clone(),
                found: found.clone(),
            },
            Self::WrongApiVersion { path, found } => Self::WrongApiVersion {
                path: path.clone(),
                found: found.clone(),
            },
            Self::Decode {
                path,
                field,
                source,
            } => Self::Decode {
                path: path.clone(),
                field: field.clone(),
                source: serde_json::Error::custom(source.to_string()),
            },
            Self::UnknownFields { path, fields } => Self::UnknownFields {
                path: path.clone(),
                fields: fields.clone(),
            },
            Self::MissingName { path } => Self::MissingName { path: path.clone() },
            Self::NoContainers { path } => Self::NoContainers { path: path.clone() },
            Self::MissingContainerField {
                path,
                container,
                field,
                hint,
            } => Self::MissingContainerField {
                path: path.clone(),
                container: container.clone(),
                field,
                hint,
            },
            Self::Invalid { path, errors } => Self::Invalid {
                path: path.clone(),
                errors: errors.clone(),
            },
            Self::DuplicatePod {
                path,
                first,
                namespace,
                name,
            } => Self::DuplicatePod {
                path: path.clone(),
                first: first.clone(),
                namespace: namespace.clone(),
                name: name.clone(),
            },
            Self::UrlFetch { url, reason } => Self::UrlFetch {
                url: url.clone(),
                reason: reason.clone(),
            },
            Self::UrlStatus { url, status } => Self::UrlStatus {
                url: url.clone(),
                status: status.clone(),
            },
            Self::UrlTooLarge { url, limit } => Self::UrlTooLarge {
                url: url.clone(),
                limit: *limit,
            },
            Self::UrlWrongKind { url, found } => Self::UrlWrongKind {
                url: url.clone(),
                found: found.clone(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::scan_dir;

    /// A copy must display as the original: the manager matches errors by their text.
    #[test]
    fn copies_display_as_the_originals() {
        let dir = tempfile::tempdir().unwrap();
        let cases: [(&str, &[u8]); 4] = [
            ("a-yaml.yaml", b"metadata: [unclosed"),
            ("b-decode.yaml", b"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers:\n  - {name: c, image: i, stdin: 3}\n"),
            ("c-empty.yaml", b"# nothing\n"),
            ("d-unknown.yaml", b"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers:\n  - {name: c, image: i, comand: [x]}\n"),
        ];
        for (name, body) in cases {
            std::fs::write(dir.path().join(name), body).unwrap();
        }
        std::fs::create_dir(dir.path().join("e-subdir")).unwrap();
        let scan = scan_dir(dir.path(), "node");
        assert_eq!(scan.errors.len(), 5, "{:?}", scan.errors);
        for e in &scan.errors {
            assert_eq!(e.clone().to_string(), e.to_string());
            assert_eq!(e.clone().path(), e.path());
        }
        let unreadable = ManifestError::Read {
            path: Path::new("/x").into(),
            source: std::io::Error::from_raw_os_error(13),
        };
        assert_eq!(unreadable.clone().to_string(), unreadable.to_string());
    }
}
