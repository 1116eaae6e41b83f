//! The decisions and steps of TLS bootstrap that do not depend on the daemon: which
//! pair a starting node presents, and one request for a new pair stored in the cert dir.

use std::path::Path;
use std::time::SystemTime;

use super::CertError;
use super::csr;
use super::kubeconfig_out;
use super::pair::CertPair;
use super::store::CertStore;

/// What a starting node with `--bootstrap-kubeconfig` does (the kubelet's LoadClientCert).
#[derive(Debug, PartialEq, Eq)]
pub enum Start {
    /// The kubeconfig's client certificate is still valid: use it as it is.
    KubeconfigValid,
    /// The cert dir has a valid current pair: write the kubeconfig pointing at it.
    ReuseCertDir,
    /// Nothing valid: ask for a certificate with the bootstrap credentials.
    Request,
}

/// Decides how to start at `now`.
pub fn decide(kubeconfig: &Path, store: &CertStore, now: SystemTime) -> Start {
    if kubeconfig_out::still_valid(kubeconfig, now) {
        return Start::KubeconfigValid;
    }
    let what = store.current_path().display().to_string();
    match store.load_current() {
        Ok(Some(pair)) if pair.validity(&what).is_ok_and(|v| v.valid_at(now)) => {
            Start::ReuseCertDir
        }
        _ => Start::Request,
    }
}

/// The pair to present at `now`: the cert dir's current one (what rotation maintains),
/// else the one the kubeconfig names (a node given a certificate by hand) — unless the
/// current one has expired and the kubeconfig's has not.
pub fn initial_pair(
    store: &CertStore,
    kubeconfig: &Path,
    now: SystemTime,
) -> Result<CertPair, CertError> {
    let what = store.current_path().display().to_string();
    let current = store.load_current()?;
    if let Some(pair) = &current
        && pair.validity(&what)?.valid_at(now)
    {
        return Ok(pair.clone());
    }
    let configured = match kubeconfig_out::client_pair(kubeconfig) {
        Ok(pair) => pair,
        Err(error) if current.is_some() => {
            tracing::debug!(%error, "the kubeconfig names no usable pair; keeping the cert dir's");
            None
        }
        Err(error) => return Err(error),
    };
    let valid = |p: &CertPair| p.validity("kubeconfig").is_ok_and(|v| v.valid_at(now));
    match (current, configured) {
        (_, Some(configured)) if valid(&configured) => Ok(configured),
        (Some(current), _) => Ok(current),
        (None, Some(configured)) => Ok(configured),
        (None, None) => Err(CertError::Kubeconfig {
            path: kubeconfig.to_path_buf(),
            reason: "no client certificate and key (and none in the cert dir) to present".into(),
        }),
    }
}

/// One request with `client`'s credentials: the pending key (a restart mid-request)
/// or a new one, kept until the certificate is stored as the current pair.
pub async fn request_and_store(
    client: kube::Client,
    store: &CertStore,
    node_name: &str,
) -> Result<CertPair, CertError> {
    let pending = store.pending_key()?;
    let request = csr::make_request(node_name, pending.as_deref())?;
    if pending.is_none() {
        store.keep_pending_key(&request.key_pem)?;
    }
    let pair = match csr::request_certificate(client, &request).await {
        Ok(pair) => pair,
        Err(refused @ CertError::Refused { .. }) => {
            // That request is settled: the next one gets a new key, hence a new name.
            store.drop_pending_key();
            return Err(refused);
        }
        Err(other) => return Err(other),
    };
    store.store(&pair, SystemTime::now())?;
    store.drop_pending_key();
    Ok(pair)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A pair valid from 2025-01-01 for `days`.
    fn pair(days: u64) -> CertPair {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "system:node:n1");
        params.not_before = rcgen::date_time_ymd(2025, 1, 1);
        params.not_after = params.not_before + Duration::from_secs(86400 * days);
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let cert = params.self_signed(&key).unwrap();
        CertPair {
            cert_pem: cert.pem().into_bytes(),
            key_pem: key.serialize_pem().into_bytes(),
        }
    }

    fn at(y: i32, m: u8, d: u8) -> SystemTime {
        rcgen::date_time_ymd(y, m, d).into()
    }

    fn kubeconfig_naming(dir: &Path, file: &Path) -> std::path::PathBuf {
        let path = dir.join("node.kubeconfig");
        let f = file.display();
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: https://127.0.0.1:1}}\n\
                 users:\n- name: u\n  user: {{client-certificate: {f}, client-key: {f}}}\n\
                 contexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n"
            ),
        )
        .unwrap();
        path
    }

    #[test]
    fn a_missing_kubeconfig_and_an_empty_cert_dir_ask_for_a_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let store = CertStore::new(dir.path().join("pki"));
        let kubeconfig = dir.path().join("node.kubeconfig");
        assert_eq!(decide(&kubeconfig, &store, at(2025, 1, 2)), Start::Request);
        assert!(initial_pair(&store, &kubeconfig, at(2025, 1, 2)).is_err());
    }

    #[test]
    fn a_valid_kubeconfig_is_kept_and_an_expired_one_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let store = CertStore::new(dir.path().join("pki"));
        let own = dir.path().join("own.pem");
        std::fs::write(&own, pair(10).combined()).unwrap();
        let kubeconfig = kubeconfig_naming(dir.path(), &own);
        assert_eq!(
            decide(&kubeconfig, &store, at(2025, 1, 5)),
            Start::KubeconfigValid
        );
        assert_eq!(decide(&kubeconfig, &store, at(2025, 2, 1)), Start::Request);
        // The kubeconfig's own pair is presented while the cert dir has none.
        assert_eq!(
            initial_pair(&store, &kubeconfig, at(2025, 1, 5)).unwrap(),
            pair_from(&own)
        );
    }

    fn pair_from(file: &Path) -> CertPair {
        CertPair::from_combined("t", &std::fs::read(file).unwrap()).unwrap()
    }

    #[test]
    fn a_valid_pair_in_the_cert_dir_is_reused_and_preferred() {
        let dir = tempfile::tempdir().unwrap();
        let store = CertStore::new(dir.path().join("pki"));
        let stored = pair(30);
        store.store(&stored, at(2025, 1, 1)).unwrap();
        // A kubeconfig written by bootstrap names the current symlink; it expired
        // (the clock moved past it) but a newer pair would be reused.
        let old = dir.path().join("old.pem");
        std::fs::write(&old, pair(1).combined()).unwrap();
        let kubeconfig = kubeconfig_naming(dir.path(), &old);
        assert_eq!(
            decide(&kubeconfig, &store, at(2025, 1, 10)),
            Start::ReuseCertDir
        );
        assert_eq!(decide(&kubeconfig, &store, at(2025, 3, 1)), Start::Request);
        assert_eq!(
            initial_pair(&store, &kubeconfig, at(2025, 1, 10)).unwrap(),
            stored
        );
        // Both expired: the cert dir's (rotation renews it with the bootstrap credentials).
        assert_eq!(
            initial_pair(&store, &kubeconfig, at(2025, 3, 1)).unwrap(),
            stored
        );
    }

    #[test]
    fn an_expired_cert_dir_pair_gives_way_to_a_valid_kubeconfig_pair() {
        let dir = tempfile::tempdir().unwrap();
        let store = CertStore::new(dir.path().join("pki"));
        store.store(&pair(1), at(2025, 1, 1)).unwrap();
        let own = dir.path().join("own.pem");
        std::fs::write(&own, pair(100).combined()).unwrap();
        let kubeconfig = kubeconfig_naming(dir.path(), &own);
        assert_eq!(
            initial_pair(&store, &kubeconfig, at(2025, 2, 1)).unwrap(),
            pair_from(&own)
        );
    }
}
