//! The `--config-dir` store: ConfigMap and Secret objects read from local files, for
//! pods' configMap/secret volumes and env. The kubelet refuses these in static pods
//! (it has no API server to ask); podhost reads them from a directory instead.
//!
//! Every file directly in the directory (dotfiles skipped, as in the manifest
//! directory) holds one or more objects: YAML documents separated by `---`, JSON, or
//! a `v1` `List`. A bad file or object is reported and skipped; it never hides the
//! good ones. Secrets stay in memory: podhost never writes them to disk.

mod load;
mod watch;

pub use watch::watch;

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};

use podhost_model::env::ConfigLookup;

/// The default `--config-dir`.
pub const DEFAULT_CONFIG_DIR: &str = "/etc/podhost/config";

/// A file of the config dir, or an object in it, that cannot be used. Each names the
/// file and what to fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigDirError {
    #[error("cannot read the config dir {path}: {source}")]
    DirRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read config file {path}: {source}")]
    FileRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("config file {path} is {size} bytes, more than the {limit} allowed; split it")]
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
    },
    #[error(
        "{path} is not a regular file; the config dir holds ConfigMap and Secret files directly (dotfiles are skipped)"
    )]
    NotAFile { path: PathBuf },
    #[error("config file {path}, document {doc}: {message}")]
    Parse {
        path: PathBuf,
        doc: usize,
        message: String,
    },
    #[error(
        "config file {path}, document {doc}: kind {kind:?} is not supported; use apiVersion v1 with kind ConfigMap, Secret or List"
    )]
    Kind {
        path: PathBuf,
        doc: usize,
        kind: String,
    },
    #[error("config file {path}: {kind} {namespace}/{name}: {message}")]
    Invalid {
        path: PathBuf,
        kind: &'static str,
        namespace: String,
        name: String,
        message: String,
    },
    #[error(
        "config file {path}: {kind} {namespace}/{name} is already defined in {first}; this one is ignored (rename or remove one)"
    )]
    Duplicate {
        path: PathBuf,
        first: PathBuf,
        kind: &'static str,
        namespace: String,
        name: String,
    },
}

/// One read of the config dir: objects by (namespace, name), and what was wrong.
#[derive(Debug, Default)]
pub struct ConfigObjects {
    config_maps: BTreeMap<(String, String), ConfigMap>,
    /// `stringData` merged into `data`, as the API server stores them.
    secrets: BTreeMap<(String, String), Secret>,
    errors: Vec<ConfigDirError>,
}

impl ConfigObjects {
    /// Reads every file of `dir`; a missing directory is an empty store.
    pub fn load(dir: &std::path::Path) -> Self {
        load::load_dir(dir)
    }

    /// The files and objects that were skipped, and why.
    pub fn errors(&self) -> &[ConfigDirError] {
        &self.errors
    }

    /// How many ConfigMaps and Secrets were read.
    pub fn counts(&self) -> (usize, usize) {
        (self.config_maps.len(), self.secrets.len())
    }

    /// Whether `other` holds the same objects and errors (no reload needed).
    fn same_as(&self, other: &Self) -> bool {
        self.config_maps == other.config_maps
            && self.secrets == other.secrets
            && self.errors.len() == other.errors.len()
            && self
                .errors
                .iter()
                .zip(&other.errors)
                .all(|(a, b)| a.to_string() == b.to_string())
    }
}

impl ConfigLookup for ConfigObjects {
    fn config_map(&self, namespace: &str, name: &str) -> Option<&ConfigMap> {
        self.config_maps
            .get(&(namespace.to_string(), name.to_string()))
    }

    fn secret(&self, namespace: &str, name: &str) -> Option<&Secret> {
        self.secrets.get(&(namespace.to_string(), name.to_string()))
    }
}
