//! The rotated client certificate reaches every clone of the node's client without
//! rebuilding it: a real TLS server on loopback (rustls, client certificates verified
//! against a test CA) records the serial each new connection presents, while the
//! client built by `cluster::certs::client` asks `/version` before and after
//! `CurrentPair::swap`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use podhost::cluster::certs::pair::CertPair;
use podhost::cluster::certs::resolver::CurrentPair;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;

struct Ca {
    cert: rcgen::Certificate,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

fn ca() -> Ca {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "swap-test-ca");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let cert = params.self_signed(&key).unwrap();
    Ca {
        cert,
        issuer: rcgen::Issuer::new(params, key),
    }
}

/// A leaf of `ca` with `serial`: a server certificate for 127.0.0.1, or a node's
/// client certificate.
fn leaf(ca: &Ca, serial: u8, server: bool) -> CertPair {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    if server {
        params.subject_alt_names = vec![rcgen::SanType::IpAddress([127, 0, 0, 1].into())];
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    } else {
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "system:node:swap");
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    }
    params.serial_number = Some(rcgen::SerialNumber::from_slice(&[serial]));
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let cert = params.signed_by(&key, &ca.issuer).unwrap();
    CertPair {
        cert_pem: cert.pem().into_bytes(),
        key_pem: key.serialize_pem().into_bytes(),
    }
}

/// Serves `/version` over TLS, requiring a client certificate of `ca`; returns the
/// port and the serials the connections presented, in order.
async fn server(ca: &Ca, cert: &CertPair) -> (u16, Arc<Mutex<Vec<String>>>) {
    use rustls::pki_types::pem::PemObject;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.cert.der().clone()).unwrap();
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .unwrap();
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert.cert_pem)
        .collect::<Result<_, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(&cert.key_pem).unwrap();
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let Ok(tls) = acceptor.accept(tcp).await else {
                continue;
            };
            let presented = tls.get_ref().1.peer_certificates().unwrap()[0].clone();
            let (_, cert) = x509_parser::parse_x509_certificate(presented.as_ref()).unwrap();
            record
                .lock()
                .unwrap()
                .push(hex::encode_upper(cert.raw_serial()));
            tokio::spawn(async move {
                let service = service_fn(|_req| async {
                    let body = r#"{"major":"1","minor":"20","gitVersion":"v1.20.2","gitCommit":"","gitTreeState":"","buildDate":"","goVersion":"","compiler":"","platform":""}"#;
                    Ok::<_, Infallible>(
                        hyper::Response::builder()
                            .header("content-type", "application/json")
                            .body(Full::new(Bytes::from_static(body.as_bytes())))
                            .unwrap(),
                    )
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (port, seen)
}

#[tokio::test]
async fn every_clone_presents_the_swapped_certificate_on_its_next_connection() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let ca = ca();
    let (port, seen) = server(&ca, &leaf(&ca, 0x53, true)).await;
    let first = leaf(&ca, 0x0a, false);
    let second = leaf(&ca, 0x0b, false);

    let dir = tempfile::tempdir().unwrap();
    let pair_file = dir.path().join("kubelet-client-current.pem");
    std::fs::write(&pair_file, first.combined()).unwrap();
    let kubeconfig = dir.path().join("node.kubeconfig");
    let ca_pem = ca.cert.pem();
    let ca_file = dir.path().join("ca.crt");
    std::fs::write(&ca_file, ca_pem).unwrap();
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{port}\n    \
             certificate-authority: {ca}\nusers:\n- name: u\n  user:\n    client-certificate: {p}\n    client-key: {p}\n\
             contexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n",
            ca = ca_file.display(),
            p = pair_file.display()
        ),
    )
    .unwrap();

    let current = CurrentPair::new(first.certified_key("first").unwrap());
    let client = podhost::cluster::certs::client::build(
        podhost::cluster::certs::kubeconfig_out::read(&kubeconfig).unwrap(),
        &kubeconfig,
        current.clone(),
        None,
    )
    .await
    .unwrap();
    let clone = client.clone();

    assert_eq!(client.apiserver_version().await.unwrap().minor, "20");
    assert_eq!(*seen.lock().unwrap(), ["0A"]);
    // Kept-alive: the next request reuses that connection.
    clone.apiserver_version().await.unwrap();
    assert_eq!(*seen.lock().unwrap(), ["0A"]);

    current.swap(second.certified_key("second").unwrap());
    clone.apiserver_version().await.unwrap();
    client.apiserver_version().await.unwrap();
    assert_eq!(*seen.lock().unwrap(), ["0A", "0B"]);
}
