//! The node's credentials at start, as the kubelet gets them: the kubeconfig as it is,
//! or — with `--bootstrap-kubeconfig` and a kubeconfig that is missing or whose
//! certificate has expired — a certificate asked for with the bootstrap credentials;
//! then, with `--rotate-certificates`, a new one at a jittered 70–90 % of each
//! certificate's lifetime, swapped into the running client.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::cluster_flags::ClusterConfig;
use podhost_cluster::ClusterError;
use podhost_cluster::certs::bootstrap::{self, Start, request_and_store};
use podhost_cluster::certs::pair::Validity;
use podhost_cluster::certs::resolver::CurrentPair;
use podhost_cluster::certs::store::CertStore;
use podhost_cluster::certs::{deadline, kubeconfig_out};
use podhost_cluster::record::Recorder;

/// The longest wait between two failed renewals.
const RETRY_AT_MOST: Duration = Duration::from_secs(300);

/// The client the node side uses, and the rotation task when rotation is on.
pub struct NodeCredentials {
    pub client: kube::Client,
    pub rotation: Option<tokio::task::JoinHandle<()>>,
}

/// Gets the node's client: bootstraps first when needed.
pub async fn node_client(
    cluster: &ClusterConfig,
    node_name: &str,
) -> Result<NodeCredentials, ClusterError> {
    let recorder = cluster
        .record
        .as_deref()
        .map(Recorder::create)
        .transpose()?;
    if cluster.bootstrap_kubeconfig.is_none() && !cluster.rotate_certificates {
        let client =
            podhost_cluster::client::from_kubeconfig_recorded(&cluster.kubeconfig, recorder)
                .await?;
        return Ok(NodeCredentials {
            client,
            rotation: None,
        });
    }
    let store = CertStore::new(cluster.cert_dir.clone());
    if let Some(bootstrap) = &cluster.bootstrap_kubeconfig {
        ensure_kubeconfig(cluster, bootstrap, &store, node_name, recorder.clone()).await?;
    }
    let pair = bootstrap::initial_pair(&store, &cluster.kubeconfig, SystemTime::now())?;
    let what = store.current_path().display().to_string();
    let validity = pair.validity(&what)?;
    let current = CurrentPair::new(pair.certified_key(&what)?);
    let kubeconfig = kubeconfig_out::read(&cluster.kubeconfig)?;
    let client = podhost_cluster::certs::client::build(
        kubeconfig,
        &cluster.kubeconfig,
        current.clone(),
        recorder.clone(),
    )
    .await?;
    let rotation = cluster.rotate_certificates.then(|| {
        tokio::spawn(rotate(
            Renewer {
                client: client.clone(),
                bootstrap: cluster.bootstrap_kubeconfig.clone(),
                recorder,
                store,
                current,
                node_name: node_name.to_string(),
            },
            validity,
        ))
    });
    Ok(NodeCredentials { client, rotation })
}

/// The kubelet's LoadClientCert: keep a kubeconfig whose certificate is still valid;
/// else reuse a valid pair of the cert dir; else ask for one with the bootstrap
/// credentials. Either of the last two writes the kubeconfig.
async fn ensure_kubeconfig(
    cluster: &ClusterConfig,
    bootstrap: &std::path::Path,
    store: &CertStore,
    node_name: &str,
    recorder: Option<Recorder>,
) -> Result<(), ClusterError> {
    let start = bootstrap::decide(&cluster.kubeconfig, store, SystemTime::now());
    if start == Start::KubeconfigValid {
        tracing::info!(kubeconfig = %cluster.kubeconfig.display(), "kubeconfig has a valid client certificate; no bootstrap");
        return Ok(());
    }
    let bootstrap_config = kubeconfig_out::read(bootstrap)?;
    let what = store.current_path().display().to_string();
    if start == Start::Request {
        let started = std::time::Instant::now();
        tracing::info!(bootstrap = %bootstrap.display(), cert_dir = %store.dir().display(),
            "no valid client certificate: asking the cluster for one (TLS bootstrap)");
        let client = podhost_cluster::client::from_kubeconfig_recorded(bootstrap, recorder).await?;
        let pair = request_and_store(client, store, node_name).await?;
        tracing::info!(
            serial = %pair.validity(&what)?.serial,
            elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "node client certificate bootstrapped"
        );
    }
    kubeconfig_out::write_node_kubeconfig(
        &bootstrap_config,
        bootstrap,
        &cluster.kubeconfig,
        &store.current_path(),
    )?;
    tracing::info!(kubeconfig = %cluster.kubeconfig.display(), "kubeconfig written");
    Ok(())
}

/// What a renewal needs.
struct Renewer {
    /// The node's client (its current certificate).
    client: kube::Client,
    /// Asked with instead when the current certificate has expired (the kubelet does the
    /// same: an expired certificate cannot ask for its successor).
    bootstrap: Option<std::path::PathBuf>,
    recorder: Option<Recorder>,
    store: CertStore,
    current: Arc<CurrentPair>,
    node_name: String,
}

impl Renewer {
    async fn renew(&self, validity: &Validity) -> Result<Validity, ClusterError> {
        let what = self.store.current_path().display().to_string();
        let client = match &self.bootstrap {
            Some(bootstrap) if !validity.valid_at(SystemTime::now()) => {
                tracing::warn!(serial = %validity.serial, "the client certificate has expired: renewing with the bootstrap credentials");
                podhost_cluster::client::from_kubeconfig_recorded(bootstrap, self.recorder.clone())
                    .await?
            }
            _ => self.client.clone(),
        };
        let pair = request_and_store(client, &self.store, &self.node_name).await?;
        self.current.swap(pair.certified_key(&what)?);
        Ok(pair.validity(&what)?)
    }
}

/// Renews the certificate at each deadline for the daemon's life; a failed renewal is
/// retried with a doubling wait.
async fn rotate(renewer: Renewer, mut validity: Validity) {
    loop {
        let due = deadline::jittered_rotation_deadline(&validity);
        let wait = due
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO);
        tracing::info!(serial = %validity.serial, expires = %chrono::DateTime::<chrono::Utc>::from(validity.not_after),
            rotate_in_secs = wait.as_secs(), "client certificate rotation scheduled");
        tokio::time::sleep(wait).await;
        let mut retry = Duration::from_secs(1);
        loop {
            match renewer.renew(&validity).await {
                Ok(next) => {
                    tracing::info!(old_serial = %validity.serial, serial = %next.serial,
                        expires = %chrono::DateTime::<chrono::Utc>::from(next.not_after), "client certificate rotated");
                    if !next.valid_at(SystemTime::now()) {
                        tracing::warn!(serial = %next.serial, "the signer issued a certificate that has already expired (is its signing duration shorter than its 5 min backdating?)");
                    }
                    validity = next;
                    break;
                }
                Err(error) => {
                    tracing::warn!(%error, retry_in_secs = retry.as_secs(), "client certificate rotation failed");
                    tokio::time::sleep(retry).await;
                    retry = (retry * 2).min(RETRY_AT_MOST);
                }
            }
        }
    }
}
