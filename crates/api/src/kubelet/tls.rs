//! The kubelet API's TLS: the serving certificate from `--tls-cert-file` and
//! `--tls-private-key-file`, else a self-signed one kept in the root dir (made once,
//! reused after, as the kubelet's `<cert-dir>/kubelet.crt`); client certificates are
//! asked for and, when shown, verified against `--client-ca-file`. A caller without one
//! may still come in with a bearer token (checked per request).

use std::net::IpAddr;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;

use super::KubeletApiError;

/// Where the serving certificate comes from.
#[derive(Debug, Clone)]
pub enum ServingCert {
    /// `--tls-cert-file` (the chain, leaf first) and `--tls-private-key-file`.
    Files { cert: PathBuf, key: PathBuf },
    /// Made (or reused) in `dir` as `kubelet.crt`/`kubelet.key`, for these names.
    SelfSigned {
        dir: PathBuf,
        hostnames: Vec<String>,
        ips: Vec<IpAddr>,
    },
}

fn pem_error(
    path: &Path,
    what: &'static str,
) -> impl FnOnce(rustls::pki_types::pem::Error) -> KubeletApiError {
    let path = path.to_path_buf();
    move |e| KubeletApiError::Pem {
        path,
        what,
        reason: e.to_string(),
    }
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, KubeletApiError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(pem_error(path, "certificates"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem_error(path, "certificates"))?;
    if certs.is_empty() {
        return Err(KubeletApiError::Pem {
            path: path.to_path_buf(),
            what: "certificates",
            reason: "no CERTIFICATE block".into(),
        });
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, KubeletApiError> {
    PrivateKeyDer::from_pem_file(path).map_err(pem_error(path, "private key"))
}

/// The self-signed pair in `dir`, made when missing: a CA-less serving certificate for
/// the node's names and addresses, valid a year (the kubelet's choice).
fn self_signed(
    dir: &Path,
    hostnames: &[String],
    ips: &[IpAddr],
) -> Result<(PathBuf, PathBuf), KubeletApiError> {
    let cert = dir.join("kubelet.crt");
    let key = dir.join("kubelet.key");
    if cert.is_file() && key.is_file() {
        return Ok((cert, key));
    }
    let mut names: Vec<String> = hostnames.to_vec();
    names.extend(ips.iter().map(ToString::to_string));
    let generated =
        rcgen::generate_simple_self_signed(names).map_err(|e| KubeletApiError::SelfSigned {
            dir: dir.to_path_buf(),
            reason: e.to_string(),
        })?;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| KubeletApiError::Io { path, source }
    };
    // 0700: the key is written with the default mode, inside a directory only root reads.
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io(dir))?;
    podhost_disk::write_atomic(&key, generated.signing_key.serialize_pem().as_bytes()).map_err(
        |e| KubeletApiError::SelfSigned {
            dir: dir.to_path_buf(),
            reason: e.to_string(),
        },
    )?;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).map_err(io(&key))?;
    podhost_disk::write_atomic(&cert, generated.cert.pem().as_bytes()).map_err(|e| {
        KubeletApiError::SelfSigned {
            dir: dir.to_path_buf(),
            reason: e.to_string(),
        }
    })?;
    tracing::info!(cert = %cert.display(), "generated a self-signed serving certificate for the kubelet API");
    Ok((cert, key))
}

/// The server's TLS settings: HTTP/1.1 only (the exec upgrades need it).
pub fn server_config(
    serving: &ServingCert,
    client_ca: Option<&Path>,
) -> Result<Arc<ServerConfig>, KubeletApiError> {
    let (cert_path, key_path) = match serving {
        ServingCert::Files { cert, key } => (cert.clone(), key.clone()),
        ServingCert::SelfSigned {
            dir,
            hostnames,
            ips,
        } => self_signed(dir, hostnames, ips)?,
    };
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let verifier = match client_ca {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in read_certs(ca)? {
                roots.add(cert).map_err(|e| KubeletApiError::Pem {
                    path: ca.to_path_buf(),
                    what: "CA certificates",
                    reason: e.to_string(),
                })?;
            }
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .allow_unauthenticated()
                .build()
                .map_err(|e| KubeletApiError::ClientCa {
                    path: ca.to_path_buf(),
                    reason: e.to_string(),
                })?
        }
        None => WebPkiClientVerifier::no_client_auth(),
    };
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| KubeletApiError::Tls(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(read_certs(&cert_path)?, read_key(&key_path)?)
        .map_err(|e| KubeletApiError::Tls(format!("{}: {e}", cert_path.display())))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn a_self_signed_pair_is_made_once_with_a_private_key_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let pki = dir.path().join("pki");
        let serving = ServingCert::SelfSigned {
            dir: pki.clone(),
            hostnames: vec!["node-1".into(), "localhost".into()],
            ips: vec!["127.0.0.1".parse().unwrap()],
        };
        server_config(&serving, None).unwrap();
        let cert = std::fs::read(pki.join("kubelet.crt")).unwrap();
        assert_eq!(
            std::fs::metadata(pki.join("kubelet.key")).unwrap().mode() & 0o777,
            0o600
        );
        assert_eq!(std::fs::metadata(&pki).unwrap().mode() & 0o777, 0o700);
        server_config(&serving, None).unwrap();
        assert_eq!(std::fs::read(pki.join("kubelet.crt")).unwrap(), cert);
    }

    #[test]
    fn a_missing_client_ca_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let serving = ServingCert::SelfSigned {
            dir: dir.path().join("pki"),
            hostnames: vec!["node-1".into()],
            ips: vec![],
        };
        let missing = dir.path().join("no-such-ca.crt");
        let e = server_config(&serving, Some(&missing)).unwrap_err();
        assert!(e.to_string().contains("no-such-ca.crt"), "{e}");
    }
}
