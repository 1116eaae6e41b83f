//! The API client from `--kubeconfig`, recording its exchanges when `--kube-record` is
//! given.

use std::path::Path;

use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};

use super::ClusterError;
use super::record::Recorder;

/// Builds the client from the kubeconfig's current context (client certificate, token
/// or exec plugin, as kube-rs supports them).
pub async fn from_kubeconfig(
    path: &Path,
    record: Option<&Path>,
) -> Result<kube::Client, ClusterError> {
    let recorder = record.map(Recorder::create).transpose()?;
    from_kubeconfig_recorded(path, recorder).await
}

/// As [`from_kubeconfig`], recording into `recorder` (shared by the bootstrap client
/// and the node's, so that one record file holds both).
pub async fn from_kubeconfig_recorded(
    path: &Path,
    recorder: Option<Recorder>,
) -> Result<kube::Client, ClusterError> {
    let kubeconfig = Kubeconfig::read_from(path).map_err(|source| ClusterError::Kubeconfig {
        path: path.to_path_buf(),
        source,
    })?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|source| ClusterError::Kubeconfig {
            path: path.to_path_buf(),
            source,
        })?;
    let builder = ClientBuilder::try_from(config).map_err(|source| ClusterError::Client {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(match recorder {
        None => builder.build(),
        Some(recorder) => builder.with_layer(&recorder).build(),
    })
}
