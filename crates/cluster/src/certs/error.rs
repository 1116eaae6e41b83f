//! What can go wrong getting or keeping the node's client certificate.

use std::path::PathBuf;

/// Failures of bootstrap and rotation.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// A file of the cert dir or a kubeconfig cannot be read or written.
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// PEM text that is not a certificate chain with its key.
    #[error("not a usable certificate and key ({what}): {reason}")]
    Pem { what: String, reason: String },
    /// The key or the request cannot be made.
    #[error("cannot make the certificate request: {0}")]
    Request(#[from] rcgen::Error),
    /// The signer refused the request (a Denied or Failed condition).
    #[error("the certificate signing request {name} was {condition}: {reason}: {message}")]
    Refused {
        name: String,
        condition: String,
        reason: String,
        message: String,
    },
    /// An API call of the request's life failed.
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    /// Waiting for the request's certificate failed (its watch ended or errored).
    #[error("waiting for the certificate of {name}: {reason}")]
    Wait { name: String, reason: String },
    /// The kubeconfig to bootstrap from is not usable.
    #[error("cannot use the kubeconfig {path}: {reason}")]
    Kubeconfig { path: PathBuf, reason: String },
    /// The client with the rotating certificate cannot be built.
    #[error("cannot build the API client: {0}")]
    Client(#[source] kube::Error),
}

impl CertError {
    pub(crate) fn io(
        what: &'static str,
        path: &std::path::Path,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.to_path_buf();
        move |source| Self::Io { what, path, source }
    }

    pub(crate) fn pem(what: impl Into<String>, reason: impl ToString) -> Self {
        Self::Pem {
            what: what.into(),
            reason: reason.to_string(),
        }
    }
}
