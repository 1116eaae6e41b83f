//! Bad files of the config dir as node events, so that `podhost describe` shows why a
//! ConfigMap or Secret a pod waits for is missing.

use std::collections::HashSet;
use std::sync::Arc;

use podhost_source::configdir::ConfigObjects;
use podhost_status::{EventKind, StatusStore};

/// Sends a `BadConfigObject` warning for each config-dir error when it first appears
/// (an error fixed and made again is reported again); runs until the watcher stops.
pub async fn report_errors(
    mut objects: tokio::sync::watch::Receiver<Arc<ConfigObjects>>,
    store: Arc<StatusStore>,
) {
    let mut reported: HashSet<String> = HashSet::new();
    loop {
        let current: HashSet<String> = objects
            .borrow_and_update()
            .errors()
            .iter()
            .map(ToString::to_string)
            .collect();
        for message in current.difference(&reported) {
            store.node_event(EventKind::Warning, "BadConfigObject", message.clone());
        }
        reported = current;
        if objects.changed().await.is_err() {
            return;
        }
    }
}
