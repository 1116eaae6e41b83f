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
        "manifest {}: {}; check the spelling against the v1 Pod API (`kubectl explain pod.spec`)",
        path.display(), fields.iter().map(|f| format!("{f}: {}", unknown_field_message(f))).collect::<Vec<_>>().join(", ")
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

    /// Fields the API server would refuse, every one found (validation does not stop
    /// at the first): each names its field path, the value and what is accepted.
    #[error("manifest {}: {}", path.display(), FieldErrors(errors))]
    Invalid {
        /// The manifest file.
        path: PathBuf,
        /// The refused fields, in spec order; never empty.
        errors: Vec<FieldError>,
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

    /// The manifest URL could not be fetched (connection, TLS, timeout, body read).
    /// The pods it gave before keep running; it is polled again.
    #[error(
        "manifest URL {url}: cannot be fetched: {reason}; check that the server is up and that --manifest-url is right (the pods it served before keep running)"
    )]
    UrlFetch {
        /// The URL.
        url: String,
        /// The client's error with its causes.
        reason: String,
    },

    /// The manifest URL answered something else than 200 OK.
    #[error(
        "manifest URL {url}: the server answered {status}, not 200 OK; fix the server or the URL (the pods it served before keep running)"
    )]
    UrlStatus {
        /// The URL.
        url: String,
        /// The HTTP status, e.g. `500 Internal Server Error`.
        status: String,
    },

    /// The manifest URL's body is larger than [`MAX_MANIFEST_BYTES`].
    #[error(
        "manifest URL {url}: the body is larger than the limit of {limit} bytes; serve one Pod or a PodList of reasonable size"
    )]
    UrlTooLarge {
        /// The URL.
        url: String,
        /// The limit in bytes.
        limit: u64,
    },

    /// The manifest URL served an object that is neither a Pod nor a PodList.
    #[error(
        "manifest URL {url}: expected kind Pod or PodList, found {found}; serve one `kind: Pod` or a `kind: PodList` with the pods in `items`"
    )]
    UrlWrongKind {
        /// The URL.
        url: String,
        /// What was found instead.
        found: String,
    },
}

impl ManifestError {
    /// The error as `(field path, message)` pairs, for tools (`podhost validate -o
    /// json`): one per refused or unknown field; the field is empty when the error is
    /// about the whole file. The message is the error's text after `manifest <path>: `
    /// (and after the field, when it leads the text).
    pub fn findings(&self) -> Vec<(String, String)> {
        let text = self.to_string();
        let prefix = format!("manifest {}: ", self.path().display());
        let text = text.strip_prefix(&prefix).unwrap_or(&text).to_string();
        let led_by = |field: &str| {
            let rest = text
                .strip_prefix(field)
                .and_then(|r| r.strip_prefix(": "))
                .unwrap_or(&text);
            (field.to_string(), rest.to_string())
        };
        match self {
            Self::Invalid { errors, .. } => errors
                .iter()
                .map(|e| (e.field.clone(), e.message()))
                .collect(),
            Self::UnknownFields { fields, .. } => fields
                .iter()
                .map(|f| {
                    let message = format!(
                        "{}; check the spelling against the v1 Pod API (`kubectl explain pod.spec`)",
                        unknown_field_message(f)
                    );
                    (f.clone(), message)
                })
                .collect(),
            Self::Decode { field, .. } => vec![led_by(field)],
            Self::MissingName { .. } => vec![led_by("metadata.name")],
            Self::NoContainers { .. } => vec![led_by("spec.containers")],
            Self::MissingContainerField {
                container, field, ..
            } => {
                let (_, message) = led_by(container);
                vec![(format!("{container}.{field}"), message)]
            }
            Self::WrongApiVersion { .. } => vec![led_by("apiVersion")],
            _ => vec![(String::new(), text)],
        }
    }

    /// The refused fields when the manifest parsed but did not validate (empty for
    /// every other error).
    pub fn field_errors(&self) -> &[FieldError] {
        match self {
            Self::Invalid { errors, .. } => errors,
            _ => &[],
        }
    }

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
            | Self::Invalid { path, .. }
            | Self::DuplicatePod { path, .. } => path,
            Self::UrlFetch { url, .. }
            | Self::UrlStatus { url, .. }
            | Self::UrlTooLarge { url, .. }
            | Self::UrlWrongKind { url, .. } => Path::new(url.as_str()),
        }
    }
}

/// One refused field: its JSON path (`spec.containers[1].livenessProbe.httpGet.port`),
/// the value as written when there is one, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The JSON path of the field.
    pub field: String,
    /// The refused value as written (`None` for a missing or conflicting field).
    pub value: Option<String>,
    /// What is wrong and what is accepted.
    pub reason: ValueError,
}

impl FieldError {
    /// A refused value.
    pub fn invalid(field: impl Into<String>, value: impl ToString, reason: ValueError) -> Self {
        Self {
            field: field.into(),
            value: Some(value.to_string()),
            reason,
        }
    }

    /// A problem with the field as a whole (missing, conflicting, duplicated).
    pub fn bare(field: impl Into<String>, reason: ValueError) -> Self {
        Self {
            field: field.into(),
            value: None,
            reason,
        }
    }

    /// The message without the field path: `invalid value "x": must be …`.
    pub fn message(&self) -> String {
        match (&self.value, &self.reason) {
            (_, ValueError::Security(e)) => {
                let text = e.to_string();
                match text.strip_prefix(&format!("{}: ", self.field)) {
                    Some(rest) => rest.to_string(),
                    None => text,
                }
            }
            (Some(v), reason) => format!("invalid value \"{v}\": {reason}"),
            (None, reason) => reason.to_string(),
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message())
    }
}

/// Several field errors on one line, `; `-separated.
struct FieldErrors<'a>(&'a [FieldError]);

impl std::fmt::Display for FieldErrors<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
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
    /// A resource quantity that does not parse or does not fit.
    #[error("{0} (e.g. 500m, 0.5, 128Mi, 1G)")]
    Quantity(podhost_model::quantity::QuantityError),
    /// A negative number or quantity.
    #[error("must be greater than or equal to 0")]
    Negative,
    /// Zero or a negative number where only positive ones make sense.
    #[error("must be greater than 0")]
    NotPositive,
    /// A number outside an inclusive range.
    #[error("must be between {min} and {max}, inclusive")]
    OutOfRange {
        /// The smallest accepted value.
        min: i64,
        /// The largest accepted value.
        max: i64,
    },
    /// liveness and startup probes: `successThreshold` other than 1.
    #[error("must be 1 for liveness and startup probes (leave it out)")]
    SuccessThresholdNotOne,
    /// A required field is missing or empty.
    #[error("field is required; {hint}")]
    Required {
        /// What to put there.
        hint: &'static str,
    },
    /// Two list entries share a name that must be unique.
    #[error(
        "duplicate {what} name \"{name}\" (also used by {first}); give every {what} a unique name"
    )]
    Duplicate {
        /// What is named ("container", "volume", "port").
        what: &'static str,
        /// The duplicated name.
        name: String,
        /// The JSON path of the first entry with that name.
        first: String,
    },
    /// A path that must be unique within its list (mountPath, item path).
    #[error("must be unique (also used by {first})")]
    NotUnique {
        /// The JSON path of the first user.
        first: String,
    },
    /// None of the alternatives of a one-of (probe handler, volume source) is set.
    #[error("must specify one of {}", choices.join(", "))]
    NoneOf {
        /// The alternatives.
        choices: &'static [&'static str],
    },
    /// Several alternatives of a one-of are set.
    #[error("may specify only one of these, found {}; keep one", found.join(", "))]
    SeveralOf {
        /// The ones that are set.
        found: Vec<String>,
    },
    /// A field that may not be set here (with why and what to do).
    #[error("may not be set {why}")]
    Forbidden {
        /// Where or with what it may not be set, and what to do.
        why: &'static str,
    },
    /// A field the table in `source::fields` marks as rejected.
    #[error("is not supported by podhost: {why}")]
    Rejected {
        /// Why, and what to do.
        why: &'static str,
    },
    /// A volumeMount that names no volume of the pod.
    #[error("no volume of this name in spec.volumes; declare the volume or fix the name")]
    VolumeNotFound,
    /// A path that must be absolute.
    #[error("must be an absolute path")]
    NotAbsolute,
    /// A path that must be relative and stay below its base.
    #[error("must be a relative path without '..' elements")]
    NotDescending,
    /// A port name that is not an IANA service name.
    #[error(
        "must be an IANA_SVC_NAME: at most 15 lowercase letters, digits or '-', with at least one letter, no '--', starting and ending with a letter or digit"
    )]
    NotIanaSvcName,
    /// An HTTP header name with characters HTTP does not allow.
    #[error("must be a valid HTTP header name (letters, digits and !#$%&'*+-.^_`|~)")]
    HeaderName,
    /// A label key that is not `[prefix/]name`.
    #[error(
        "must be a qualified name: an optional DNS-1123 subdomain prefix and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
    )]
    QualifiedName,
    /// A label value that is too long or has other characters.
    #[error(
        "must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit (or empty)"
    )]
    LabelValue,
    /// A file mode out of 0…0777.
    #[error("must be a number between 0 and 0777 (octal), both inclusive")]
    FileMode,
    /// A resource name that is neither standard nor fully qualified.
    #[error(
        "must be cpu, memory, ephemeral-storage, hugepages-<size>, or an extended resource with a domain (example.com/gpu)"
    )]
    ResourceName,
    /// A quantity that must be whole (hugepages, extended resources).
    #[error("must be an integer")]
    NotInteger,
    /// An extended resource whose request differs from its limit.
    #[error(
        "must be equal to {resource} limit of {limit} (extended resources cannot be overcommitted)"
    )]
    RequestNotLimit {
        /// The resource.
        resource: String,
        /// The limit as written.
        limit: String,
    },
    /// A value that must be an IP address (dnsConfig nameservers, hostAliases).
    #[error("must be a valid IP address")]
    NotAnIp,
    /// A list with more entries than the API server allows.
    #[error("must not have more than {max} {what}")]
    TooMany {
        /// The limit.
        max: usize,
        /// What is counted.
        what: &'static str,
    },
    /// A DNS search domain that is not a DNS subdomain (a trailing '.' and '_' allowed).
    #[error(
        "must be a DNS search domain: dot-separated labels of lowercase letters, digits, '-' or '_' (a trailing '.' allowed), at most 253 characters"
    )]
    SearchDomain,
    /// hostNetwork with a hostPort other than the containerPort.
    #[error("must match containerPort when hostNetwork is true")]
    HostPortMismatch,
    /// A securityContext the API server would refuse (an unknown capability, a
    /// negative id, a profile type that does not exist…).
    #[error("{0}")]
    Security(podhost_model::security::SecurityError),
    /// A request above the limit of the same resource.
    #[error("must be less than or equal to {resource} limit of {limit}")]
    RequestAboveLimit {
        /// The resource ("cpu", "memory").
        resource: String,
        /// The limit as written.
        limit: String,
    },
    /// A sysctl name the API server would refuse (`IsValidSysctlName`).
    #[error("{}", podhost_model::sysctl::NAME_RULE)]
    SysctlName,
    /// A sysctl value with a line break or a NUL.
    #[error("{}", podhost_model::sysctl::VALUE_RULE)]
    SysctlValue,
    /// A port number out of range.
    #[error("must be between {min} and 65535, inclusive")]
    PortRange {
        /// The smallest valid number (1 for containerPort, 0 for hostPort).
        min: u16,
    },
}

/// `unknown field (did you mean "command"?)` for `spec.containers[0].comand`.
fn unknown_field_message(path: &str) -> String {
    match super::spelling::did_you_mean(path) {
        Some(meant) => format!("unknown field (did you mean \"{meant}\"?)"),
        None => "unknown field".to_string(),
    }
}
