//! The per-pod record `<state_dir>/pods/<uid>.json`: written (temp, fsync, rename)
//! before the first plugin's ADD, with everything a later DEL needs (the config list
//! used, netns, ifname, CNI_ARGS, port mappings), and again after each plugin's ADD
//! with its result. A daemon killed at any point leaves a record from which the next one can DEL;
//! the record goes only after a successful DEL.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::CniError;
use podhost_disk::{read_json, write_json_atomic};
use podhost_model::cni::input::PortMapping;

/// What podhost knows about one pod's CNI network.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodRecord {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub netns: PathBuf,
    pub ifname: String,
    pub cni_args: String,
    pub port_mappings: Vec<PortMapping>,
    /// The config file the list came from, and the list as it was read.
    pub config_file: PathBuf,
    pub config: Value,
    /// The result of the last plugin whose ADD returned; `None` before the first.
    pub result: Option<Value>,
    /// Whether every plugin's ADD returned (`result` is then the final one).
    #[serde(default)]
    pub complete: bool,
}

/// `<state_dir>/pods`.
pub fn records_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("pods")
}

/// A pod's record path; refuses a uid that is not a plain file name.
pub fn record_path(state_dir: &Path, uid: &str) -> Result<PathBuf, CniError> {
    let plain = !uid.is_empty()
        && uid != "."
        && uid != ".."
        && !uid.starts_with('.')
        && uid
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !plain {
        return Err(CniError::BadUid {
            uid: uid.to_string(),
        });
    }
    Ok(records_dir(state_dir).join(format!("{uid}.json")))
}

/// Writes `record` crash-safely, off the async threads.
pub async fn write(state_dir: &Path, record: &PodRecord) -> Result<(), CniError> {
    let path = record_path(state_dir, &record.uid)?;
    let record = record.clone();
    blocking(move || write_json_atomic(&path, &record).map_err(CniError::Record)).await
}

/// The pod's record, if it has one.
pub async fn read(state_dir: &Path, uid: &str) -> Result<Option<PodRecord>, CniError> {
    let path = record_path(state_dir, uid)?;
    blocking(move || read_json(&path).map_err(CniError::Record)).await
}

/// Removes the pod's record (fine when it is gone).
pub async fn remove(state_dir: &Path, uid: &str) -> Result<(), CniError> {
    let path = record_path(state_dir, uid)?;
    blocking(move || match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(CniError::RemoveRecord { path, source }),
    })
    .await
}

/// The uids that have a record (temp files of interrupted writes are not records).
pub async fn uids(state_dir: &Path) -> Result<Vec<String>, CniError> {
    let dir = records_dir(state_dir);
    blocking(move || {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(CniError::ReadState { path: dir, source }),
        };
        let mut uids: Vec<String> = entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| !n.starts_with('.'))
            .filter_map(|n| n.strip_suffix(".json").map(str::to_string))
            .collect();
        uids.sort();
        Ok(uids)
    })
    .await
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, CniError> + Send + 'static,
) -> Result<T, CniError> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(CniError::Internal(e.to_string())))
}
