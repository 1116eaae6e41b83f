//! The static pod sources the manager consumes: the manifest directory, and beside it
//! the manifest URL when `--manifest-url` is given; watched (the daemon) or read once
//! (`--runonce`).

use tokio::sync::mpsc;

use super::DaemonConfig;
use podhost_source::{ManifestError, ScanResult};

/// The directory's scans, merged with the URL's when there is one.
pub(super) fn watch_sources(cfg: &DaemonConfig) -> mpsc::Receiver<ScanResult> {
    let dir = podhost_source::watch(
        cfg.manifest_dir.clone(),
        cfg.node_name.clone(),
        cfg.rescan_every,
    );
    match &cfg.manifest_url {
        None => dir,
        Some(url) => podhost_source::merge_sources(
            dir,
            podhost_source::poll_url(url.clone(), cfg.node_name.clone()),
        ),
    }
}

/// One read of every source. With a manifest URL, a manifest directory that does not
/// exist is no error (the URL alone may define the pods).
pub(super) async fn read_sources_once(cfg: &DaemonConfig) -> ScanResult {
    let (dir, node) = (cfg.manifest_dir.clone(), cfg.node_name.clone());
    let mut scan = tokio::task::spawn_blocking(move || podhost_source::scan_dir(&dir, &node))
        .await
        .unwrap_or_default();
    if let Some(url) = &cfg.manifest_url {
        scan.errors
            .retain(|e| !matches!(e, ManifestError::DirMissing { .. }));
        let answer = podhost_source::read_url_once(url, &cfg.node_name).await;
        scan = podhost_source::combine(&scan, &answer);
    }
    scan
}

/// A stream that yields `scan` and then stays open (the manager ends when its source
/// ends) until the receiver is dropped.
pub(super) fn hold(scan: ScanResult) -> mpsc::Receiver<ScanResult> {
    let (tx, rx) = mpsc::channel(1);
    tokio::spawn(async move {
        if tx.send(scan).await.is_ok() {
            tx.closed().await;
        }
    });
    rx
}
