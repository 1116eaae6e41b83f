//! Cluster-mode failures.

use std::path::PathBuf;

/// What can go wrong talking to the API server.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The kubeconfig cannot be read or has no usable context.
    #[error("cannot use the kubeconfig {path}: {source}")]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// The client cannot be built from the kubeconfig (TLS material, server URL).
    #[error("cannot build an API client from {path}: {source}")]
    Client {
        path: PathBuf,
        #[source]
        source: kube::Error,
    },
    /// The record file cannot be created.
    #[error("cannot create the API record file {path}: {source}")]
    RecordFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The node's client certificate cannot be had or kept (bootstrap, rotation).
    #[error(transparent)]
    Certificate(#[from] super::certs::CertError),
    /// An API call failed.
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
}

impl ClusterError {
    /// Wraps an API error with what was being done.
    pub fn api(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let what = what.into();
        move |source| Self::Api { what, source }
    }
}
