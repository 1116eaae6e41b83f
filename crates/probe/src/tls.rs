//! TLS for HTTPS probes and gRPC `mode: TLS`: the kubelet verifies no certificate
//! (`InsecureSkipVerify`), but the handshake's signatures are still checked, so the
//! peer holds the key of the certificate it shows.

use std::sync::{Arc, OnceLock};

use rustls::DigitallySignedStruct;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use podhost_model::probe::Outcome;

#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

type Config = Result<Arc<rustls::ClientConfig>, rustls::Error>;

/// A client config per ALPN protocol (`http/1.1` or `h2`), built once.
fn config(alpn: &'static [u8]) -> Config {
    static HTTP1: OnceLock<Config> = OnceLock::new();
    static H2: OnceLock<Config> = OnceLock::new();
    let cell = if alpn == b"h2" { &H2 } else { &HTTP1 };
    cell.get_or_init(|| {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth();
        config.alpn_protocols = vec![alpn.to_vec()];
        Ok(Arc::new(config))
    })
    .clone()
}

/// TLS over `stream` to `host` (the SNI when it is a name), offering `alpn`.
pub async fn connect(
    stream: TcpStream,
    host: &str,
    alpn: &'static [u8],
) -> Result<TlsStream<TcpStream>, Outcome> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let name = ServerName::try_from(bare.to_string())
        .map_err(|e| Outcome::Failure(format!("invalid TLS server name {host:?}: {e}")))?;
    let config =
        config(alpn).map_err(|e| Outcome::Unknown(format!("TLS client configuration: {e}")))?;
    TlsConnector::from(config)
        .connect(name, stream)
        .await
        .map_err(|e| Outcome::Failure(format!("TLS handshake with {host}: {e}")))
}
