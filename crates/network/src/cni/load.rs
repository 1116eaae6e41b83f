//! Finding and loading the node's network config list from `--cni-conf-dir`. The list
//! is read once, when the network is made; a later change of the directory takes effect
//! at the next daemon start (a pod set up keeps the config it was set up with: its
//! record holds it, so its DEL matches its ADD).

use std::path::{Path, PathBuf};

use super::CniError;
use podhost_model::cni::config::{ConfigList, choose_config_file, parse_config_file};

/// The config file `conf_dir` would be loaded from, if it has one.
pub fn config_file(conf_dir: &Path) -> Result<Option<PathBuf>, CniError> {
    let entries = match std::fs::read_dir(conf_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(CniError::ReadConfig {
                path: conf_dir.to_path_buf(),
                source,
            });
        }
    };
    let names = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file() || t.is_symlink()))
        .filter_map(|e| e.file_name().into_string().ok());
    Ok(choose_config_file(names).map(|n| conf_dir.join(n)))
}

/// Loads and validates the config list of `conf_dir`.
pub fn load_config_list(conf_dir: &Path) -> Result<ConfigList, CniError> {
    let file = config_file(conf_dir)?.ok_or_else(|| CniError::NoConfig {
        dir: conf_dir.to_path_buf(),
    })?;
    let bytes = std::fs::read(&file).map_err(|source| CniError::ReadConfig {
        path: file.clone(),
        source,
    })?;
    Ok(parse_config_file(&file, &bytes)?)
}
