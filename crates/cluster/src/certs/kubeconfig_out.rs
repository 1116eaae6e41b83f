//! The kubeconfigs of bootstrap: reading the client pair a kubeconfig names (to decide
//! whether it is still good), writing the node's kubeconfig that points at the cert
//! dir's current pair (as the kubelet does after bootstrap: the bootstrap kubeconfig's
//! server and CA, the pair's file as both certificate and key), and the copy without
//! client certificates that the rotating client starts from.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use base64::Engine;
use kube::config::{AuthInfo, Kubeconfig, NamedCluster};

use super::CertError;
use super::pair::CertPair;
use super::store::write_atomically;

fn kubeconfig_error(path: &Path, reason: impl ToString) -> CertError {
    CertError::Kubeconfig {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

/// Reads a kubeconfig, paths in it made absolute.
pub fn read(path: &Path) -> Result<Kubeconfig, CertError> {
    Kubeconfig::read_from(path).map_err(|e| kubeconfig_error(path, e))
}

/// The current context's cluster and user.
pub fn current(
    kubeconfig: &Kubeconfig,
    path: &Path,
) -> Result<(NamedCluster, AuthInfo), CertError> {
    let name = kubeconfig
        .current_context
        .as_deref()
        .ok_or_else(|| kubeconfig_error(path, "no current-context"))?;
    let context = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == name)
        .and_then(|c| c.context.clone())
        .ok_or_else(|| kubeconfig_error(path, format!("no context {name}")))?;
    let cluster = kubeconfig
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)
        .cloned()
        .ok_or_else(|| kubeconfig_error(path, format!("no cluster {}", context.cluster)))?;
    let user = context.user.unwrap_or_default();
    let auth = kubeconfig
        .auth_infos
        .iter()
        .find(|a| a.name == user)
        .and_then(|a| a.auth_info.clone())
        .unwrap_or_default();
    Ok((cluster, auth))
}

fn data_or_file(
    data: Option<&str>,
    file: Option<&String>,
    path: &Path,
) -> Result<Option<Vec<u8>>, CertError> {
    if let Some(data) = data {
        return base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map(Some)
            .map_err(|e| kubeconfig_error(path, e));
    }
    match file {
        Some(file) => std::fs::read(file)
            .map(Some)
            .map_err(CertError::io("cannot read", Path::new(file))),
        None => Ok(None),
    }
}

/// The client certificate and key the kubeconfig's current user presents, if it uses
/// one (a kubeconfig written by bootstrap names one file for both).
pub fn client_pair(path: &Path) -> Result<Option<CertPair>, CertError> {
    let kubeconfig = read(path)?;
    let (_, auth) = current(&kubeconfig, path)?;
    let cert = data_or_file(
        auth.client_certificate_data.as_deref(),
        auth.client_certificate.as_ref(),
        path,
    )?;
    let key_data = key_data(&auth);
    let key = data_or_file(key_data.as_deref(), auth.client_key.as_ref(), path)?;
    let (Some(cert), Some(key)) = (cert, key) else {
        return Ok(None);
    };
    let mut combined = cert;
    if key != combined {
        combined.extend_from_slice(&key);
    }
    CertPair::from_combined(&path.display().to_string(), &combined).map(Some)
}

/// The kubelet's test before bootstrapping: the kubeconfig exists, names a client
/// certificate and key that load, and the certificate has not expired.
pub fn still_valid(path: &Path, now: SystemTime) -> bool {
    match client_pair(path) {
        Ok(Some(pair)) => pair
            .validity(&path.display().to_string())
            .is_ok_and(|v| v.valid_at(now)),
        Ok(None) => false,
        Err(error) => {
            tracing::debug!(path = %path.display(), %error, "the kubeconfig has no usable client certificate");
            false
        }
    }
}

/// Writes `out`: the bootstrap kubeconfig's cluster (server, CA), and a user whose
/// certificate and key are both `pair_file` (the cert dir's current symlink, so that a
/// rotation needs no new kubeconfig).
pub fn write_node_kubeconfig(
    bootstrap: &Kubeconfig,
    bootstrap_path: &Path,
    out: &Path,
    pair_file: &Path,
) -> Result<(), CertError> {
    let (cluster, _) = current(bootstrap, bootstrap_path)?;
    let pair_file = pair_file.display().to_string();
    let doc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "default-cluster", "cluster": cluster.cluster}],
        "users": [{"name": "default-auth", "user": {
            "client-certificate": pair_file, "client-key": pair_file}}],
        "contexts": [{"name": "default-context", "context": {
            "cluster": "default-cluster", "user": "default-auth", "namespace": "default"}}],
        "current-context": "default-context",
    });
    let text = serde_yaml_ng::to_string(&doc).map_err(|e| kubeconfig_error(out, e))?;
    write_atomically(out, text.as_bytes(), 0o600)
}

/// The kubeconfig without client certificates: the rotating client presents the cert
/// dir's current pair itself, and bearer tokens (a bootstrap token) stay.
pub fn without_client_certificates(mut kubeconfig: Kubeconfig) -> Kubeconfig {
    for named in &mut kubeconfig.auth_infos {
        if let Some(auth) = named.auth_info.as_mut() {
            auth.client_certificate = None;
            auth.client_certificate_data = None;
            auth.client_key = None;
            auth.client_key_data = None;
        }
    }
    kubeconfig
}

/// Absolute `path` (relative to the working directory).
pub fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// kube keeps `client-key-data` as a secret string that only its serializer exposes.
fn key_data(auth: &AuthInfo) -> Option<String> {
    let json = serde_json::to_value(auth).ok()?;
    json.get("client-key-data")?.as_str().map(str::to_string)
}
