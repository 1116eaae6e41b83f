//! Errors of the static-pod source. Every message names the manifest file, the field
//! (as a JSON path such as `spec.containers[0].image`) and what the user should do.

use std::path::{Path, PathBuf};

/// Largest manifest podhost reads, as the kubelet's `maxConfigLength` (10 MiB).
pub const MAX_MANIFEST_BYTES: u64 = 10 * 1024 * 1024;

/// Why a manifest file (or the manifest directory) could not be turned into a pod.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The manifest directory does not exist (yet). Not fatal: the directory is
    /// watched and re-read until it appears.
    #[error(
        "manifest directory {}: does not exist; create it or pass the right --manifest-dir",
        path.display()
    )]
    DirMissing {
        /// The manifest directory.
        path: PathBuf,
    },

    /// The manifest directory exists but could not be listed.
    #[error(
        "manifest directory {}: cannot be read: {source}; check that it is a readable directory",
        path.display()
    )]
    DirRead {
        /// The manifest directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },

    /// A subdirectory inside the manifest directory. Manifests are not searched
    /// recursively (as the kubelet); the entry is skipped.
    #[error(
        "manifest {}: is a directory; subdirectories are not read, move its manifests up one level or remove it",
        path.display()
    )]
    Subdirectory {
        /// The subdirectory.
        path: PathBuf,
    },

    /// The path is neither a regular file nor a directory (a FIFO, a socket, a device).
    #[error("manifest {}: is not a regular file; remove it from the manifest directory", path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
    },

    /// The file could not be read.
    #[error("manifest {}: cannot be read: {source}; check that the file exists and is readable", path.display())]
    Read {
        /// The manifest file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },

    /// The file is larger than [`MAX_MANIFEST_BYTES`].
    #[error(
        "manifest {}: is {size} bytes, more than the limit of {limit} bytes; a Pod manifest is never that large, check that this is the right file",
        path.display()
    )]
    TooLarge {
        /// The manifest file.
        path: PathBuf,
        /// Its size in bytes (at least `limit + 1`).
        size: u64,
        /// The limit in bytes.
        limit: u64,
    },

    /// The file is empty or holds only comments.
    #[error("manifest {}: is empty; write a v1 Pod manifest into it or remove the file", path.display())]
    Empty {
        /// The manifest file.
        path: PathBuf,
    },

    /// The file is not valid YAML (or JSON).
    #[error("manifest {}: invalid YAML: {source}; fix the syntax (indentation, quoting)", path.display())]
    Yaml {
        /// The manifest file.
        path: PathBuf,
        /// The parser error, with line and column.
        #[source]
        source: serde_yaml_ng::Error,
    },

    /// The file holds more than one YAML document. A static-pod manifest holds exactly
    /// one Pod (as the kubelet).
    #[error(
        "manifest {}: holds {count} YAML documents, expected kind Pod (one Pod per file); split it into one file per pod",
        path.display()
    )]
    MultipleDocuments {
        /// The manifest file.
        path: PathBuf,
        /// How many non-empty documents it holds.
        count: usize,
    },

    /// The top-level object is not a Pod (for example a PodList or a Deployment), or
    /// not an object at all.
    #[error(
        "manifest {}: expected kind Pod, found {found}; a static-pod manifest holds exactly one `kind: Pod`",
        path.display()
    )]
    WrongKind {
        /// The manifest file.
        path: PathBuf,
        /// What was found instead (a kind, or a description such as "no kind").
        found: String,
    },

    /// `apiVersion` is not `v1`.
    #[error("manifest {}: apiVersion: expected \"v1\", found {found}; set `apiVersion: v1`", path.display())]
    WrongApiVersion {
        /// The manifest file.
        path: PathBuf,
        /// What was found instead (quoted, or "nothing").
        found: String,
    },

    /// A value has the wrong type, for example a number where the API wants a string.
    #[error(
        "manifest {}: {field}: {source}; fix the value (quote numbers and booleans that must be strings)",
        path.display()
    )]
    Decode {
        /// The manifest file.
        path: PathBuf,
        /// The JSON path of the smallest enclosing object that failed to decode.
        field: String,
        /// The decoder's error.
        #[source]
        source: serde_json::Error,
    },

    /// Fields that are not part of the v1 Pod API (strict decoding, like
    /// `kubectl --validate=strict`). Usually a typo.
    #[error(
        "manifest {}: {}: unknown field{}; check the spelling against the v1 Pod API (`kubectl explain pod.spec`)",
        path.display(), fields.join(", "), if fields.len() == 1 { "" } else { "s" }
    )]
    UnknownFields {
        /// The manifest file.
        path: PathBuf,
        /// The JSON paths of the unknown fields, e.g. `spec.containers[0].comand`.
        fields: Vec<String>,
    },

    /// `metadata.name` is missing or empty.
    #[error("manifest {}: metadata.name: field is required; give the pod a name", path.display())]
    MissingName {
        /// The manifest file.
        path: PathBuf,
    },

    /// `spec.containers` is missing or empty.
    #[error("manifest {}: spec.containers: at least one container is required; add a container to run", path.display())]
    NoContainers {
        /// The manifest file.
        path: PathBuf,
    },

    /// A container lacks a required field (`name` or `image`).
    #[error("manifest {}: {container}: field \"{field}\" is required; {hint}", path.display())]
    MissingContainerField {
        /// The manifest file.
        path: PathBuf,
        /// The container's JSON path, e.g. `spec.containers[0]`.
        container: String,
        /// The missing field.
        field: &'static str,
        /// What to do about it.
        hint: &'static str,
    },

    /// Two containers (regular or init) share a name.
    #[error(
        "manifest {}: {container}.name: duplicate container name \"{name}\" (also used by {first}); give every container a unique name",
        path.display()
    )]
    DuplicateContainer {
        /// The manifest file.
        path: PathBuf,
        /// The JSON path of the second container with that name.
        container: String,
        /// The JSON path of the first one.
        first: String,
        /// The duplicated name.
        name: String,
    },

    /// A securityContext the API server would refuse (an unknown capability, a
    /// negative id, a profile type that does not exist…).
    #[error("manifest {}: {source}", path.display())]
    SecurityContext {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong, naming the field.
        source: crate::model::security::SecurityError,
    },

    /// A field has a value outside what the API accepts (an enum value, a negative
    /// duration, a name that is not a DNS label).
    #[error("manifest {}: {field}: invalid value \"{value}\": {reason}", path.display())]
    InvalidValue {
        /// The manifest file.
        path: PathBuf,
        /// The JSON path of the field.
        field: String,
        /// The rejected value.
        value: String,
        /// What is accepted.
        reason: ValueError,
    },

    /// Two files define the same pod (same namespace and name). The first file by name
    /// wins; this one is ignored.
    #[error(
        "manifest {}: pod {namespace}/{name} is already defined by {}; this file is ignored, rename the pod or remove one of the files",
        path.display(), first.display()
    )]
    DuplicatePod {
        /// The file that is ignored.
        path: PathBuf,
        /// The file that defines the pod.
        first: PathBuf,
        /// The pod's namespace.
        namespace: String,
        /// The pod's name as it runs (`<metadata.name>-<node>`).
        name: String,
    },
}

impl ManifestError {
    /// The file (or directory) the error is about.
    pub fn path(&self) -> &Path {
        match self {
            Self::DirMissing { path }
            | Self::DirRead { path, .. }
            | Self::Subdirectory { path }
            | Self::NotAFile { path }
            | Self::Read { path, .. }
            | Self::TooLarge { path, .. }
            | Self::Empty { path }
            | Self::Yaml { path, .. }
            | Self::MultipleDocuments { path, .. }
            | Self::WrongKind { path, .. }
            | Self::WrongApiVersion { path, .. }
            | Self::Decode { path, .. }
            | Self::UnknownFields { path, .. }
            | Self::MissingName { path }
            | Self::NoContainers { path }
            | Self::MissingContainerField { path, .. }
            | Self::DuplicateContainer { path, .. }
            | Self::InvalidValue { path, .. }
            | Self::SecurityContext { path, .. }
            | Self::DuplicatePod { path, .. } => path,
        }
    }
}

/// Why a field's value is refused, in the API server's words (the text after
/// `invalid value "…": ` in [`ManifestError::InvalidValue`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// A name that becomes a directory or file name (container, namespace) is not a
    /// DNS-1123 label.
    #[error(
        "must be a DNS-1123 label: at most 63 lowercase letters, digits or '-', starting and ending with a letter or digit"
    )]
    NotDns1123Label,
    /// A pod name (or the node name) is not a DNS-1123 subdomain.
    #[error(
        "must be a DNS-1123 subdomain: at most 253 lowercase letters, digits, '-' or '.', each dot-separated part starting and ending with a letter or digit"
    )]
    NotDns1123Subdomain,
    /// The pod's name is valid alone but not once `-<node>` is appended (as the
    /// kubelet validates it under its final name).
    #[error(
        "the pod's name with the node name appended (<name>-<node>) {0}; shorten metadata.name"
    )]
    NameWithNode(Box<ValueError>),
    /// An enum-like field (restartPolicy, imagePullPolicy, protocol…) with a value the
    /// API does not know.
    #[error("must be one of {}", allowed.join(", "))]
    NotOneOf {
        /// The accepted values.
        allowed: &'static [&'static str],
    },
    /// A negative `terminationGracePeriodSeconds`.
    #[error("must be 0 or more seconds")]
    NegativeGracePeriod,
    /// `shareProcessNamespace: true` together with `hostPID: true`.
    #[error("may not be set together with hostPID: true")]
    ShareProcessNamespaceWithHostPid,
    /// An image reference with spaces around it.
    #[error("must not have leading or trailing whitespace")]
    ImageWhitespace,
    /// An environment variable name that is empty, has `=` or non-printable bytes.
    #[error("must be printable ASCII characters other than '=' (and not empty)")]
    EnvName,
    /// A resource quantity that does not parse.
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' (e.g. 500m, 0.5, 128Mi, 1G)"
    )]
    Quantity,
    /// A negative resource quantity.
    #[error("must be greater than or equal to 0")]
    NegativeQuantity,
    /// A request above the limit of the same resource.
    #[error("must be less than or equal to {resource} limit of {limit}")]
    RequestAboveLimit {
        /// The resource ("cpu", "memory").
        resource: String,
        /// The limit as written.
        limit: String,
    },
    /// A port number out of range.
    #[error("must be between {min} and 65535, inclusive")]
    PortRange {
        /// The smallest valid number (1 for containerPort, 0 for hostPort).
        min: u16,
    },
}
