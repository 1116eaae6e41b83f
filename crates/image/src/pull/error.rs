//! [`PullError`]: every message names the reference being pulled and carries
//! what the registry said, and where the user can act, what to do.

use std::io;
use std::path::PathBuf;

use oci_client::errors::{DigestError, OciDistributionError, OciEnvelope, OciErrorCode};

use super::super::ImageError;
use super::plain_http::answered_tls_in_plain_http;

/// Why a pull failed.
#[derive(Debug, thiserror::Error)]
pub enum PullError {
    /// The reference cannot be pulled as written.
    #[error("pulling \"{reference}\": not a valid image reference: {reason}")]
    BadReference {
        /// The reference (normalized when possible).
        reference: String,
        /// What is wrong with it.
        reason: String,
    },

    /// The reference names a local image only (registry `localhost`, no port).
    #[error(
        "not pulling {}",
        super::super::reference::local_only_hint(reference, "podhost load")
    )]
    LocalOnly {
        /// The normalized reference.
        reference: String,
    },

    /// The registry does not have this repository, tag or digest.
    #[error("pulling \"{reference}\": {what} (registry said: {message})")]
    NotFound {
        /// The normalized reference.
        reference: String,
        /// What is unknown: "manifest unknown", "repository unknown", "blob unknown".
        what: String,
        /// The registry's own error text.
        message: String,
    },

    /// The registry refused the request for lack of (valid) credentials.
    #[error(
        "pulling \"{reference}\": unauthorized: check the credentials for {registry} in \
         {credentials} ({detail})"
    )]
    Unauthorized {
        /// The normalized reference.
        reference: String,
        /// `host[:port]` of the registry.
        registry: String,
        /// The credentials file consulted, or a note that none is configured.
        credentials: String,
        /// What was sent and what the registry said.
        detail: String,
    },

    /// The credentials file exists but could not be used.
    #[error("pulling \"{reference}\": cannot get the credentials for {registry} from {}: {source}",
        path.display())]
    Credentials {
        /// The normalized reference.
        reference: String,
        /// `host[:port]` of the registry.
        registry: String,
        /// The docker config.json.
        path: PathBuf,
        /// What went wrong (parse error, credential helper failure, ...); boxed, as
        /// a helper's failure carries its output and would make every PullError large.
        #[source]
        source: Box<CredentialsError>,
    },

    /// No registry client could be built (no CA certificates on the host).
    #[error(
        "pulling \"{reference}\": cannot create the registry client: {source}; install the \
         ca-certificates package"
    )]
    NoClient {
        /// The normalized reference.
        reference: String,
        /// The client's error (boxed: it is large, and rare).
        #[source]
        source: Box<OciDistributionError>,
    },

    /// A manifest, index or image config document cannot be used.
    #[error("pulling \"{reference}\": {what}: {source}")]
    Document {
        /// The normalized reference.
        reference: String,
        /// The document and its digest: "manifest sha256:…", "image config sha256:…".
        what: String,
        /// What is wrong with it.
        #[source]
        source: DocumentError,
    },

    /// No connection to the registry.
    #[error("pulling \"{reference}\": cannot reach registry {registry}: {reason}")]
    Unreachable {
        /// The normalized reference.
        reference: String,
        /// `host[:port]` of the registry.
        registry: String,
        /// The network error ("connection refused", "dns error: ...").
        reason: String,
    },

    /// The registry answered the TLS handshake in plain HTTP. (A registry on this
    /// host's loopback is then spoken to in plain HTTP instead; see `plain_http`.)
    #[error(
        "pulling \"{reference}\": registry {registry} speaks plain HTTP, not HTTPS; if it is \
         meant to be reached so, start podhost with --insecure-registry {registry}"
    )]
    PlainHttp {
        /// The normalized reference.
        reference: String,
        /// `host[:port]` of the registry.
        registry: String,
    },

    /// The registry answered with an error other than "not found" or "unauthorized".
    #[error("pulling \"{reference}\": registry {registry} failed: {message}")]
    Registry {
        /// The normalized reference.
        reference: String,
        /// `host[:port]` of the registry.
        registry: String,
        /// What the registry (or the HTTP client) said.
        message: String,
    },

    /// Downloaded content does not match its digest or size.
    #[error(
        "pulling \"{reference}\": {what} does not match its descriptor (expected {expected}, \
         got {actual}); the registry's copy is corrupt or was altered in transit; nothing was stored"
    )]
    Digest {
        /// The manifest or blob, with its digest.
        what: String,
        /// The normalized reference.
        reference: String,
        /// The announced digest or size.
        expected: String,
        /// The computed digest or size.
        actual: String,
    },

    /// The manifest, index or config cannot be used.
    #[error("pulling \"{reference}\": {reason}")]
    BadManifest {
        /// The normalized reference.
        reference: String,
        /// What is wrong with it.
        reason: String,
    },

    /// An image index has no manifest for this host.
    #[error("pulling \"{reference}\": image index {digest} has no manifest for {platform}")]
    NoMatchingPlatform {
        /// The normalized reference.
        reference: String,
        /// The index's digest.
        digest: String,
        /// The wanted platform, "linux/amd64".
        platform: String,
    },

    /// Storing or unpacking failed.
    #[error("pulling \"{reference}\": {source}")]
    Store {
        /// The normalized reference.
        reference: String,
        /// The store's error.
        #[source]
        source: ImageError,
    },

    /// A worker task of the pull panicked or was cancelled.
    #[error("pulling \"{reference}\": internal error: {reason}")]
    Internal {
        /// The normalized reference.
        reference: String,
        /// What happened.
        reason: String,
    },

    /// Several credentials were tried (a pod's image pull secrets, then the node's) and
    /// none worked: each one's failure, in the order tried (the kubelet's aggregate).
    #[error(
        "pulling \"{reference}\": no credentials worked: {}",
        failure_list(reference, failures)
    )]
    EveryCredentialFailed {
        /// The normalized reference.
        reference: String,
        /// Why each failed; at least two.
        failures: Vec<PullError>,
    },
}

/// `failures` joined, each without the "pulling \"REFERENCE\": " they all start with.
fn failure_list(reference: &str, failures: &[PullError]) -> String {
    let prefix = format!("pulling \"{reference}\": ");
    failures
        .iter()
        .map(|f| {
            let message = f.to_string();
            match message.strip_prefix(&prefix) {
                Some(rest) => rest.to_string(),
                None => message,
            }
        })
        .collect::<Vec<_>>()
        .join("; then ")
}

/// Why the credentials file could not be used for a registry.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// The file exists but cannot be opened.
    #[error("cannot open it: {0}")]
    Open(#[source] io::Error),
    /// The file is not JSON with `auths`.
    #[error("it is not a valid docker config.json (JSON with \"auths\")")]
    NotDockerConfig,
    /// `auths.<registry>.auth` is not base64 of `user:password`.
    #[error("auths.\"{registry}\".auth is not base64 of \"user:password\"")]
    BadAuth {
        /// `host[:port]` of the registry.
        registry: String,
    },
    /// A credential helper (`credHelpers`, `credsStore`) failed.
    #[error("{0}")]
    Helper(#[source] docker_credential::CredentialRetrievalError),
}

/// Why a manifest, index or image config document cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    /// The document is not JSON.
    #[error("not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// A Docker schema 1 manifest (deprecated, unsigned layers by tarsum).
    #[error(
        "Docker schema 1 manifests are not supported; push the image again with a current client"
    )]
    Schema1,
    /// A `mediaType` that is neither an image manifest nor an index.
    #[error("unsupported media type \"{0}\"")]
    UnsupportedMediaType(String),
    /// No `mediaType`, and the shape is neither a manifest nor an index.
    #[error("neither an image manifest nor an image index")]
    Unrecognized,
    /// The image config does not parse.
    #[error("cannot parse the image config: {0}")]
    Config(#[source] oci_spec::OciSpecError),
    /// The config's `rootfs.diff_ids` and the manifest's layers differ in number.
    #[error("the config lists {diff_ids} diff_ids but the manifest {layers} layers")]
    DiffIdCount {
        /// How many diff_ids the config lists.
        diff_ids: usize,
        /// How many layers the manifest lists.
        layers: usize,
    },
}

impl PullError {
    /// Whether the pull may work with other credentials: the registry refused these,
    /// or said it has no such repository or image (as a registry may say to hide a
    /// private repository from credentials that cannot read it).
    pub(super) fn may_pass_with_other_credentials(&self) -> bool {
        matches!(
            self,
            PullError::Unauthorized { .. } | PullError::NotFound { .. }
        )
    }

    /// The error of a pull whose every credential failed with `failures` (in the order
    /// tried): the one failure itself when there was only one.
    pub(super) fn every_credential_failed(
        reference: String,
        mut failures: Vec<PullError>,
    ) -> PullError {
        match failures.len() {
            0 => PullError::Internal {
                reference,
                reason: "no credentials were tried".to_string(),
            },
            1 => failures.remove(0),
            _ => PullError::EveryCredentialFailed {
                reference,
                failures,
            },
        }
    }

    /// The same error with the message of a network or registry failure
    /// ([`PullError::Unreachable`], [`PullError::Registry`]) rewritten by `f`; any
    /// other error as it is.
    pub(super) fn map_network_message(self, f: impl FnOnce(String) -> String) -> PullError {
        match self {
            PullError::Unreachable {
                reference,
                registry,
                reason,
            } => PullError::Unreachable {
                reference,
                registry,
                reason: f(reason),
            },
            PullError::Registry {
                reference,
                registry,
                message,
            } => PullError::Registry {
                reference,
                registry,
                message: f(message),
            },
            other => other,
        }
    }
}

/// What every error of one pull needs to know.
#[derive(Debug, Clone)]
pub(super) struct Ctx {
    /// The normalized reference.
    pub reference: String,
    /// `host[:port]`.
    pub registry: String,
    /// The credentials file for messages ("/root/.docker/config.json").
    pub credentials: String,
    /// What credentials were sent, for messages ("sent user \"alice\"").
    pub sent: String,
}

impl Ctx {
    /// Maps an `oci_client` error about `what` ("manifest", "blob sha256:…").
    pub(super) fn oci(&self, what: &str, e: OciDistributionError) -> PullError {
        let reference = self.reference.clone();
        let registry = self.registry.clone();
        match e {
            OciDistributionError::RegistryError { envelope, .. } => self.envelope(what, &envelope),
            OciDistributionError::UnauthorizedError { .. } => {
                self.unauthorized("the registry answered 401 Unauthorized")
            }
            OciDistributionError::AuthenticationFailure(reason) => self.unauthorized(&format!(
                "the token service said: {}",
                envelope_messages(&reason).unwrap_or_else(|| reason.trim().to_string())
            )),
            OciDistributionError::ServerError {
                code: 404, message, ..
            } => PullError::NotFound {
                reference,
                what: format!("{what} unknown"),
                message: format!("HTTP 404 {}", message.trim()),
            },
            OciDistributionError::ServerError { code, message, .. } => PullError::Registry {
                reference,
                registry,
                message: format!("HTTP {code}: {}", message.trim()),
            },
            OciDistributionError::DigestError(d) => self.digest(what, &d),
            OciDistributionError::IoError(io) => self.io(what, io),
            OciDistributionError::RequestError(r) => self.request(&r),
            other => PullError::Registry {
                reference,
                registry,
                message: chain(&other),
            },
        }
    }

    /// Maps an error read from a blob stream (a digest mismatch arrives this way).
    pub(super) fn io(&self, what: &str, e: io::Error) -> PullError {
        if let Some(d) = e.get_ref().and_then(|i| i.downcast_ref::<DigestError>()) {
            return self.digest(what, d);
        }
        if let Some(r) = e.get_ref().and_then(|i| i.downcast_ref::<reqwest::Error>()) {
            return self
                .request(r)
                .map_network_message(|m| format!("reading {what}: {m}"));
        }
        PullError::Registry {
            reference: self.reference.clone(),
            registry: self.registry.clone(),
            message: format!("reading {what}: {}", chain(&e)),
        }
    }

    /// Maps a store error (a size or digest mismatch found while writing becomes
    /// [`PullError::Digest`]).
    pub(super) fn store(&self, e: ImageError) -> PullError {
        match e {
            ImageError::DigestMismatch {
                what,
                expected,
                actual,
            } => PullError::Digest {
                what,
                reference: self.reference.clone(),
                expected,
                actual,
            },
            source => PullError::Store {
                reference: self.reference.clone(),
                source,
            },
        }
    }

    /// [`Ctx::store`] for an error about blob `what` ("layer sha256:…"): a digest
    /// or size mismatch is reported under that name.
    pub(super) fn blob_store(&self, what: &str, e: ImageError) -> PullError {
        match self.store(e) {
            PullError::Digest {
                reference,
                expected,
                actual,
                ..
            } => PullError::Digest {
                what: what.to_string(),
                reference,
                expected,
                actual,
            },
            other => other,
        }
    }

    /// A [`PullError::BadManifest`].
    pub(super) fn bad(&self, reason: impl Into<String>) -> PullError {
        PullError::BadManifest {
            reference: self.reference.clone(),
            reason: reason.into(),
        }
    }

    /// A [`PullError::Document`] about `what` ("manifest sha256:…").
    pub(super) fn document(&self, what: impl Into<String>, source: DocumentError) -> PullError {
        PullError::Document {
            reference: self.reference.clone(),
            what: what.into(),
            source,
        }
    }

    /// A [`PullError::Internal`].
    pub(super) fn internal(&self, reason: impl std::fmt::Display) -> PullError {
        PullError::Internal {
            reference: self.reference.clone(),
            reason: reason.to_string(),
        }
    }

    fn unauthorized(&self, said: &str) -> PullError {
        PullError::Unauthorized {
            reference: self.reference.clone(),
            registry: self.registry.clone(),
            credentials: self.credentials.clone(),
            detail: format!("{}; {said}", self.sent),
        }
    }

    fn digest(&self, what: &str, d: &DigestError) -> PullError {
        match d {
            DigestError::VerificationError { expected, actual } => PullError::Digest {
                what: what.to_string(),
                reference: self.reference.clone(),
                expected: expected.clone(),
                actual: actual.clone(),
            },
            other => self.bad(format!("{what}: {other}")),
        }
    }

    fn envelope(&self, what: &str, envelope: &OciEnvelope) -> PullError {
        let message = envelope
            .errors
            .iter()
            .map(|e| {
                let code = serde_json::to_value(&e.code)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                match (e.message.trim(), e.detail.is_null()) {
                    (m, true) => format!("{code}: {m}"),
                    (m, false) => format!("{code}: {m} {}", e.detail),
                }
            })
            .collect::<Vec<_>>()
            .join("; ");
        let unknown = |w: &str| PullError::NotFound {
            reference: self.reference.clone(),
            what: w.to_string(),
            message: message.clone(),
        };
        let first = envelope.errors.first().map(|e| &e.code);
        match first {
            Some(OciErrorCode::ManifestUnknown) => unknown("manifest unknown"),
            Some(OciErrorCode::NameUnknown) => unknown("repository unknown"),
            Some(OciErrorCode::BlobUnknown) => unknown(&format!("{what} unknown")),
            Some(OciErrorCode::NotFound) => unknown(&format!("{what} unknown")),
            Some(OciErrorCode::Unauthorized | OciErrorCode::Denied) => {
                self.unauthorized(&format!("the registry said: {message}"))
            }
            _ => PullError::Registry {
                reference: self.reference.clone(),
                registry: self.registry.clone(),
                message,
            },
        }
    }

    fn request(&self, r: &reqwest::Error) -> PullError {
        if answered_tls_in_plain_http(r) {
            return PullError::PlainHttp {
                reference: self.reference.clone(),
                registry: self.registry.clone(),
            };
        }
        if r.is_connect() || r.is_timeout() {
            return PullError::Unreachable {
                reference: self.reference.clone(),
                registry: self.registry.clone(),
                reason: network_reason(r),
            };
        }
        PullError::Registry {
            reference: self.reference.clone(),
            registry: self.registry.clone(),
            message: chain(r),
        }
    }
}

/// The messages of an OCI error body (`{"errors":[{"code":…,"message":…}]}`),
/// joined; `None` when `body` is not one.
fn envelope_messages(body: &str) -> Option<String> {
    let envelope: OciEnvelope = serde_json::from_str(body).ok()?;
    let messages: Vec<&str> = envelope
        .errors
        .iter()
        .map(|e| e.message.trim())
        .filter(|m| !m.is_empty())
        .collect();
    (!messages.is_empty()).then(|| messages.join("; "))
}

/// "connection refused", "connection timed out", or the innermost message.
fn network_reason(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let mut last = e.to_string();
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<io::Error>() {
            return match io.kind() {
                io::ErrorKind::ConnectionRefused => "connection refused".to_string(),
                io::ErrorKind::TimedOut => "connection timed out".to_string(),
                io::ErrorKind::ConnectionReset => "connection reset".to_string(),
                _ => io.to_string(),
            };
        }
        last = err.to_string();
        cur = err.source();
    }
    if e.downcast_ref::<reqwest::Error>()
        .is_some_and(reqwest::Error::is_timeout)
    {
        return "timed out".to_string();
    }
    last
}

/// An error and its causes, joined with ": " (duplicates dropped).
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(err) = cur {
        let s = err.to_string();
        if !parts.last().is_some_and(|p| p.contains(&s)) {
            parts.push(s);
        }
        cur = err.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> Ctx {
        Ctx {
            reference: "127.0.0.1:5000/nope:v1".into(),
            registry: "127.0.0.1:5000".into(),
            credentials: "/root/.docker/config.json".into(),
            sent: "no credentials sent".into(),
        }
    }

    #[test]
    fn manifest_unknown_names_reference_and_registry_message() {
        let envelope: OciEnvelope = serde_json::from_str(
            r#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown","detail":{"Tag":"v1"}}]}"#,
        )
        .unwrap();
        let e = ctx().oci(
            "manifest",
            OciDistributionError::RegistryError {
                envelope,
                url: "u".into(),
            },
        );
        assert_eq!(
            e.to_string(),
            "pulling \"127.0.0.1:5000/nope:v1\": manifest unknown (registry said: \
             MANIFEST_UNKNOWN: manifest unknown {\"Tag\":\"v1\"})"
        );
    }

    #[test]
    fn unauthorized_names_the_credentials_file() {
        let e = ctx().oci(
            "manifest",
            OciDistributionError::UnauthorizedError { url: "u".into() },
        );
        let s = e.to_string();
        assert!(
            s.starts_with(
                "pulling \"127.0.0.1:5000/nope:v1\": unauthorized: check the credentials for \
                 127.0.0.1:5000 in /root/.docker/config.json ("
            ),
            "{s}"
        );
    }

    #[test]
    fn every_failed_credential_is_named_in_the_order_tried() {
        let secret = Ctx {
            credentials: "secret \"team/regcred\"".into(),
            sent: "sent user \"alice\"".into(),
            ..ctx()
        };
        let unauthorized = || OciDistributionError::UnauthorizedError { url: "u".into() };
        let one = PullError::every_credential_failed(
            "127.0.0.1:5000/nope:v1".into(),
            vec![secret.oci("manifest", unauthorized())],
        );
        assert!(matches!(one, PullError::Unauthorized { .. }), "{one}");
        let both = PullError::every_credential_failed(
            "127.0.0.1:5000/nope:v1".into(),
            vec![
                secret.oci("manifest", unauthorized()),
                ctx().oci("manifest", unauthorized()),
            ],
        );
        assert_eq!(
            both.to_string(),
            "pulling \"127.0.0.1:5000/nope:v1\": no credentials worked: unauthorized: check \
             the credentials for 127.0.0.1:5000 in secret \"team/regcred\" (sent user \
             \"alice\"; the registry answered 401 Unauthorized); then unauthorized: check the \
             credentials for 127.0.0.1:5000 in /root/.docker/config.json (no credentials \
             sent; the registry answered 401 Unauthorized)"
        );
        assert!(both.to_string().contains("401"));
        assert!(matches!(
            PullError::every_credential_failed("r/x:1".into(), Vec::new()),
            PullError::Internal { .. }
        ));
        assert!(one.may_pass_with_other_credentials());
        assert!(!ctx().bad("x").may_pass_with_other_credentials());
    }

    #[test]
    fn stream_digest_errors_become_digest_errors() {
        let io = io::Error::other(DigestError::VerificationError {
            expected: "sha256:a".into(),
            actual: "sha256:b".into(),
        });
        let e = ctx().io("blob sha256:a", io);
        assert!(matches!(e, PullError::Digest { .. }), "{e}");
        assert!(
            e.to_string().contains("expected sha256:a, got sha256:b"),
            "{e}"
        );
    }
}
