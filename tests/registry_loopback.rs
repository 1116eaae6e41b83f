//! Root integration tests of pulls from registries on this host's loopback without
//! `--insecure-registry`: a plain-HTTP registry (the real `docker-registry`) is tried
//! over HTTPS, then pulled from over plain HTTP, with basic and token auth, and later
//! pulls go straight to plain HTTP; a TLS registry is pulled from over HTTPS when its
//! certificate is trusted and refused with the certificate error when it is not (no
//! plain HTTP then); a registry that is not on loopback never falls back. A forwarder
//! in front of the registry ([`Handshakes`]) shows which protocol each connection spoke.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::{TestDaemon, netns::TestNetns};
use crate::common_manifest_url::TestCa;
use crate::common_registry::handshakes::Handshakes;
use crate::common_registry::{Registry, require_root};

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use podhost::image::ImageStore;
use podhost::image::pull::{PullError, PullOptions, Puller};
use serde_json::json;

/// A fresh store and a puller with no `--insecure-registry`, reading credentials
/// from `creds` when given.
fn puller(root: &Path, creds: Option<&Path>) -> (Arc<ImageStore>, Puller) {
    let store = Arc::new(ImageStore::open(root).unwrap());
    let opts = PullOptions {
        insecure_registries: Vec::new(),
        credentials_file: creds.map(Path::to_path_buf),
    };
    (store.clone(), Puller::new(store, opts))
}

/// A docker config.json in `dir` with `user_pass` for `registry`.
fn credentials(dir: &Path, registry: &str, user_pass: &str) -> PathBuf {
    let auth = base64::engine::general_purpose::STANDARD.encode(user_pass);
    let file = dir.join("config.json");
    let config = json!({"auths": {registry: {"auth": auth}}});
    fs::write(&file, serde_json::to_vec(&config).unwrap()).unwrap();
    file
}

fn assert_busybox(store: &ImageStore, name: &str) {
    let image = store.resolve(name).unwrap();
    assert!(image.layers[0].join("bin/busybox").is_file(), "{name}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_http_registry_on_loopback_is_pulled_and_remembered() {
    require_root();
    let registry = Registry::start();
    registry.push_busybox("latest", &[]);
    registry.push_busybox("v2", &[]);
    let front = Handshakes::on_loopback(&registry.addr);
    let root = tempfile::tempdir().unwrap();
    let (store, puller) = puller(root.path(), None);

    let name = puller
        .pull(&format!("{}/busybox:latest", front.addr), None)
        .await
        .unwrap();
    assert_busybox(&store, &name);
    let tls_tries = front.tls();
    assert!(tls_tries >= 1, "HTTPS is tried first");
    assert!(front.plain() >= 1, "then plain HTTP");

    let name = puller
        .pull(&format!("{}/busybox:v2", front.addr), None)
        .await
        .unwrap();
    assert_busybox(&store, &name);
    assert_eq!(
        front.tls(),
        tls_tries,
        "a later pull goes straight to plain HTTP"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn basic_auth_over_plain_http_on_localhost() {
    require_root();
    let registry = Registry::start_with_auth("alice", "s3cret");
    registry.push_busybox("latest", &[]);
    let port = registry.addr.rsplit_once(':').unwrap().1;
    let localhost = format!("localhost:{port}");
    let root = tempfile::tempdir().unwrap();
    let creds_dir = tempfile::tempdir().unwrap();
    let creds = creds_dir.path().join("config.json");
    let (store, puller) = puller(root.path(), Some(&creds));
    let reference = format!("{localhost}/busybox:latest");

    // No credentials yet: the registry itself refuses, over plain HTTP.
    let err = puller.pull(&reference, None).await.unwrap_err();
    eprintln!("error as expected: {err}");
    assert!(matches!(err, PullError::Unauthorized { .. }), "{err}");

    credentials(creds_dir.path(), &localhost, "alice:s3cret");
    let name = puller.pull(&reference, None).await.unwrap();
    assert_busybox(&store, &name);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_auth_over_plain_http_on_loopback() {
    require_root();
    let (registry, tokens) = Registry::start_with_token_auth("alice", "s3cret");
    registry.push_busybox("latest", &[]);
    let root = tempfile::tempdir().unwrap();
    let creds_dir = tempfile::tempdir().unwrap();
    let creds = credentials(creds_dir.path(), &registry.addr, "alice:s3cret");
    let (store, puller) = puller(root.path(), Some(&creds));
    let before = tokens.requests().len();

    let name = puller
        .pull(&format!("{}/busybox:latest", registry.addr), None)
        .await
        .unwrap();
    assert_busybox(&store, &name);
    assert!(
        tokens.requests()[before..].iter().any(|r| r.status == 200
            && r.user.as_deref() == Some("alice")
            && r.granted.contains(&"repository:busybox:pull".into())),
        "{:#?}",
        tokens.requests()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_certificate_on_loopback_is_an_error_not_a_fallback() {
    require_root();
    let certs = tempfile::tempdir().unwrap();
    let ca = TestCa::new(certs.path());
    let registry = Registry::start_tls(&ca.server_cert, &ca.server_key);
    registry.push_busybox("latest", &[]);
    let front = Handshakes::on_loopback(&registry.addr);
    let root = tempfile::tempdir().unwrap();
    let (_store, puller) = puller(root.path(), None);

    let reference = format!("{}/busybox:latest", front.addr);
    let err = puller.pull(&reference, None).await.unwrap_err();
    let msg = err.to_string();
    eprintln!("error as expected: {msg}");
    assert!(
        matches!(
            err,
            PullError::Unreachable { .. } | PullError::Registry { .. }
        ),
        "{msg}"
    );
    assert!(
        msg.starts_with(&format!("pulling \"{reference}\"")),
        "{msg}"
    );
    assert!(msg.contains("certificate"), "{msg}");
    assert!(front.tls() >= 1, "HTTPS was tried");
    assert_eq!(front.plain(), 0, "no plain HTTP after a certificate error");
}

#[test]
fn a_trusted_tls_registry_on_loopback_is_pulled_over_https() {
    require_root();
    let certs = tempfile::tempdir().unwrap();
    let ca = TestCa::new(certs.path());
    let registry = Registry::start_tls(&ca.server_cert, &ca.server_key);
    registry.push_busybox("latest", &[]);
    let front = Handshakes::on_loopback(&registry.addr);
    // The daemon on the machine's network (where the registry is), trusting the test
    // CA through SSL_CERT_FILE, as the system's CA bundle is found.
    let mut d = TestDaemon::prepare_on_machine_network(&[]);
    let ca_file = ca.ca_cert.display().to_string();
    d.spawn_daemon_with_env(&[("SSL_CERT_FILE", ca_file.as_str())]);
    d.wait_api_up();

    let reference = format!("{}/busybox:latest", front.addr);
    let out = d.cli(&["pull", &reference]);
    assert!(
        out.status.success(),
        "podhost pull {reference}: {}\ndaemon log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        d.daemon_log()
    );
    assert!(front.tls() >= 1, "pulled over HTTPS");
    assert_eq!(front.plain(), 0, "nothing in plain HTTP");
}

#[test]
fn a_registry_off_loopback_never_falls_back() {
    require_root();
    let registry = Registry::start();
    registry.push_busybox("latest", &[]);
    // An address that is not loopback, in a namespace of its own; the forwarder
    // accepts there and reaches the registry from the test's namespace.
    let ns = TestNetns::new();
    ns.ip(&["addr", "add", "198.51.100.7/32", "dev", "lo"]);
    let listener = ns.run(|| TcpListener::bind("198.51.100.7:0").unwrap());
    let front = Handshakes::start(listener, &registry.addr);
    let reference = format!("{}/busybox:latest", front.addr);
    let root = tempfile::tempdir().unwrap();
    let (_store, puller) = puller(root.path(), None);

    let err = ns
        .block_on(|| async { puller.pull(&reference, None).await })
        .unwrap_err();
    let msg = err.to_string();
    eprintln!("error as expected: {msg}");
    assert!(matches!(err, PullError::PlainHttp { .. }), "{msg}");
    assert_eq!(
        msg,
        format!(
            "pulling \"{reference}\": registry {0} speaks plain HTTP, not HTTPS; if it is meant \
             to be reached so, start podhost with --insecure-registry {0}",
            front.addr
        )
    );
    let tls_tries = front.tls();
    assert!(tls_tries >= 1, "HTTPS was tried");
    assert_eq!(
        front.plain(),
        0,
        "no plain HTTP without --insecure-registry"
    );

    // Listed in --insecure-registry, it is pulled from in plain HTTP only.
    let root = tempfile::tempdir().unwrap();
    let store = Arc::new(ImageStore::open(root.path()).unwrap());
    let insecure = Puller::new(
        store.clone(),
        PullOptions {
            insecure_registries: vec![front.addr.clone()],
            credentials_file: None,
        },
    );
    let name = ns
        .block_on(|| async { insecure.pull(&reference, None).await })
        .unwrap();
    assert_busybox(&store, &name);
    assert_eq!(front.tls(), tls_tries, "no HTTPS with --insecure-registry");
}
