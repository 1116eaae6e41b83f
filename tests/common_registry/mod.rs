//! Test harness for registry pulls: a throw-away CNCF distribution registry
//! (Debian's `docker-registry`) on 127.0.0.1 at a free port, with its config,
//! storage and log in its own temp dir, optionally behind htpasswd basic auth;
//! images pushed into it with skopeo. The registry is killed by its PID when the
//! handle drops (also when the test fails). Tools missing on the host are
//! installed with apt-get.

#![allow(dead_code)]

pub mod handshakes;
pub mod token;

use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::Digest;

const REGISTRY_BIN: &str = "/usr/bin/docker-registry";

/// Fails the test unless it runs as root: a skipped test must never look like a
/// passed one. Never returns false.
pub fn require_root() -> bool {
    assert!(
        nix::unistd::geteuid().is_root(),
        "registry pull tests need root (apt-get, unpacking layers with mknod/chown): run them as root"
    );
    true
}

/// Installs the Debian packages missing for `commands` (command → package).
pub fn ensure_tools(commands: &[(&str, &str)]) {
    static APT: Mutex<()> = Mutex::new(());
    let _serial = APT.lock().unwrap_or_else(|p| p.into_inner());
    let missing: Vec<&str> = commands
        .iter()
        .filter(|(cmd, _)| !on_path(cmd))
        .map(|(_, pkg)| *pkg)
        .collect();
    if missing.is_empty() {
        return;
    }
    eprintln!("installing {missing:?}");
    let _ = Command::new("apt-get")
        .args(["update", "-qq"])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status();
    let status = Command::new("apt-get")
        .args(["install", "-y", "-qq", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .expect("run apt-get");
    assert!(status.success(), "apt-get install {missing:?} failed");
}

fn on_path(cmd: &str) -> bool {
    if cmd.starts_with('/') {
        return Path::new(cmd).exists();
    }
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(cmd).is_file()))
        .unwrap_or(false)
}

/// The busybox OCI layout, built once and shared (tests/common builds it).
pub use crate::common::busybox_layout;

/// `(manifest digest, config digest, layer digest)` of the busybox layout.
pub fn busybox_digests() -> (String, String, String) {
    let dir = busybox_layout();
    let index: Value = serde_json::from_slice(&fs::read(dir.join("index.json")).unwrap()).unwrap();
    let manifest = index["manifests"][0]["digest"]
        .as_str()
        .unwrap()
        .to_string();
    let m: Value = serde_json::from_slice(&fs::read(blob_in(dir, &manifest)).unwrap()).unwrap();
    let config = m["config"]["digest"].as_str().unwrap().to_string();
    let layer = m["layers"][0]["digest"].as_str().unwrap().to_string();
    (manifest, config, layer)
}

/// Path of blob `digest` in an OCI layout.
pub fn blob_in(layout: &Path, digest: &str) -> PathBuf {
    layout
        .join("blobs/sha256")
        .join(digest.strip_prefix("sha256:").unwrap())
}

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running registry; killed on drop.
pub struct Registry {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// Config, storage (`data/`) and `registry.log` (with the access log).
    pub dir: tempfile::TempDir,
    /// `user:password` when started with basic or token auth (skopeo pushes with it).
    pub creds: Option<String>,
}

impl Registry {
    /// Starts an anonymous registry.
    pub fn start() -> Registry {
        Self::start_with(None)
    }

    /// Starts an anonymous registry that serves HTTPS only, with the certificate
    /// and key in `cert` and `key` (PEM).
    pub fn start_tls(cert: &Path, key: &Path) -> Registry {
        ensure_tools(&[(REGISTRY_BIN, "docker-registry"), ("skopeo", "skopeo")]);
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("data")).unwrap();
        let tls = format!(
            "  tls:\n    certificate: {}\n    key: {}\n",
            cert.display(),
            key.display()
        );
        Self::start_in(dir, &tls, "", None)
    }

    /// Starts a registry that requires basic auth for `user` / `password`.
    pub fn start_with_auth(user: &str, password: &str) -> Registry {
        Self::start_with(Some((user, password)))
    }

    /// Starts a registry that requires bearer tokens from a [`token::TokenServer`]
    /// (on its own port), which issues them to `user` / `password`. The signing
    /// key and certificate live in the registry's temp dir.
    pub fn start_with_token_auth(user: &str, password: &str) -> (Registry, token::TokenServer) {
        ensure_tools(&[
            (REGISTRY_BIN, "docker-registry"),
            ("skopeo", "skopeo"),
            ("openssl", "openssl"),
        ]);
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("data")).unwrap();
        let server = token::TokenServer::start(dir.path(), user, password);
        let auth_block = server.registry_auth_block();
        let registry = Self::start_in(dir, "", &auth_block, Some(format!("{user}:{password}")));
        (registry, server)
    }

    fn start_with(auth: Option<(&str, &str)>) -> Registry {
        let mut tools = vec![(REGISTRY_BIN, "docker-registry"), ("skopeo", "skopeo")];
        if auth.is_some() {
            tools.push(("htpasswd", "apache2-utils"));
        }
        ensure_tools(&tools);
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("data")).unwrap();
        let auth_block = match auth {
            Some((user, password)) => {
                let file = dir.path().join("htpasswd");
                let status = Command::new("htpasswd")
                    .args(["-Bbc"])
                    .arg(&file)
                    .args([user, password])
                    .stderr(Stdio::null())
                    .status()
                    .unwrap();
                assert!(status.success(), "htpasswd failed");
                format!(
                    "auth:\n  htpasswd:\n    realm: podhost-test\n    path: {}\n",
                    file.display()
                )
            }
            None => String::new(),
        };
        Self::start_in(dir, "", &auth_block, auth.map(|(u, p)| format!("{u}:{p}")))
    }

    /// Starts the registry with storage in `dir/data`, `http_block` in its config's
    /// `http` section (TLS) and `auth_block` in its config.
    fn start_in(
        mut dir: tempfile::TempDir,
        http_block: &str,
        auth_block: &str,
        creds: Option<String>,
    ) -> Registry {
        let tls = !http_block.is_empty();
        // A port picked free may be taken before the registry binds it: retry.
        for attempt in 0..5 {
            let port = free_port();
            let addr = format!("127.0.0.1:{port}");
            let config = dir.path().join("config.yml");
            fs::write(
                &config,
                format!(
                    "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: false\n\
                     storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
                     http:\n  addr: {addr}\n{http_block}{auth_block}",
                    dir.path().join("data").display()
                ),
            )
            .unwrap();
            let log = fs::File::create(dir.path().join("registry.log")).unwrap();
            let child = Command::new(REGISTRY_BIN)
                .arg("serve")
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("start docker-registry");
            let mut registry = Registry {
                child,
                addr,
                dir,
                creds: creds.clone(),
            };
            if registry.wait_ready(tls) {
                return registry;
            }
            eprintln!(
                "registry attempt {attempt} on port {port} failed: {}",
                registry.log()
            );
            dir = registry.into_dir();
        }
        panic!("docker-registry did not start");
    }

    /// Waits (10 s at most) for `GET /v2/` to answer; false if the process died.
    /// A registry serving `tls` answers the plain request with 400 ("Client sent an
    /// HTTP request to an HTTPS server").
    fn wait_ready(&mut self, tls: bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if let Some(status) = http_status(&self.addr, "/v2/")
                && (status == 200 || status == 401 || (tls && status == 400))
            {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// Stops the registry and hands its temp dir back.
    fn into_dir(mut self) -> tempfile::TempDir {
        self.stop();
        let placeholder = tempfile::tempdir().unwrap();
        std::mem::replace(&mut self.dir, placeholder)
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The registry's log (errors and the access log).
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// How many `GET`s of blob `digest` the access log shows.
    pub fn blob_gets(&self, digest: &str) -> usize {
        let needle = format!("/blobs/{digest} ");
        self.log()
            .lines()
            .filter(|l| l.contains("\"GET /v2/") && l.contains(&needle))
            .count()
    }

    /// The file holding blob `digest` in the registry's storage.
    pub fn stored_blob(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap();
        self.dir
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    /// `skopeo copy [extra...] oci:LAYOUT:NAME docker://ADDR/DEST`.
    pub fn push(&self, layout: &Path, name: &str, dest: &str, extra: &[&str]) {
        let mut cmd = Command::new("skopeo");
        cmd.args(["copy", "-q", "--dest-tls-verify=false"]);
        if let Some(creds) = &self.creds {
            cmd.arg("--dest-creds").arg(creds);
        }
        let out = cmd
            .args(extra)
            .arg(format!("oci:{}:{name}", layout.display()))
            .arg(format!("docker://{}/{dest}", self.addr))
            .output()
            .expect("run skopeo");
        assert!(
            out.status.success(),
            "skopeo copy to {dest} failed: {}\nregistry log:\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
    }

    /// Pushes the busybox layout as `busybox:TAG` (OCI, as built).
    pub fn push_busybox(&self, tag: &str, extra: &[&str]) {
        self.push(
            busybox_layout(),
            "localhost/busybox:latest",
            &format!("busybox:{tag}"),
            extra,
        );
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The HTTP status of `GET path` on `addr`, if it answers.
fn http_status(addr: &str, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect_timeout(&addr.parse().ok()?, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).ok()?;
    let head = String::from_utf8_lossy(&buf[..n]);
    head.split_whitespace().nth(1)?.parse().ok()
}

/// A layout with busybox plus a second layer holding `/big.bin` (`mib` MiB of
/// pseudo-random bytes), named `localhost/busybox:big`. Returns the new layer's
/// digest and the file content.
pub fn busybox_plus_big_layer(dir: &Path, mib: usize) -> (String, Vec<u8>) {
    // xorshift64: incompressible and reproducible.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let content: Vec<u8> = (0..mib << 17)
        .flat_map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_le_bytes()
        })
        .collect();
    let mut tar = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_ustar();
    header.set_size(content.len() as u64);
    header.set_mode(0o644);
    header.set_uid(0);
    header.set_gid(0);
    header.set_mtime(0);
    header.set_cksum();
    tar.append_data(&mut header, "big.bin", &content[..])
        .unwrap();
    let tar = tar.into_inner().unwrap();
    let layers = busybox_plus_layers(dir, &[tar], "localhost/busybox:big");
    (layers[0].clone(), content)
}

/// A layout with busybox plus the layers `tars` (uncompressed tars, stored
/// gzipped without compression), named `name`. Returns the new layers' digests.
pub fn busybox_plus_layers(dir: &Path, tars: &[Vec<u8>], name: &str) -> Vec<String> {
    let src = busybox_layout();
    fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
    for e in fs::read_dir(src.join("blobs/sha256")).unwrap() {
        let e = e.unwrap();
        fs::copy(e.path(), dir.join("blobs/sha256").join(e.file_name())).unwrap();
    }
    fs::copy(src.join("oci-layout"), dir.join("oci-layout")).unwrap();
    let sha = |data: &[u8]| format!("sha256:{}", hex::encode(sha2::Sha256::digest(data)));
    let put = |data: &[u8]| -> (String, usize) {
        let d = sha(data);
        fs::write(blob_in(dir, &d), data).unwrap();
        (d, data.len())
    };
    let (manifest, config, _) = busybox_digests();
    let mut config: Value =
        serde_json::from_slice(&fs::read(blob_in(src, &config)).unwrap()).unwrap();
    let mut m: Value = serde_json::from_slice(&fs::read(blob_in(src, &manifest)).unwrap()).unwrap();
    let mut digests = Vec::new();
    for tar in tars {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::none());
        std::io::Write::write_all(&mut gz, tar).unwrap();
        let (layer, layer_size) = put(&gz.finish().unwrap());
        config["rootfs"]["diff_ids"]
            .as_array_mut()
            .unwrap()
            .push(json!(sha(tar)));
        config["history"]
            .as_array_mut()
            .unwrap()
            .push(json!({"created_by": "test layer"}));
        m["layers"].as_array_mut().unwrap().push(json!({
            "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer, "size": layer_size}));
        digests.push(layer);
    }
    let (config, config_size) = put(&serde_json::to_vec(&config).unwrap());
    m["config"]["digest"] = json!(config);
    m["config"]["size"] = json!(config_size);
    let (m, m_size) = put(&serde_json::to_vec(&m).unwrap());
    let top = json!({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": m, "size": m_size,
        "annotations": {"org.opencontainers.image.ref.name": name}}]});
    fs::write(dir.join("index.json"), serde_json::to_vec(&top).unwrap()).unwrap();
    digests
}

/// Nothing half-written is left in the store.
pub fn assert_no_temps(root: &Path) {
    let tmp: Vec<_> = fs::read_dir(root.join("images/tmp")).unwrap().collect();
    assert!(tmp.is_empty(), "temps left: {tmp:?}");
    for e in fs::read_dir(root.join("snapshots")).unwrap() {
        let name = e.unwrap().file_name();
        assert!(!name.to_string_lossy().starts_with("tmp-"), "{name:?}");
    }
}
