//! The CNI spec's data, pure: network config lists (`*.conflist`, or a single-plugin
//! `*.conf` wrapped into a list as libcni does), the JSON a plugin reads on stdin, the
//! results and errors it prints, and the spec versions that decide which operations a
//! config supports. `network::cni` does the I/O (reading the conf dir, exec'ing plugins).

pub mod config;
pub mod input;
pub mod result;
pub mod version;

use std::path::PathBuf;

/// Why a CNI config, a plugin's output or a version string is unusable. Each variant
/// names the file (or plugin) and what to change.
#[derive(Debug, thiserror::Error)]
pub enum CniFormatError {
    #[error("CNI config {file}: not valid JSON ({source}); fix the file")]
    ConfigJson {
        file: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("CNI config {file}: {problem}; fix the file")]
    Config { file: PathBuf, problem: String },
    #[error("CNI plugin {plugin:?} printed {what} that is not valid ({problem}): {output:?}")]
    Output {
        plugin: String,
        what: &'static str,
        problem: String,
        output: String,
    },
}
