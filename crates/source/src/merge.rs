//! Two static pod sources → one stream of authoritative scans: the manifest
//! directory's and the manifest URL's latest results side by side. The first merged
//! scan waits for both sources' first results (the URL's is bounded by its 10 s
//! timeout), because the consumer stops the pods of a previous run that its first scan
//! lacks: a URL pod must not be stopped only because the directory answered first.

use std::collections::HashMap;
use std::path::PathBuf;

use tokio::sync::mpsc;

use super::watch::Fingerprint;
use super::{ManifestError, ScanResult};

/// Merges the scans of `dir` and `url` (see the module's doc). A pod of the URL with
/// the namespace and name of a directory pod is dropped and reported: the directory
/// wins. Ends (closing the returned receiver) when either source ends.
pub fn merge_sources(
    dir: mpsc::Receiver<ScanResult>,
    url: mpsc::Receiver<ScanResult>,
) -> mpsc::Receiver<ScanResult> {
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(run(dir, url, tx));
    rx
}

async fn run(
    mut dir: mpsc::Receiver<ScanResult>,
    mut url: mpsc::Receiver<ScanResult>,
    tx: mpsc::Sender<ScanResult>,
) {
    let (mut latest_dir, mut latest_url) = (None, None);
    let mut last_sent: Option<Fingerprint> = None;
    loop {
        tokio::select! {
            _ = tx.closed() => return,
            scan = dir.recv() => match scan {
                Some(scan) => latest_dir = Some(scan),
                None => return,
            },
            scan = url.recv() => match scan {
                Some(scan) => latest_url = Some(scan),
                None => return,
            },
        }
        let (Some(d), Some(u)) = (&latest_dir, &latest_url) else {
            continue;
        };
        let merged = combine(d, u);
        let fingerprint = Fingerprint::of(&merged);
        if last_sent.as_ref() == Some(&fingerprint) {
            continue;
        }
        last_sent = Some(fingerprint);
        if tx.send(merged).await.is_err() {
            return;
        }
    }
}

/// The directory's pods and errors, then the URL's pods that do not clash with them,
/// then the URL's errors.
pub fn combine(dir: &ScanResult, url: &ScanResult) -> ScanResult {
    let mut merged = dir.clone();
    let by_name: HashMap<(&str, &str), &PathBuf> = dir
        .pods
        .iter()
        .map(|p| ((p.namespace.as_str(), p.name.as_str()), &p.path))
        .collect();
    for pod in &url.pods {
        match by_name.get(&(pod.namespace.as_str(), pod.name.as_str())) {
            Some(first) => merged.errors.push(ManifestError::DuplicatePod {
                path: pod.path.clone(),
                first: (*first).clone(),
                namespace: pod.namespace.clone(),
                name: pod.name.clone(),
            }),
            None => merged.pods.push(pod.clone()),
        }
    }
    merged.errors.extend(url.errors.iter().cloned());
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods_from_body;

    fn pod(name: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers: [{{name: c, image: i}}]\n"
        )
    }

    fn dir_with(names: &[&str]) -> (tempfile::TempDir, ScanResult) {
        let d = tempfile::tempdir().unwrap();
        for n in names {
            std::fs::write(d.path().join(format!("{n}.yaml")), pod(n)).unwrap();
        }
        let scan = crate::scan_dir(d.path(), "node");
        (d, scan)
    }

    #[test]
    fn the_directory_wins_a_name_clash_and_errors_of_both_are_kept() {
        let (_d, dir) = dir_with(&["a", "b"]);
        let body = format!(
            "{}",
            serde_json::json!({"apiVersion": "v1", "kind": "PodList", "items": [
                serde_yaml_ng::from_str::<serde_json::Value>(&pod("b")).unwrap(),
                serde_yaml_ng::from_str::<serde_json::Value>(&pod("c")).unwrap(),
            ]})
        );
        let mut url = pods_from_body("http://h/p", body.as_bytes(), "node").unwrap();
        url.errors.push(ManifestError::UrlStatus {
            url: "http://h/p".into(),
            status: "500 Internal Server Error".into(),
        });
        let merged = combine(&dir, &url);
        let names: Vec<_> = merged.pods.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["a-node", "b-node", "c-node"]);
        assert_eq!(merged.errors.len(), 2, "{:?}", merged.errors);
        assert!(
            merged.errors[0]
                .to_string()
                .contains("b-node is already defined by")
        );
        assert!(merged.errors[1].to_string().contains("answered 500"));
    }

    #[tokio::test]
    async fn the_first_merged_scan_waits_for_both_sources() {
        let (dir_tx, dir_rx) = mpsc::channel(4);
        let (url_tx, url_rx) = mpsc::channel(4);
        let mut merged = merge_sources(dir_rx, url_rx);
        let (_d, dir) = dir_with(&["a"]);
        dir_tx.send(dir).await.unwrap();
        tokio::task::yield_now().await;
        assert!(merged.try_recv().is_err(), "sent before the URL answered");
        let url = pods_from_body("http://h/p", pod("u").as_bytes(), "node").unwrap();
        url_tx.send(url.clone()).await.unwrap();
        let first = merged.recv().await.unwrap();
        assert_eq!(first.pods.len(), 2);
        // The same URL answer again changes nothing: nothing is sent.
        url_tx.send(url).await.unwrap();
        url_tx.send(ScanResult::default()).await.unwrap();
        let next = merged.recv().await.unwrap();
        assert_eq!(next.pods.len(), 1, "the URL's pods are gone");
        drop(url_tx);
        assert!(merged.recv().await.is_none(), "ends with a source");
    }
}
