//! Which registries may be spoken to over plain HTTP without `--insecure-registry`,
//! and how to recognize one that speaks it.
//!
//! A registry on this host's loopback (`localhost`, 127.0.0.0/8, `[::1]`, any port)
//! is tried over HTTPS first and, when it answers the TLS handshake in plain HTTP,
//! over plain HTTP, as containerd's CRI does (1.7 and later; docker treats
//! 127.0.0.0/8 as insecure too). Nothing on the network sees such traffic, and
//! Kubernetes' own tests run a plain-HTTP registry on the node's `localhost:5000`.
//! A certificate that fails verification is an error and stays one: only a server
//! that does not speak TLS at all makes the pull go on in plain HTTP.

use std::error::Error;
use std::io;
use std::net::IpAddr;

/// Whether `registry` (`host[:port]` as written in a reference, an IPv6 host in
/// brackets) is on this host's loopback: `localhost`, 127.0.0.0/8 or `::1`.
pub(super) fn is_loopback(registry: &str) -> bool {
    host_of(registry).is_some_and(|host| {
        host.eq_ignore_ascii_case("localhost")
            || host
                .parse::<IpAddr>()
                .is_ok_and(|ip| ip.to_canonical().is_loopback())
    })
}

/// The host of `host[:port]` or `[v6]:port`; `None` when it is neither.
fn host_of(registry: &str) -> Option<&str> {
    let is_port = |p: &str| p.bytes().all(|b| b.is_ascii_digit()) && p.parse::<u16>().is_ok();
    if let Some(rest) = registry.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return match after.strip_prefix(':') {
            None if after.is_empty() => Some(host),
            Some(port) if is_port(port) => Some(host),
            _ => None,
        };
    }
    match registry.split_once(':') {
        None => Some(registry),
        Some((host, port)) if is_port(port) => Some(host),
        Some(_) => None,
    }
}

/// Whether `e` says the server answered the TLS handshake with something that is
/// not TLS at all: rustls's `InvalidContentType`, the first byte of the answer
/// being no TLS record type (an HTTP answer starts with `H`). Certificate errors,
/// TLS alerts, resets and timeouts are not this.
pub(super) fn answered_tls_in_plain_http(e: &(dyn Error + 'static)) -> bool {
    matches!(
        tls_error_in(e),
        Some(rustls::Error::InvalidMessage(
            rustls::InvalidMessage::InvalidContentType
        ))
    )
}

/// The first rustls error in `e`'s chain of causes.
fn tls_error_in<'a>(e: &'a (dyn Error + 'static)) -> Option<&'a rustls::Error> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(tls) = err.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        // An io::Error's `source` skips the error it wraps (and tokio-rustls's
        // handshake error comes in an io::Error in an io::Error): go into that one.
        cur = match err.downcast_ref::<io::Error>().and_then(io::Error::get_ref) {
            Some(wrapped) => Some(wrapped as &(dyn Error + 'static)),
            None => err.source(),
        };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_with_and_without_ports() {
        for registry in [
            "localhost:5000",
            "LocalHost:5000",
            "localhost:1",
            "127.0.0.1",
            "127.0.0.1:5000",
            "127.1.2.3:443",
            "127.255.255.254:65535",
            "[::1]",
            "[::1]:5000",
            "[0:0:0:0:0:0:0:1]:5000",
            "[::ffff:127.0.0.1]:5000",
        ] {
            assert!(is_loopback(registry), "{registry}");
        }
    }

    #[test]
    fn other_hosts_are_not_loopback() {
        for registry in [
            "docker.io",
            "registry.k8s.io",
            "localhost.example.com:5000",
            "my-localhost:5000",
            "128.0.0.1:5000",
            "10.0.0.1:5000",
            "0.0.0.0:5000",
            "[::2]:5000",
            "[::]:5000",
            "[fe80::1]:5000",
            "127.1:5000",
            // Malformed: no bracket around IPv6, a port that is no port.
            "::1",
            "::1:5000",
            "localhost:",
            "localhost:http",
            "localhost:65536",
            "127.0.0.1:5000:1",
            "[::1]5000",
            "[::1",
            "",
        ] {
            assert!(!is_loopback(registry), "{registry}");
        }
    }

    #[test]
    fn only_invalid_content_type_is_a_plain_http_answer() {
        let plain = rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType);
        assert!(answered_tls_in_plain_http(&plain));
        // As tokio-rustls hands it up: inside an io::Error.
        let wrapped = io::Error::new(io::ErrorKind::InvalidData, plain.clone());
        assert!(answered_tls_in_plain_http(&wrapped));
        // As reqwest's connector hands that up: in one more io::Error.
        let twice = io::Error::other(io::Error::new(io::ErrorKind::InvalidData, plain));
        assert!(answered_tls_in_plain_http(&twice));

        let untrusted = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        assert!(!answered_tls_in_plain_http(&untrusted));
        let untrusted = io::Error::new(io::ErrorKind::InvalidData, untrusted);
        assert!(!answered_tls_in_plain_http(&untrusted));
        let alert = rustls::Error::AlertReceived(rustls::AlertDescription::HandshakeFailure);
        assert!(!answered_tls_in_plain_http(&alert));
        let other = rustls::Error::InvalidMessage(rustls::InvalidMessage::MessageTooLarge);
        assert!(!answered_tls_in_plain_http(&other));
        let reset = io::Error::new(io::ErrorKind::ConnectionReset, "reset by peer");
        assert!(!answered_tls_in_plain_http(&reset));
    }

    /// What oci_client's HTTPS request for a manifest on `registry` fails with.
    async fn https_manifest_error(registry: &str) -> reqwest::Error {
        use oci_client::client::{ClientConfig, ClientProtocol};
        let client = oci_client::Client::try_from(ClientConfig {
            protocol: ClientProtocol::Https,
            ..ClientConfig::default()
        })
        .unwrap();
        let reference =
            oci_client::Reference::with_tag(registry.into(), "pause".into(), "testing".into());
        let auth = oci_client::secrets::RegistryAuth::Anonymous;
        let accept = [oci_client::manifest::OCI_IMAGE_MEDIA_TYPE];
        match client.pull_manifest_raw(&reference, &auth, &accept).await {
            Err(oci_client::errors::OciDistributionError::RequestError(r)) => r,
            other => panic!("expected a request error, got {other:?}"),
        }
    }

    /// A server on 127.0.0.1 that hands every connection to `answer`.
    async fn serve<F, Fut>(answer: F) -> String
    where
        F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                tokio::spawn(answer(conn));
            }
        });
        addr
    }

    #[tokio::test]
    async fn a_plain_http_server_answering_the_handshake_is_recognized() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        // What Go's net/http answers to bytes that are no HTTP request.
        let addr = serve(|mut conn| async move {
            let mut hello = [0u8; 4096];
            let _ = conn.read(&mut hello).await;
            let _ = conn
                .write_all(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n400 Bad Request")
                .await;
        })
        .await;
        let e = https_manifest_error(&addr).await;
        assert!(answered_tls_in_plain_http(&e), "{e:?}");
        // Not retried, and reported as such.
        let e = oci_client::errors::OciDistributionError::RequestError(e);
        assert!(!super::super::retry::oci_is_transient(&e));
        let ctx = super::super::error::Ctx {
            reference: format!("{addr}/pause:testing"),
            registry: addr.clone(),
            credentials: "/root/.docker/config.json".into(),
            sent: "no credentials were sent".into(),
        };
        let err = ctx.oci("manifest", e);
        assert_eq!(
            err.to_string(),
            format!(
                "pulling \"{addr}/pause:testing\": registry {addr} speaks plain HTTP, not \
                 HTTPS; if it is meant to be reached so, start podhost with \
                 --insecure-registry {addr}"
            )
        );
    }

    #[tokio::test]
    async fn an_untrusted_certificate_is_not_a_plain_http_answer() {
        let signed = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
        let key =
            rustls::pki_types::PrivateKeyDer::Pkcs8(signed.signing_key.serialize_der().into());
        let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![signed.cert.der().clone()], key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
        let addr = serve(move |conn| {
            let acceptor = acceptor.clone();
            async move {
                let _ = acceptor.accept(conn).await;
            }
        })
        .await;
        let e = https_manifest_error(&addr).await;
        // The chain is read down to rustls's error, which names the certificate.
        assert!(
            matches!(tls_error_in(&e), Some(rustls::Error::InvalidCertificate(_))),
            "{e:?}"
        );
        assert!(!answered_tls_in_plain_http(&e), "{e:?}");
    }
}
