//! The http static pod source (`--manifest-url`), as the kubelet's
//! `pkg/kubelet/config/http.go`: the URL is fetched at once and then every period; the
//! answer must be 200 OK with one Pod or a PodList (YAML or JSON), or an empty body (no
//! pods). A failed fetch, another status or an unusable body is an error in the sent
//! [`ScanResult`], whose pods are then the ones of the last good answer (they keep
//! running). Pods get the kubelet's http identity: UID over the pod ‖ `url:<url>`,
//! `kubernetes.io/config.source: http`, no NoExecute toleration.

mod fetch;
mod headers;
mod parse;

use std::time::Duration;

use reqwest::header::HeaderMap;
use tokio::sync::mpsc;

use super::ScanResult;
use super::watch::Fingerprint;
pub use headers::parse_headers;
pub use parse::pods_from_body;

/// The kubelet's http client timeout for the manifest URL.
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(10);
/// Polls never come faster than this, whatever `--http-check-frequency` says.
const MIN_PERIOD: Duration = Duration::from_millis(100);

/// A `--manifest-url` flag that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ManifestUrlError {
    /// The URL does not parse or is not http/https.
    #[error("--manifest-url {url}: {why}; give an absolute http:// or https:// URL")]
    Url { url: String, why: String },
    /// A `--manifest-url-header` pair that cannot be sent.
    #[error("--manifest-url-header {pair:?}: {why}; write headers as name:value,name:value")]
    Header { pair: String, why: String },
}

/// Where and how to poll the manifest URL.
#[derive(Debug, Clone)]
pub struct UrlSource {
    /// The URL as given; also what the pods' UIDs hash (`url:<url>`).
    pub url: String,
    /// Sent with every request (`--manifest-url-header`).
    pub headers: HeaderMap,
    /// Time between the end of one poll and the start of the next (kubelet: 20 s).
    pub period: Duration,
}

impl UrlSource {
    /// Checks the URL (absolute, http or https) and parses the header flag values.
    pub fn new(
        url: &str,
        header_flags: &[String],
        period: Duration,
    ) -> Result<Self, ManifestUrlError> {
        let bad = |why: String| ManifestUrlError::Url {
            url: url.to_string(),
            why,
        };
        let parsed = reqwest::Url::parse(url).map_err(|e| bad(e.to_string()))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(bad(format!(
                "scheme {:?} is not http or https",
                parsed.scheme()
            )));
        }
        Ok(Self {
            url: url.to_string(),
            headers: parse_headers(header_flags)?,
            period,
        })
    }
}

/// Polls `source` for node `node_name` in a tokio task: a [`ScanResult`] after the
/// first poll, then after every poll whose pods (by UID) or errors differ from the last
/// sent. Stops when the receiver is dropped.
pub fn poll_url(source: UrlSource, node_name: String) -> mpsc::Receiver<ScanResult> {
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(run(source, node_name, tx));
    rx
}

/// Fetches `source` once: the pods of a good answer, or the error (with no pods).
pub async fn read_url_once(source: &UrlSource, node_name: &str) -> ScanResult {
    let mut poller = Poller::new(source.clone(), node_name.to_string());
    poller.poll().await
}

async fn run(source: UrlSource, node_name: String, tx: mpsc::Sender<ScanResult>) {
    let period = source.period.max(MIN_PERIOD);
    tracing::info!(url = %source.url, every = ?period, "polling the manifest URL");
    let mut poller = Poller::new(source, node_name);
    let mut last_sent: Option<Fingerprint> = None;
    loop {
        let scan = poller.poll().await;
        let fingerprint = Fingerprint::of(&scan);
        if last_sent.as_ref() != Some(&fingerprint) {
            last_sent = Some(fingerprint);
            if tx.send(scan).await.is_err() {
                return;
            }
        }
        tokio::select! {
            _ = tx.closed() => return,
            () = tokio::time::sleep(period) => {}
        }
    }
}

/// The source's memory between polls.
struct Poller {
    source: UrlSource,
    node_name: String,
    client: Result<reqwest::Client, super::ManifestError>,
    /// The last body fetched with 200 OK, and whether it gave pods.
    last_body: Option<(Vec<u8>, bool)>,
    /// The pods of the last good answer: kept while the URL fails.
    kept: Vec<super::StaticPod>,
    failing: bool,
}

impl Poller {
    fn new(source: UrlSource, node_name: String) -> Self {
        Self {
            client: fetch::client(&source.url),
            source,
            node_name,
            last_body: None,
            kept: Vec::new(),
            failing: false,
        }
    }

    async fn poll(&mut self) -> ScanResult {
        let body = match &self.client {
            Ok(client) => fetch::fetch(client, &self.source).await,
            Err(e) => Err(e.clone()),
        };
        let scan = match body {
            Err(e) => ScanResult {
                pods: self.kept.clone(),
                errors: vec![e],
            },
            // Unchanged bytes that gave pods: nothing to parse again (as the kubelet).
            Ok(body) if matches!(&self.last_body, Some((last, true)) if *last == body) => {
                ScanResult {
                    pods: self.kept.clone(),
                    errors: Vec::new(),
                }
            }
            Ok(body) => {
                let answer = pods_from_body(&self.source.url, &body, &self.node_name);
                let usable = answer.is_ok();
                self.last_body = Some((body, usable));
                match answer {
                    Ok(scan) => {
                        self.kept = scan.pods.clone();
                        scan
                    }
                    Err(errors) => ScanResult {
                        pods: self.kept.clone(),
                        errors,
                    },
                }
            }
        };
        self.log_transition(&scan);
        scan
    }

    fn log_transition(&mut self, scan: &ScanResult) {
        let failing = !scan.errors.is_empty();
        if failing && !self.failing {
            for e in &scan.errors {
                tracing::warn!(error = %e, "failed to read pods from the manifest URL");
            }
        } else if !failing && self.failing {
            tracing::info!(url = %self.source.url, "read pods from the manifest URL again");
        }
        self.failing = failing;
    }
}
