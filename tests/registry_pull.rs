//! Root integration tests of registry pulls (`image::pull::Puller`) against a real
//! CNCF distribution registry on 127.0.0.1 (one per test, own port and temp dirs),
//! with the busybox image pushed by skopeo as OCI, as Docker v2s2 and as a
//! multi-arch index.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common_registry;

use std::fs;
use std::path::Path;
use std::sync::Arc;

use common_registry::{
    Registry, assert_no_temps, blob_in, busybox_digests, busybox_layout, busybox_plus_big_layer,
    busybox_plus_layers, require_root,
};
use podhost::image::ImageStore;
use podhost::image::pull::{PullError, PullOptions, PullProgress, Puller};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// A fresh store and a puller that speaks plain HTTP to `registry`.
fn puller(root: &Path, registry: &Registry, creds: Option<&Path>) -> (Arc<ImageStore>, Puller) {
    let store = Arc::new(ImageStore::open(root).unwrap());
    let opts = PullOptions {
        insecure_registries: vec![registry.addr.clone()],
        credentials_file: creds.map(Path::to_path_buf),
    };
    (store.clone(), Puller::new(store, opts))
}

/// Pulls and collects the progress events.
async fn pull_events(
    puller: &Puller,
    reference: &str,
) -> (Result<String, PullError>, Vec<PullProgress>) {
    let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
    let collect = tokio::spawn(async move {
        let mut events = Vec::new();
        while let Some(e) = rx.recv().await {
            events.push(e);
        }
        events
    });
    let result = puller.pull(reference, Some(tx)).await;
    (result, collect.await.unwrap())
}

fn sha(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(data)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_by_tag_unpacks_and_resolves() {
    require_root();
    let registry = Registry::start();
    registry.push_busybox("latest", &[]);
    let (manifest, config, layer) = busybox_digests();
    let root = tempfile::tempdir().unwrap();
    let (store, puller) = puller(root.path(), &registry, None);

    let reference = format!("{}/busybox", registry.addr);
    let (result, events) = pull_events(&puller, &reference).await;
    let name = result.unwrap();
    assert_eq!(name, format!("{}/busybox:latest", registry.addr));

    let image = store.resolve(&name).unwrap();
    assert_eq!(image.manifest_digest, manifest);
    assert_eq!(image.layers.len(), 1);
    assert!(image.layers[0].join("bin/busybox").is_file());
    assert!(store.has_blob(&config).unwrap() && store.has_blob(&layer).unwrap());
    assert_eq!(puller.blob_fetches(), 2, "config and layer");
    assert_eq!(
        puller.streamed_snapshots(),
        1,
        "the layer was unpacked while it downloaded"
    );

    assert!(
        matches!(&events[0], PullProgress::Resolved { layers: 1, total_bytes, digest, .. }
            if *total_bytes > 1_000_000 && *digest == manifest),
        "{events:?}"
    );
    assert!(
        events.contains(&PullProgress::Unpacking {
            digest: layer.clone()
        }),
        "{events:?}"
    );
    let size = fs::metadata(blob_in(busybox_layout(), &layer))
        .unwrap()
        .len();
    assert!(
        events.contains(&PullProgress::Layer {
            digest: layer.clone(),
            done: size,
            total: size
        }),
        "{events:?}"
    );
    assert_eq!(
        events.last(),
        Some(&PullProgress::Done {
            reference: name.clone(),
            digest: manifest.clone()
        })
    );
    let summary = store.list().unwrap();
    assert_eq!(summary.len(), 1);
    assert_eq!(summary[0].digest, manifest);
    assert_no_temps(root.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_by_digest() {
    require_root();
    let registry = Registry::start();
    registry.push_busybox("latest", &[]);
    let (manifest, _, _) = busybox_digests();
    let root = tempfile::tempdir().unwrap();
    let (store, puller) = puller(root.path(), &registry, None);

    let reference = format!("{}/busybox@{manifest}", registry.addr);
    let name = puller.pull(&reference, None).await.unwrap();
    assert_eq!(name, reference);
    let image = store.resolve(&reference).unwrap();
    assert_eq!(image.manifest_digest, manifest);
    assert!(image.layers[0].join("bin/busybox").is_file());
    // A bare digest finds it too.
    assert_eq!(store.resolve(&manifest).unwrap().manifest_digest, manifest);
    // A digest the registry does not have.
    let other = format!("{}/busybox@sha256:{}", registry.addr, "0".repeat(64));
    let err = puller.pull(&other, None).await.unwrap_err();
    assert!(matches!(err, PullError::NotFound { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_docker_v2s2() {
    require_root();
    let registry = Registry::start();
    registry.push_busybox("docker", &["--format", "v2s2"]);
    let (oci_manifest, config, layer) = busybox_digests();
    let root = tempfile::tempdir().unwrap();
    let (store, puller) = puller(root.path(), &registry, None);

    let name = puller
        .pull(&format!("{}/busybox:docker", registry.addr), None)
        .await
        .unwrap();
    let image = store.resolve(&name).unwrap();
    assert_ne!(
        image.manifest_digest, oci_manifest,
        "skopeo converts to v2s2"
    );
    let raw: Value =
        serde_json::from_slice(&store.read_blob(&image.manifest_digest).unwrap()).unwrap();
    assert_eq!(
        raw["mediaType"],
        "application/vnd.docker.distribution.manifest.v2+json"
    );
    assert_eq!(
        raw["layers"][0]["mediaType"],
        "application/vnd.docker.image.rootfs.diff.tar.gzip"
    );
    // Same config and layer blobs as the OCI image.
    assert!(store.has_blob(&config).unwrap() && store.has_blob(&layer).unwrap());
    assert!(image.layers[0].join("bin/busybox").is_file());
    assert_eq!(
        image.config.config().as_ref().unwrap().cmd().as_deref(),
        Some(&["sh".to_string()][..])
    );
}

/// A layout holding an OCI index (arm64 first, then amd64) named `localhost/busybox:multi`.
/// Returns the index digest.
fn multi_arch_layout(dir: &Path) -> String {
    let src = busybox_layout();
    fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
    for e in fs::read_dir(src.join("blobs/sha256")).unwrap() {
        let e = e.unwrap();
        fs::copy(e.path(), dir.join("blobs/sha256").join(e.file_name())).unwrap();
    }
    fs::copy(src.join("oci-layout"), dir.join("oci-layout")).unwrap();
    let put = |data: &[u8]| -> (String, usize) {
        let d = sha(data);
        fs::write(blob_in(dir, &d), data).unwrap();
        (d, data.len())
    };
    let (manifest, config, _) = busybox_digests();
    let manifest_bytes = fs::read(blob_in(src, &manifest)).unwrap();
    let mut arm_config: Value =
        serde_json::from_slice(&fs::read(blob_in(src, &config)).unwrap()).unwrap();
    arm_config["architecture"] = json!("arm64");
    let (arm_config, arm_config_size) = put(&serde_json::to_vec(&arm_config).unwrap());
    let mut arm_manifest: Value = serde_json::from_slice(&manifest_bytes).unwrap();
    arm_manifest["config"]["digest"] = json!(arm_config);
    arm_manifest["config"]["size"] = json!(arm_config_size);
    let (arm_manifest, arm_size) = put(&serde_json::to_vec(&arm_manifest).unwrap());
    let entry = |digest: &str, size: usize, arch: &str| {
        json!({"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest,
               "size": size, "platform": {"architecture": arch, "os": "linux"}})
    };
    let index = json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [entry(&arm_manifest, arm_size, "arm64"),
                      entry(&manifest, manifest_bytes.len(), "amd64")]});
    let (index, index_size) = put(&serde_json::to_vec(&index).unwrap());
    let top = json!({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.index.v1+json", "digest": index, "size": index_size,
        "annotations": {"org.opencontainers.image.ref.name": "localhost/busybox:multi"}}]});
    fs::write(dir.join("index.json"), serde_json::to_vec(&top).unwrap()).unwrap();
    index
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_multi_arch_index_picks_linux_amd64() {
    require_root();
    let registry = Registry::start();
    let layout = tempfile::tempdir().unwrap();
    let index = multi_arch_layout(layout.path());
    registry.push(
        layout.path(),
        "localhost/busybox:multi",
        "busybox:multi",
        &["--all"],
    );
    let (manifest, _, _) = busybox_digests();
    let root = tempfile::tempdir().unwrap();
    let (store, puller) = puller(root.path(), &registry, None);

    let name = puller
        .pull(&format!("{}/busybox:multi", registry.addr), None)
        .await
        .unwrap();
    let image = store.resolve(&name).unwrap();
    assert_eq!(image.manifest_digest, manifest, "the amd64 entry");
    assert!(image.layers[0].join("bin/busybox").is_file());
    // The index is kept: the reference by index digest resolves to the same image.
    assert!(store.has_blob(&index).unwrap());
    let by_index = format!("{}/busybox@{index}", registry.addr);
    assert_eq!(store.resolve(&by_index).unwrap().manifest_digest, manifest);
    // Pulling by the index digest works as well, without downloading anything.
    let before = puller.blob_fetches();
    puller.pull(&by_index, None).await.unwrap();
    assert_eq!(puller.blob_fetches(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pulling_again_downloads_nothing() {
    require_root();
    let registry = Registry::start();
    registry.push_busybox("latest", &[]);
    let (_, config, layer) = busybox_digests();
    let root = tempfile::tempdir().unwrap();
    let (store, puller) = puller(root.path(), &registry, None);
    let reference = format!("{}/busybox:latest", registry.addr);
    puller.pull(&reference, None).await.unwrap();
    assert_eq!(puller.blob_fetches(), 2);

    // Same store, new puller (as after a daemon restart).
    let again = Puller::new(
        store.clone(),
        PullOptions {
            insecure_registries: vec![registry.addr.clone()],
            credentials_file: None,
        },
    );
    let (result, events) = pull_events(&again, &reference).await;
    result.unwrap();
    assert_eq!(again.blob_fetches(), 0);
    assert!(
        events.contains(&PullProgress::LayerCached {
            digest: layer.clone()
        }),
        "{events:?}"
    );
    assert!(
        !events.iter().any(|e| matches!(
            e,
            PullProgress::Layer { .. } | PullProgress::Unpacking { .. }
        )),
        "{events:?}"
    );
    assert!(
        matches!(events[0], PullProgress::Resolved { total_bytes: 0, .. }),
        "{events:?}"
    );
    assert_eq!(registry.blob_gets(&layer), 1, "{}", registry.log());
    assert_eq!(registry.blob_gets(&config), 1, "{}", registry.log());
    assert!(
        store.resolve(&reference).unwrap().layers[0]
            .join("bin/busybox")
            .is_file()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_pulls_fetch_each_blob_once() {
    require_root();
    let registry = Registry::start();
    registry.push_busybox("latest", &[]);
    // Same config and layer blobs under another manifest.
    registry.push_busybox("docker", &["--format", "v2s2"]);
    let (_, config, layer) = busybox_digests();
    let root = tempfile::tempdir().unwrap();
    let (store, puller) = puller(root.path(), &registry, None);
    let a = format!("{}/busybox:latest", registry.addr);
    let b = format!("{}/busybox:docker", registry.addr);

    let (p1, p2, p3) = (puller.clone(), puller.clone(), puller.clone());
    let (a1, a2, b1) = (a.clone(), a.clone(), b.clone());
    let (r1, r2, r3) = tokio::join!(
        tokio::spawn(async move { p1.pull(&a1, None).await }),
        tokio::spawn(async move { p2.pull(&a2, None).await }),
        tokio::spawn(async move { p3.pull(&b1, None).await }),
    );
    r1.unwrap().unwrap();
    r2.unwrap().unwrap();
    r3.unwrap().unwrap();
    assert_eq!(puller.blob_fetches(), 2, "config and layer, once each");
    assert_eq!(registry.blob_gets(&layer), 1, "{}", registry.log());
    assert_eq!(registry.blob_gets(&config), 1, "{}", registry.log());
    assert!(store.resolve(&a).is_ok() && store.resolve(&b).is_ok());
    assert_no_temps(root.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_tag_names_the_reference_and_the_registry_message() {
    require_root();
    let registry = Registry::start();
    registry.push_busybox("latest", &[]);
    let root = tempfile::tempdir().unwrap();
    let (store, puller) = puller(root.path(), &registry, None);
    let reference = format!("{}/busybox:v1", registry.addr);
    let err = puller.pull(&reference, None).await.unwrap_err();
    let msg = err.to_string();
    eprintln!("error as expected: {msg}");
    assert!(matches!(err, PullError::NotFound { .. }), "{msg}");
    assert!(
        msg.starts_with(&format!(
            "pulling \"{reference}\": manifest unknown (registry said: "
        )),
        "{msg}"
    );
    assert!(msg.contains("MANIFEST_UNKNOWN"), "{msg}");
    // An unknown repository.
    let err = puller
        .pull(&format!("{}/nope:v1", registry.addr), None)
        .await
        .unwrap_err();
    assert!(matches!(err, PullError::NotFound { .. }), "{err}");
    assert!(err.to_string().contains("/nope:v1\""), "{err}");
    assert!(store.list().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_registry_is_a_clear_error() {
    require_root();
    let port = common_registry::free_port();
    let addr = format!("127.0.0.1:{port}");
    let root = tempfile::tempdir().unwrap();
    let store = Arc::new(ImageStore::open(root.path()).unwrap());
    let puller = Puller::new(
        store,
        PullOptions {
            insecure_registries: vec![addr.clone()],
            credentials_file: None,
        },
    );
    let reference = format!("{addr}/busybox:latest");
    let err = puller.pull(&reference, None).await.unwrap_err();
    eprintln!("error as expected: {err}");
    assert!(matches!(err, PullError::Unreachable { .. }), "{err}");
    // Retried with back-off (0.5 s, 1 s, 2 s) before giving up.
    let msg = err.to_string();
    let prefix = format!(
        "pulling \"{reference}\": cannot reach registry {addr}: connection refused (4 attempts over "
    );
    assert!(msg.starts_with(&prefix), "{msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn basic_auth_from_the_credentials_file() {
    require_root();
    let registry = Registry::start_with_auth("alice", "s3cret");
    registry.push_busybox("latest", &[]);
    let root = tempfile::tempdir().unwrap();
    let creds_dir = tempfile::tempdir().unwrap();
    let creds = creds_dir.path().join("config.json");
    let (store, puller) = puller(root.path(), &registry, Some(&creds));
    let reference = format!("{}/busybox:latest", registry.addr);

    // No file yet: anonymous, refused.
    let err = puller.pull(&reference, None).await.unwrap_err();
    let msg = err.to_string();
    eprintln!("error as expected: {msg}");
    assert!(matches!(err, PullError::Unauthorized { .. }), "{msg}");
    assert!(
        msg.starts_with(&format!(
            "pulling \"{reference}\": unauthorized: check the credentials for {} in {}",
            registry.addr,
            creds.display()
        )),
        "{msg}"
    );
    assert!(msg.contains("does not exist"), "{msg}");

    // A wrong password.
    let auth = |user_pass: &str| {
        use base64_lite::encode;
        json!({"auths": {registry.addr.clone(): {"auth": encode(user_pass)}}})
    };
    fs::write(&creds, serde_json::to_vec(&auth("alice:wrong")).unwrap()).unwrap();
    let err = puller.pull(&reference, None).await.unwrap_err();
    assert!(matches!(err, PullError::Unauthorized { .. }), "{err}");
    eprintln!("error as expected: {err}");
    assert!(err.to_string().contains("sent user \"alice\""), "{err}");

    // The right one: the same puller picks up the changed file.
    fs::write(&creds, serde_json::to_vec(&auth("alice:s3cret")).unwrap()).unwrap();
    let name = puller.pull(&reference, None).await.unwrap();
    assert!(
        store.resolve(&name).unwrap().layers[0]
            .join("bin/busybox")
            .is_file()
    );
}

/// Token auth: the registry only accepts bearer tokens, which a token server
/// (its realm) issues for the basic credentials from the credentials file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_auth_from_the_credentials_file() {
    require_root();
    let (registry, tokens) = Registry::start_with_token_auth("alice", "s3cret");
    registry.push_busybox("latest", &[]);
    // skopeo got its push token from the token server too, for pull and push.
    assert!(
        tokens
            .requests()
            .iter()
            .any(|r| r.status == 200 && r.granted.contains(&"repository:busybox:pull,push".into())),
        "{:#?}",
        tokens.requests()
    );
    let root = tempfile::tempdir().unwrap();
    let creds_dir = tempfile::tempdir().unwrap();
    let creds = creds_dir.path().join("config.json");
    let (store, puller) = puller(root.path(), &registry, Some(&creds));
    let reference = format!("{}/busybox:latest", registry.addr);
    let auth = |user_pass: &str| {
        use base64_lite::encode;
        json!({"auths": {registry.addr.clone(): {"auth": encode(user_pass)}}})
    };

    // No file yet: anonymous; the token server refuses, and so does the registry.
    let before = tokens.requests().len();
    let err = puller.pull(&reference, None).await.unwrap_err();
    let msg = err.to_string();
    eprintln!("error as expected: {msg}");
    assert!(matches!(err, PullError::Unauthorized { .. }), "{msg}");
    assert!(
        msg.starts_with(&format!(
            "pulling \"{reference}\": unauthorized: check the credentials for {} in {}",
            registry.addr,
            creds.display()
        )),
        "{msg}"
    );
    assert!(msg.contains("does not exist"), "{msg}");
    assert!(
        msg.contains("the token service said: authentication required"),
        "{msg}"
    );
    let anonymous = &tokens.requests()[before..];
    assert!(
        !anonymous.is_empty()
            && anonymous
                .iter()
                .all(|r| r.user.is_none() && r.status == 401),
        "the realm was asked anonymously and refused: {anonymous:#?}"
    );

    // A wrong password: the token server refuses user "alice".
    fs::write(&creds, serde_json::to_vec(&auth("alice:wrong")).unwrap()).unwrap();
    let before = tokens.requests().len();
    let err = puller.pull(&reference, None).await.unwrap_err();
    let msg = err.to_string();
    eprintln!("error as expected: {msg}");
    assert!(matches!(err, PullError::Unauthorized { .. }), "{msg}");
    assert!(msg.contains("sent user \"alice\""), "{msg}");
    // The token service's own reason, not just the registry's bare 401.
    assert!(
        msg.contains("the token service said: invalid username or password for \"alice\""),
        "{msg}"
    );
    let refused = &tokens.requests()[before..];
    assert!(
        !refused.is_empty()
            && refused
                .iter()
                .all(|r| r.user.as_deref() == Some("alice") && r.status == 401),
        "{refused:#?}"
    );
    assert_eq!(tokens.last_user().as_deref(), Some("alice"));

    // The right one: a pull-only token for busybox, used on the registry.
    fs::write(&creds, serde_json::to_vec(&auth("alice:s3cret")).unwrap()).unwrap();
    let before = tokens.requests().len();
    let name = puller.pull(&reference, None).await.unwrap();
    assert!(
        store.resolve(&name).unwrap().layers[0]
            .join("bin/busybox")
            .is_file()
    );
    let granted = &tokens.requests()[before..];
    assert!(
        granted.iter().any(|r| r.status == 200
            && r.user.as_deref() == Some("alice")
            && r.service.as_deref() == Some(common_registry::token::SERVICE)
            && r.scopes == ["repository:busybox:pull"]
            && r.granted == ["repository:busybox:pull"]),
        "podhost got a pull token from the realm: {granted:#?}"
    );
    assert!(tokens.tokens_issued_to("alice") >= 2, "push and pull");
    // The registry served the manifest and the layer to a bearer (it accepts
    // nothing else), not 401s: its access log shows 200s for both.
    let (manifest, _, layer) = busybox_digests();
    let log = registry.log();
    assert!(
        log.lines()
            .any(|l| l.contains("GET /v2/busybox/manifests/latest") && l.contains("\" 200 ")),
        "{log}"
    );
    assert!(registry.blob_gets(&layer) >= 1, "{log}");
    assert_eq!(store.resolve(&name).unwrap().manifest_digest, manifest);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupted_blob_is_refused_and_nothing_is_stored() {
    require_root();
    let registry = Registry::start();
    registry.push_busybox("latest", &[]);
    let (_, _, layer) = busybox_digests();
    // Flip one byte in the middle of the layer in the registry's storage.
    let stored = registry.stored_blob(&layer);
    let mut data = fs::read(&stored).unwrap();
    let mid = data.len() / 2;
    data[mid] ^= 0xff;
    fs::write(&stored, &data).unwrap();

    let root = tempfile::tempdir().unwrap();
    let (store, puller) = puller(root.path(), &registry, None);
    let reference = format!("{}/busybox:latest", registry.addr);
    let err = puller.pull(&reference, None).await.unwrap_err();
    let msg = err.to_string();
    eprintln!("error as expected: {msg}");
    assert!(matches!(err, PullError::Digest { .. }), "{msg}");
    assert!(
        msg.starts_with(&format!("pulling \"{reference}\": layer {layer}")),
        "{msg}"
    );
    assert!(msg.contains(&format!("expected {layer}")), "{msg}");
    assert!(store.list().unwrap().is_empty());
    assert!(!store.has_blob(&layer).unwrap());
    assert!(store.resolve(&reference).is_err());
    assert_no_temps(root.path());
    let snapshots = fs::read_dir(root.path().join("snapshots")).unwrap().count();
    assert_eq!(snapshots, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blob_larger_than_its_descriptor_is_refused() {
    require_root();
    let registry = Registry::start();
    registry.push_busybox("latest", &[]);
    let (_, _, layer) = busybox_digests();
    let stored = registry.stored_blob(&layer);
    let mut data = fs::read(&stored).unwrap();
    data.extend_from_slice(&[0u8; 4096]);
    fs::write(&stored, &data).unwrap();

    let root = tempfile::tempdir().unwrap();
    let (store, puller) = puller(root.path(), &registry, None);
    let err = puller
        .pull(&format!("{}/busybox:latest", registry.addr), None)
        .await
        .unwrap_err();
    eprintln!("error as expected: {err}");
    assert!(matches!(err, PullError::Digest { .. }), "{err}");
    assert!(err.to_string().contains("bytes"), "{err}");
    assert!(!store.has_blob(&layer).unwrap());
    assert_no_temps(root.path());
}

/// An uncompressed tar of `(path, symlink target or file content, is_symlink)`.
fn small_tar(entries: &[(&str, &str, bool)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (path, data, is_link) in entries {
        let mut h = tar::Header::new_ustar();
        h.set_mode(if *is_link { 0o777 } else { 0o644 });
        h.set_mtime(0);
        if *is_link {
            h.set_entry_type(tar::EntryType::Symlink);
            h.set_size(0);
            b.append_link(&mut h, path, data).unwrap();
        } else {
            h.set_size(data.len() as u64);
            b.append_data(&mut h, path, data.as_bytes()).unwrap();
        }
    }
    b.into_inner().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layer_over_a_lower_symlink_waits_for_it_and_writes_through_it() {
    require_root();
    let registry = Registry::start();
    let layout = tempfile::tempdir().unwrap();
    // The base makes lib a link to usr/lib; the top layer, downloaded and
    // unpacked in parallel with it, writes lib/b without listing lib/.
    let base = small_tar(&[("usr/lib/a", "a", false), ("lib", "usr/lib", true)]);
    let top = small_tar(&[("lib/b", "b", false)]);
    busybox_plus_layers(layout.path(), &[base, top], "localhost/usrmerge:v1");
    registry.push(layout.path(), "localhost/usrmerge:v1", "usrmerge:v1", &[]);
    let root = tempfile::tempdir().unwrap();
    let (store, puller) = puller(root.path(), &registry, None);
    let name = puller
        .pull(&format!("{}/usrmerge:v1", registry.addr), None)
        .await
        .unwrap();
    let image = store.resolve(&name).unwrap();
    assert_eq!(image.layers.len(), 3);
    let top = &image.layers[2];
    assert_eq!(fs::read(top.join("usr/lib/b")).unwrap(), b"b");
    assert!(
        fs::symlink_metadata(top.join("lib")).is_err(),
        "no lib/ directory hiding the base's link"
    );
    assert_no_temps(root.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_layers_in_parallel_stack_in_order() {
    require_root();
    let registry = Registry::start();
    let layout = tempfile::tempdir().unwrap();
    let (big, content) = busybox_plus_big_layer(layout.path(), 4);
    registry.push(layout.path(), "localhost/busybox:big", "busybox:big", &[]);
    let (_, _, small) = busybox_digests();
    let root = tempfile::tempdir().unwrap();
    let (store, puller) = puller(root.path(), &registry, None);

    let (result, events) = pull_events(&puller, &format!("{}/busybox:big", registry.addr)).await;
    let image = store.resolve(&result.unwrap()).unwrap();
    assert_eq!(image.layers.len(), 2);
    assert!(
        image.layers[0].join("bin/busybox").is_file(),
        "bottom layer first"
    );
    assert_eq!(fs::read(image.layers[1].join("big.bin")).unwrap(), content);
    assert_eq!(puller.blob_fetches(), 3);
    assert_eq!(puller.streamed_snapshots(), 2);
    for layer in [&small, &big] {
        assert!(
            events
                .iter()
                .any(|e| matches!(e, PullProgress::Layer { digest, done, total }
                if digest == layer && done == total)),
            "{layer}: {events:?}"
        );
        assert!(
            events.contains(&PullProgress::Unpacking {
                digest: layer.clone()
            }),
            "{events:?}"
        );
    }
    assert!(
        matches!(&events[0], PullProgress::Resolved { layers: 2, total_bytes, .. }
            if *total_bytes > (4 << 20)),
        "{events:?}"
    );
    assert_no_temps(root.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_pull_leaves_nothing_half_written_and_resumes() {
    require_root();
    let registry = Registry::start();
    let layout = tempfile::tempdir().unwrap();
    let (big, _) = busybox_plus_big_layer(layout.path(), 24);
    registry.push(layout.path(), "localhost/busybox:big", "busybox:big", &[]);
    let root = tempfile::tempdir().unwrap();
    let (store, puller) = puller(root.path(), &registry, None);
    let reference = format!("{}/busybox:big", registry.addr);

    let (_, _, small) = busybox_digests();
    let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
    let (p, r) = (puller.clone(), reference.clone());
    let task = tokio::spawn(async move { p.pull(&r, Some(tx)).await });
    // Cancel once the small layer is stored (it is being unpacked) while the big
    // one is still downloading.
    let (mut small_stored, mut big_running) = (false, false);
    while let Some(e) = rx.recv().await {
        match &e {
            PullProgress::Unpacking { digest } if *digest == small => small_stored = true,
            PullProgress::Layer {
                digest,
                done,
                total,
            } if *digest == big => big_running = done < total,
            _ => {}
        }
        if small_stored && big_running {
            break;
        }
    }
    task.abort();
    assert!(
        !matches!(task.await, Ok(Ok(_))),
        "the pull finished before it could be cancelled, so nothing was tested: make the big layer bigger"
    );
    assert!(small_stored && big_running);
    assert!(store.resolve(&reference).is_err(), "not recorded");
    // Blocking work of the cancelled pull finishes on its own: the writer thread
    // removes its temp file, an unpack under way completes its snapshot.
    let temps = || {
        ["images/tmp", "snapshots"].iter().any(|d| {
            fs::read_dir(root.path().join(d))
                .unwrap()
                .any(|e| e.unwrap().file_name().to_string_lossy().starts_with("tmp-"))
        })
    };
    for _ in 0..100 {
        if !temps() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_no_temps(root.path());
    assert!(!store.has_blob(&big).unwrap());

    let (result, events) = pull_events(&puller, &reference).await;
    let image = store.resolve(&result.unwrap()).unwrap();
    assert_eq!(image.layers.len(), 2);
    assert!(image.layers[1].join("big.bin").is_file());
    // The small layer is not fetched again; the big one is, from the start.
    assert!(
        events.contains(&PullProgress::LayerCached {
            digest: small.clone()
        }),
        "{events:?}"
    );
    assert_eq!(registry.blob_gets(&small), 1, "{}", registry.log());
    assert_eq!(registry.blob_gets(&big), 2, "{}", registry.log());
    assert_no_temps(root.path());
}

/// Standard base64 (for config.json's `auth`), to keep the test free of extra crates.
mod base64_lite {
    pub fn encode(s: &str) -> String {
        const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let b = s.as_bytes();
        let mut out = String::new();
        for chunk in b.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |n, (i, &c)| n | (c as u32) << (16 - 8 * i));
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(T[(n >> (18 - 6 * i)) as usize & 63] as char);
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    #[test]
    fn known_values() {
        assert_eq!(encode("alice:s3cret"), "YWxpY2U6czNjcmV0");
        assert_eq!(encode("ab"), "YWI=");
        assert_eq!(encode("a"), "YQ==");
    }
}

/// One layer failing while another is still downloading: the pull's error comes
/// only after the other download has stopped and removed its temp file (and the
/// streamed unpack its directory), every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_layer_stops_the_others_before_the_pull_returns() {
    require_root();
    let registry = Registry::start();
    let layout = tempfile::tempdir().unwrap();
    let (big, _) = busybox_plus_big_layer(layout.path(), 48);
    registry.push(layout.path(), "localhost/busybox:big", "busybox:big", &[]);
    let (_, _, small) = busybox_digests();
    // The busybox layer is served 4 KiB longer than its descriptor: refused at
    // its Content-Length, while the 48 MiB layer is on its way.
    let stored = registry.stored_blob(&small);
    let mut data = fs::read(&stored).unwrap();
    data.extend_from_slice(&[0u8; 4096]);
    fs::write(&stored, &data).unwrap();

    for round in 0..5 {
        let root = tempfile::tempdir().unwrap();
        let (store, puller) = puller(root.path(), &registry, None);
        let err = puller
            .pull(&format!("{}/busybox:big", registry.addr), None)
            .await
            .unwrap_err();
        assert!(
            matches!(err, PullError::Digest { .. }),
            "round {round}: {err}"
        );
        assert!(err.to_string().contains(&small), "round {round}: {err}");
        assert!(!store.has_blob(&small).unwrap());
        assert!(
            !store.has_blob(&big).unwrap(),
            "round {round}: big layer was stopped"
        );
        assert_no_temps(root.path());
    }
}
