//! Settings a container asked for that the shim could not apply (the host forbids them
//! or they failed), recorded in the attempt dir before the container starts so that the
//! daemon reports each as a pod event instead of the container silently running
//! without it.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::RuntimeError;
use podhost_disk::{read_json, write_json_atomic};

/// `<attempt dir>/not-applied.json`, written only when something was not applied.
pub const NOT_APPLIED_FILE: &str = "not-applied.json";

/// The event reason for an oom_score_adj the container does not get.
pub const OOM_SCORE_ADJ_NOT_APPLIED: &str = "OOMScoreAdjNotApplied";
/// The event reason for an rlimit the shim could not prepare.
pub const RLIMIT_NOT_APPLIED: &str = "RlimitNotApplied";

/// One setting the container runs without.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotApplied {
    /// The event's reason, e.g. [`OOM_SCORE_ADJ_NOT_APPLIED`].
    pub reason: String,
    /// What was asked, e.g. `oom_score_adj`.
    pub setting: String,
    pub wanted: String,
    /// What the container has instead.
    pub actual: String,
    /// Why, with what would fix it.
    pub why: String,
}

impl NotApplied {
    /// The event's message: wanted and actual value and why.
    pub fn message(&self) -> String {
        format!(
            "{} {} was not applied; the container runs with {}: {}",
            self.setting, self.wanted, self.actual, self.why
        )
    }
}

/// Records `list` in the bundle (nothing when it is empty).
pub fn record(bundle: &Path, list: &[NotApplied]) -> Result<(), RuntimeError> {
    if list.is_empty() {
        return Ok(());
    }
    Ok(write_json_atomic(&bundle.join(NOT_APPLIED_FILE), &list)?)
}

/// What the shim recorded for the bundle (empty when all was applied; an unreadable
/// record is reported as such rather than dropped).
pub fn read(bundle: &Path) -> Vec<NotApplied> {
    let path = bundle.join(NOT_APPLIED_FILE);
    match read_json::<Vec<NotApplied>>(&path) {
        Ok(list) => list.unwrap_or_default(),
        Err(e) => vec![NotApplied {
            reason: "SettingsUnknown".into(),
            setting: "the container's kernel settings".into(),
            wanted: "as specified".into(),
            actual: "unknown settings".into(),
            why: format!("{e}; see the shim's log beside it"),
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_nothing_is_written_when_all_applied() {
        let dir = tempfile::tempdir().unwrap();
        record(dir.path(), &[]).unwrap();
        assert!(!dir.path().join(NOT_APPLIED_FILE).exists());
        assert!(read(dir.path()).is_empty());
        let n = NotApplied {
            reason: OOM_SCORE_ADJ_NOT_APPLIED.into(),
            setting: "oom_score_adj".into(),
            wanted: "-997".into(),
            actual: "0".into(),
            why: "Permission denied".into(),
        };
        record(dir.path(), std::slice::from_ref(&n)).unwrap();
        assert_eq!(read(dir.path()), vec![n.clone()]);
        assert_eq!(
            n.message(),
            "oom_score_adj -997 was not applied; the container runs with 0: Permission denied"
        );
        std::fs::write(dir.path().join(NOT_APPLIED_FILE), b"{").unwrap();
        assert_eq!(read(dir.path())[0].reason, "SettingsUnknown");
    }
}
