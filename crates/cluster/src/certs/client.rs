//! The node's API client when its certificate is managed here (bootstrap or
//! rotation): kube's own configuration from the kubeconfig (server, CA, bearer token,
//! headers) with the client certificate left out, and a TLS configuration whose
//! client-certificate resolver is the cert dir's current pair. kube-rs builds its
//! connector from a fixed identity, so the connection stack is assembled here:
//! connector → pool that is renewed when the pair rotates → kube's base-URI, auth and
//! header layers → the optional recorder.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use http_body_util::BodyExt;
use hyper::{Request, Response};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::client::{Body, ClientBuilder, ConfigExt, DynBody};
use kube::config::{KubeConfigOptions, Kubeconfig};
use tower::{BoxError, ServiceBuilder, ServiceExt};

use super::CertError;
use super::kubeconfig_out::without_client_certificates;
use super::resolver::CurrentPair;
use crate::record::Recorder;

type Connector = hyper_rustls::HttpsConnector<HttpConnector>;

/// Builds the client of `kubeconfig` that presents `pair`'s current certificate.
pub async fn build(
    kubeconfig: Kubeconfig,
    path: &Path,
    pair: Arc<CurrentPair>,
    recorder: Option<Recorder>,
) -> Result<kube::Client, CertError> {
    let config = kube::Config::from_custom_kubeconfig(
        without_client_certificates(kubeconfig),
        &KubeConfigOptions::default(),
    )
    .await
    .map_err(|e| CertError::Kubeconfig {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Only fails if another thread installed one meanwhile, which is as good.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    }
    let mut tls = config.rustls_client_config().map_err(CertError::Client)?;
    tls.client_auth_cert_resolver = pair.clone();
    // A resumed TLS session carries the identity of the handshake it resumes: the
    // server would keep seeing the old certificate on new connections after a
    // rotation. Go's client (the kubelet's) does not resume by default either.
    tls.resumption = rustls::client::Resumption::disabled();
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(config.connect_timeout);
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    let connector = match &config.tls_server_name {
        Some(name) => {
            let name = rustls::pki_types::ServerName::try_from(name.clone()).map_err(|e| {
                CertError::Kubeconfig {
                    path: path.to_path_buf(),
                    reason: format!("tls-server-name: {e}"),
                }
            })?;
            builder
                .with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name))
                .enable_http1()
                .wrap_connector(http)
        }
        None => builder.enable_http1().wrap_connector(http),
    };
    let pool = RenewedPool::new(connector, pair.generation());
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer().map_err(CertError::Client)?)
        .layer(config.extra_headers_layer().map_err(CertError::Client)?)
        // kube's auth layers are alternatives that must fail alike.
        .map_err(BoxError::from)
        .service(pool)
        .map_response(|response: Response<hyper::body::Incoming>| {
            response.map(|body| Box::new(body.map_err(BoxError::from)) as Box<DynBody>)
        })
        .boxed();
    let builder = ClientBuilder::new(service, config.default_namespace.clone());
    Ok(match recorder {
        None => builder.build(),
        Some(recorder) => builder.with_layer(&recorder).build(),
    })
}

/// The HTTP client, replaced by a fresh one (an empty pool) after each rotation, so
/// that requests stop reusing connections authenticated with the old certificate;
/// requests under way (watches) keep theirs until they end.
#[derive(Clone)]
struct RenewedPool {
    connector: Connector,
    generation: tokio::sync::watch::Receiver<u64>,
    current: Arc<Mutex<(u64, HyperClient<Connector, Body>)>>,
}

impl RenewedPool {
    fn new(connector: Connector, generation: tokio::sync::watch::Receiver<u64>) -> Self {
        let first = *generation.borrow();
        let client = Self::client(&connector);
        Self {
            connector,
            generation,
            current: Arc::new(Mutex::new((first, client))),
        }
    }

    fn client(connector: &Connector) -> HyperClient<Connector, Body> {
        HyperClient::builder(TokioExecutor::new()).build(connector.clone())
    }
}

impl tower::Service<Request<Body>> for RenewedPool {
    type Response = Response<hyper::body::Incoming>;
    type Error = hyper_util::client::legacy::Error;
    type Future = hyper_util::client::legacy::ResponseFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let generation = *self.generation.borrow();
        let client = {
            let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
            if current.0 != generation {
                tracing::debug!(
                    generation,
                    "client certificate rotated: new connections from now on"
                );
                *current = (generation, Self::client(&self.connector));
            }
            current.1.clone()
        };
        client.request(request)
    }
}
