//! The image store's error type. Every message names the file, blob or reference
//! involved and, where the user can do something about it, what to do.

use std::io;
use std::path::PathBuf;

/// Errors of the image store (`podhost load`, image resolution for the runtime).
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// A filesystem operation on a store or source path failed.
    #[error("image store: cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done ("create", "read", "rename", ...).
        action: &'static str,
        /// The path the operation was applied to.
        path: PathBuf,
        /// The underlying OS error.
        #[source]
        source: io::Error,
    },

    /// The reference is not in the store.
    #[error("image \"{reference}\" is not in the store; load it with \"podhost load PATH\"")]
    NotFound {
        /// The normalized reference (or digest) that was looked up.
        reference: String,
    },

    /// The path given to `load` is neither an OCI image layout directory nor an
    /// oci-archive or docker-archive tar (optionally gzipped), or is a damaged one.
    #[error(
        "{} is not a usable OCI image layout, oci-archive or docker-archive: {reason}; build one with \
         \"skopeo copy ... oci-archive:FILE:NAME\" or oci/busybox/build.sh", path.display()
    )]
    NotALayout {
        /// The path given to `load`.
        path: PathBuf,
        /// Why it was not accepted.
        reason: String,
    },

    /// A manifest is named only by a tag ("latest") and the source's file name
    /// cannot be the repository to go with it.
    #[error(
        "{}: manifest {digest} is named only \"{tag}\" (org.opencontainers.image.ref.name) and \
         the file name cannot serve as its repository; give it one with \
         \"podhost load {} --name localhost/NAME:TAG\"", path.display(), path.display()
    )]
    UnnamableTag {
        /// The layout or archive being loaded.
        path: PathBuf,
        /// The manifest's digest.
        digest: String,
        /// The tag-only name found.
        tag: String,
    },

    /// Several manifests carry a bare word (a tag or short name), so which image
    /// is which cannot be told.
    #[error(
        "{}: several manifests are named only by a tag or short name ({entries}); load one at \
         a time with \"podhost load {} --name localhost/NAME:TAG\" (TAG picks the manifest \
         of that tag), or export them with full names", path.display(), path.display()
    )]
    AmbiguousNames {
        /// The layout or archive being loaded.
        path: PathBuf,
        /// `digest "name"` of each, comma-separated.
        entries: String,
    },

    /// `load --name REF` on a source of several images, none of which REF names.
    #[error(
        "{}: --name {name}: the source holds several images ({entries}) and none is named \
         {name} or by its tag; name one of them", path.display()
    )]
    NameMatchesNone {
        /// The layout or archive being loaded.
        path: PathBuf,
        /// The normalized `--name`.
        name: String,
        /// `digest "name"` of each image, comma-separated.
        entries: String,
    },

    /// `load --name REF` with a REF that cannot name an image.
    #[error("--name \"{name}\": {reason}")]
    BadLoadName {
        /// The name as given.
        name: String,
        /// What is wrong with it.
        reason: String,
    },

    /// The layout has no manifest that carries a name, so there is nothing to refer to.
    #[error(
        "{}: no image in it has a name (org.opencontainers.image.ref.name, \
         io.containerd.image.name or RepoTags); name it with \"podhost load {} --name \
         localhost/NAME:TAG\"", path.display(), path.display()
    )]
    NoNamedImages {
        /// The layout or archive being loaded.
        path: PathBuf,
    },

    /// A JSON document (index, manifest, config, store index) could not be parsed.
    #[error("cannot parse {what}: {reason}")]
    BadJson {
        /// Which document (path or digest).
        what: String,
        /// The parser's message.
        reason: String,
    },

    /// Content did not match the digest or size it was announced with.
    #[error(
        "{what}: content does not match its descriptor (expected {expected}, got {actual}); \
         the source is corrupt, rebuild or re-export it"
    )]
    DigestMismatch {
        /// The blob or layer being checked, with where it came from.
        what: String,
        /// The digest (or size) announced.
        expected: String,
        /// The digest (or size) computed.
        actual: String,
    },

    /// A digest string is malformed or uses an algorithm other than sha256.
    #[error("unsupported or malformed digest \"{digest}\": only sha256:<64 hex> is supported")]
    BadDigest {
        /// The digest as given.
        digest: String,
    },

    /// A blob referenced by an index or manifest is absent.
    #[error("blob {digest} is missing from {}; the layout is incomplete, re-export it", source_path.display())]
    MissingBlob {
        /// The digest of the missing blob.
        digest: String,
        /// Where it was looked for.
        source_path: PathBuf,
    },

    /// A descriptor has a media type podhost does not know how to handle.
    #[error("{digest}: unsupported media type \"{media_type}\"")]
    UnsupportedMediaType {
        /// The blob's digest.
        digest: String,
        /// Its media type.
        media_type: String,
    },

    /// An image index has no manifest for this host's platform.
    #[error("image index {digest} has no manifest for {platform}; load an image built for it")]
    NoMatchingPlatform {
        /// The index's digest.
        digest: String,
        /// The wanted platform, "linux/amd64".
        platform: String,
    },

    /// A layer entry would write outside its snapshot or through a symlink.
    #[error(
        "layer {layer}: refusing entry \"{entry}\": {reason}; the image is malformed or hostile"
    )]
    UnsafeEntry {
        /// The layer's digest.
        layer: String,
        /// The entry's path as written in the tar.
        entry: String,
        /// Why it was refused.
        reason: String,
    },

    /// Unpacking a layer entry failed.
    #[error("layer {layer}: cannot unpack \"{entry}\": {source}")]
    Unpack {
        /// The layer's digest.
        layer: String,
        /// The entry's path as written in the tar.
        entry: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },

    /// A layer uses a compression podhost does not support (zstd).
    #[error("layer {layer}: {compression} compression is not supported; re-export with gzip")]
    UnsupportedCompression {
        /// The layer's digest.
        layer: String,
        /// The compression detected.
        compression: &'static str,
    },

    /// `rmi` of an image a pod uses (or a starting container holds).
    #[error(
        "image {reference} is in use by pod(s) {}; remove those pods first",
        super::in_use::users_text(users)
    )]
    InUse {
        /// The normalized reference.
        reference: String,
        /// The pods that use it; empty when only a lease holds it.
        users: Vec<String>,
    },

    /// The store's own files are damaged.
    #[error("image store file {} is damaged: {reason}; remove it and load the images again", path.display())]
    Corrupt {
        /// The damaged file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

impl ImageError {
    /// Wraps an io error with the action and path it belongs to.
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        ImageError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// The store's atomic writes go through `disk`; its errors keep their action and path.
impl From<podhost_disk::DiskError> for ImageError {
    fn from(e: podhost_disk::DiskError) -> Self {
        match e {
            podhost_disk::DiskError::Io { what, path, source } => {
                ImageError::io(what, path, source)
            }
            podhost_disk::DiskError::Json { path, source } => ImageError::Corrupt {
                path,
                reason: source.to_string(),
            },
        }
    }
}

/// Shorthand for `.map_err(|e| ImageError::io(action, path, e))`.
pub(crate) trait IoContext<T> {
    /// Attaches the action and path to an io error.
    fn ctx(self, action: &'static str, path: &std::path::Path) -> Result<T, ImageError>;
}

impl<T> IoContext<T> for Result<T, io::Error> {
    fn ctx(self, action: &'static str, path: &std::path::Path) -> Result<T, ImageError> {
        self.map_err(|e| ImageError::io(action, path, e))
    }
}

/// An error's message followed by its causes: oci-spec's errors say only "serde
/// failed" and keep the parser's line, column and reason in their source.
pub(crate) fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}
