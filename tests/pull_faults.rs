//! Root integration tests of the pull's retries (crates/image/src/pull/retry.rs and
//! fetch.rs) against the real distribution registry, reached through a small
//! fault-injecting HTTP proxy on 127.0.0.1: it cuts blob bodies midway and
//! answers 503 on cue, and records every request it sees.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common_registry;

use std::fs;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use common_registry::{
    Registry, assert_no_temps, blob_in, busybox_digests, busybox_layout, busybox_plus_big_layer,
    require_root,
};
use podhost::image::ImageStore;
use podhost::image::pull::{PullError, PullOptions, Puller};

/// What the proxy does to a request that matches a [`Rule`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Forward it, relay the response head and this many body bytes, then close
    /// both connections (a download broken midway).
    CutBodyAfter(usize),
    /// Answer with this status without asking the registry.
    Status(u16),
}

/// Applies `fault` to the next `remaining` requests whose path contains `path`.
struct Rule {
    path: String,
    remaining: usize,
    fault: Fault,
}

/// One request as the proxy saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    /// The `Range` header's value.
    range: Option<String>,
    fault: Option<Fault>,
}

#[derive(Default)]
struct ProxyState {
    upstream: String,
    rules: Mutex<Vec<Rule>>,
    log: Mutex<Vec<Seen>>,
    /// Every socket opened, to shut down on drop (unblocks any worker).
    sockets: Mutex<Vec<TcpStream>>,
    workers: Mutex<Vec<JoinHandle<()>>>,
    stopping: AtomicBool,
}

/// An HTTP/1.1 proxy in front of `upstream`, one thread per connection. Each
/// request is rewritten to `Connection: close`, so every request has its own
/// connection and the proxy sees (and can break) each one. Stops on drop: the
/// accept loop and every connection thread are joined, every socket closed.
struct Proxy {
    /// `127.0.0.1:PORT`.
    addr: String,
    state: Arc<ProxyState>,
    acceptor: Option<JoinHandle<()>>,
}

impl Proxy {
    fn start(upstream: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let state = Arc::new(ProxyState {
            upstream: upstream.to_string(),
            ..ProxyState::default()
        });
        let st = state.clone();
        let acceptor = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                st.track(&conn);
                let st2 = st.clone();
                let worker = std::thread::spawn(move || {
                    // A failed relay is what the client sees; nothing to report here.
                    let _ = st2.serve(conn);
                });
                st.workers.lock().unwrap().push(worker);
            }
        });
        Proxy {
            addr,
            state,
            acceptor: Some(acceptor),
        }
    }

    /// Applies `fault` to the next `times` requests whose path contains `path`.
    fn fault(&self, path: &str, times: usize, fault: Fault) {
        self.state.rules.lock().unwrap().push(Rule {
            path: path.to_string(),
            remaining: times,
            fault,
        });
    }

    /// The GETs seen whose path contains `path`, in order.
    fn gets(&self, path: &str) -> Vec<Seen> {
        let log = self.state.log.lock().unwrap();
        log.iter()
            .filter(|s| s.method == "GET" && s.path.contains(path))
            .cloned()
            .collect()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.state.stopping.store(true, Ordering::SeqCst);
        // Wakes the blocking accept, which then sees `stopping`.
        let _ = TcpStream::connect(&self.addr);
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
        for s in self.state.sockets.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
        let workers: Vec<_> = self.state.workers.lock().unwrap().drain(..).collect();
        for w in workers {
            let _ = w.join();
        }
    }
}

impl ProxyState {
    /// Registers a socket for shutdown on drop (at once if dropping already).
    fn track(&self, s: &TcpStream) {
        // A stuck peer cannot hold a worker forever.
        let _ = s.set_read_timeout(Some(Duration::from_secs(60)));
        let mut sockets = self.sockets.lock().unwrap();
        match s.try_clone() {
            // Checked under the lock that drop drains the list with.
            Ok(c) if !self.stopping.load(Ordering::SeqCst) => sockets.push(c),
            _ => {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
    }

    /// Handles the one request of a client connection.
    fn serve(&self, mut client: TcpStream) -> std::io::Result<()> {
        let (head, rest) = read_head(&mut client)?;
        let head = String::from_utf8_lossy(&head).into_owned();
        let mut lines = head.split("\r\n").filter(|l| !l.is_empty());
        let request_line = lines.next().unwrap_or_default().to_string();
        let mut words = request_line.split_whitespace();
        let method = words.next().unwrap_or_default().to_string();
        let path = words.next().unwrap_or_default().to_string();
        let mut range = None;
        let mut rewritten = format!("{request_line}\r\n");
        for line in lines {
            let (name, value) = line.split_once(':').unwrap_or((line, ""));
            if name.eq_ignore_ascii_case("connection") {
                continue;
            }
            if name.eq_ignore_ascii_case("range") {
                range = Some(value.trim().to_string());
            }
            rewritten.push_str(&format!("{line}\r\n"));
        }
        rewritten.push_str("Connection: close\r\n\r\n");

        let fault = self.take_fault(&path);
        self.log.lock().unwrap().push(Seen {
            method,
            path,
            range,
            fault,
        });
        if let Some(Fault::Status(code)) = fault {
            // Plain text, not an OCI error envelope: what a load balancer sends.
            let reason = if code == 503 {
                "Service Unavailable"
            } else {
                "Injected"
            };
            let body = format!("injected by the test proxy: {code}\n");
            write!(
                client,
                "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )?;
            return client.shutdown(Shutdown::Both);
        }

        let mut upstream = TcpStream::connect(&self.upstream)?;
        self.track(&upstream);
        upstream.write_all(rewritten.as_bytes())?;
        upstream.write_all(&rest)?;
        match fault {
            Some(Fault::CutBodyAfter(n)) => {
                let (head, mut body) = read_head(&mut upstream)?;
                client.write_all(&head)?;
                let mut buf = vec![0u8; 64 * 1024];
                while body.len() < n {
                    let got = upstream.read(&mut buf)?;
                    if got == 0 {
                        break;
                    }
                    body.extend_from_slice(&buf[..got]);
                }
                body.truncate(n);
                client.write_all(&body)?;
                // A clean close (FIN) before Content-Length is reached: the
                // client sees the body end early.
                let _ = upstream.shutdown(Shutdown::Both);
                client.shutdown(Shutdown::Both)
            }
            _ => {
                // The registry closes after its answer (Connection: close).
                std::io::copy(&mut upstream, &mut client)?;
                client.shutdown(Shutdown::Both)
            }
        }
    }

    /// The fault of the first rule matching `path` with uses left (using one).
    fn take_fault(&self, path: &str) -> Option<Fault> {
        let mut rules = self.rules.lock().unwrap();
        let rule = rules
            .iter_mut()
            .find(|r| r.remaining > 0 && path.contains(&r.path))?;
        rule.remaining -= 1;
        Some(rule.fault)
    }
}

/// Reads an HTTP head (through the blank line); returns it and any bytes read past it.
fn read_head(s: &mut TcpStream) -> std::io::Result<(Vec<u8>, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(i + 4);
            return Ok((buf, rest));
        }
        let n = s.read(&mut chunk)?;
        if n == 0 || buf.len() > 64 * 1024 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The start offset of a `bytes=N-` range.
fn range_start(seen: &Seen) -> u64 {
    let range = seen.range.as_deref();
    let start = range.and_then(|r| r.strip_prefix("bytes=")?.strip_suffix('-')?.parse().ok());
    start.unwrap_or_else(|| panic!("no `bytes=N-` range: {seen:?}"))
}

/// A fresh store and a puller that speaks plain HTTP to the proxy.
fn puller(root: &Path, proxy: &Proxy) -> (Arc<ImageStore>, Puller) {
    let store = Arc::new(ImageStore::open(root).unwrap());
    let opts = PullOptions {
        insecure_registries: vec![proxy.addr.clone()],
        credentials_file: None,
    };
    (store.clone(), Puller::new(store, opts))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_layer_download_resumes_from_where_it_stopped() {
    require_root();
    let registry = Registry::start();
    let layout = tempfile::tempdir().unwrap();
    let (big, content) = busybox_plus_big_layer(layout.path(), 8);
    registry.push(layout.path(), "localhost/busybox:big", "busybox:big", &[]);
    let proxy = Proxy::start(&registry.addr);
    const CUT: usize = 1 << 20;
    proxy.fault(&format!("/blobs/{big}"), 1, Fault::CutBodyAfter(CUT));
    let root = tempfile::tempdir().unwrap();
    let (store, puller) = puller(root.path(), &proxy);

    let name = puller
        .pull(&format!("{}/busybox:big", proxy.addr), None)
        .await
        .unwrap();
    let image = store.resolve(&name).unwrap();
    assert_eq!(image.layers.len(), 2);
    assert!(image.layers[0].join("bin/busybox").is_file());
    // The two halves were hashed as one blob and unpacked to the right bytes.
    assert!(fs::read(image.layers[1].join("big.bin")).unwrap() == content);

    // The first GET (from 0) was cut; one more asked for the rest only.
    let gets = proxy.gets(&format!("/blobs/{big}"));
    assert_eq!(gets.len(), 2, "{gets:#?}");
    assert_eq!(gets[0].range.as_deref(), Some("bytes=0-"), "{gets:#?}");
    assert_eq!(gets[0].fault, Some(Fault::CutBodyAfter(CUT)));
    let resumed_at = range_start(&gets[1]);
    assert!(
        resumed_at > 0 && resumed_at <= CUT as u64,
        "resumed at {resumed_at}: {gets:#?}"
    );
    eprintln!("resumed at byte {resumed_at} of the cut {CUT}");
    // Downloads are counted, not attempts: config and two layers.
    assert_eq!(puller.blob_fetches(), 3);
    // A resumed download still feeds the unpack that started with it.
    assert_eq!(puller.streamed_snapshots(), 2);
    assert_no_temps(root.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_are_retried() {
    require_root();
    let registry = Registry::start();
    registry.push_busybox("latest", &[]);
    let proxy = Proxy::start(&registry.addr);
    proxy.fault("/manifests/latest", 2, Fault::Status(503));
    let root = tempfile::tempdir().unwrap();
    let (store, puller) = puller(root.path(), &proxy);

    let name = puller
        .pull(&format!("{}/busybox:latest", proxy.addr), None)
        .await
        .unwrap();
    assert!(
        store.resolve(&name).unwrap().layers[0]
            .join("bin/busybox")
            .is_file()
    );
    let gets = proxy.gets("/manifests/latest");
    let faults: Vec<_> = gets.iter().map(|g| g.fault).collect();
    assert_eq!(
        faults,
        [Some(Fault::Status(503)), Some(Fault::Status(503)), None],
        "{gets:#?}"
    );
    // Only the third reached the registry.
    let log = registry.log();
    let at_registry = log
        .lines()
        .filter(|l| l.contains("\"GET /v2/busybox/manifests/latest "))
        .count();
    assert_eq!(at_registry, 1, "{log}");
    assert_eq!(puller.blob_fetches(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_manifest_is_fetched_again() {
    require_root();
    let registry = Registry::start();
    registry.push_busybox("latest", &[]);
    let proxy = Proxy::start(&registry.addr);
    proxy.fault("/manifests/latest", 1, Fault::CutBodyAfter(100));
    let root = tempfile::tempdir().unwrap();
    let (store, puller) = puller(root.path(), &proxy);

    let name = puller
        .pull(&format!("{}/busybox:latest", proxy.addr), None)
        .await
        .unwrap();
    assert!(store.resolve(&name).is_ok());
    // Manifests are fetched whole again (no ranges).
    let gets = proxy.gets("/manifests/latest");
    assert_eq!(gets.len(), 2, "{gets:#?}");
    assert!(gets.iter().all(|g| g.range.is_none()), "{gets:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_cut_every_time_fails_after_four_attempts() {
    require_root();
    let registry = Registry::start();
    registry.push_busybox("latest", &[]);
    let (_, _, layer) = busybox_digests();
    let size = fs::metadata(blob_in(busybox_layout(), &layer))
        .unwrap()
        .len();
    // Four cuts together stay short of the whole layer.
    const CUT: usize = 64 << 10;
    assert!(size > 4 * CUT as u64);
    let proxy = Proxy::start(&registry.addr);
    proxy.fault(&format!("/blobs/{layer}"), 1000, Fault::CutBodyAfter(CUT));
    let root = tempfile::tempdir().unwrap();
    let (store, puller) = puller(root.path(), &proxy);

    let reference = format!("{}/busybox:latest", proxy.addr);
    let err = puller.pull(&reference, None).await.unwrap_err();
    let msg = err.to_string();
    eprintln!("error as expected: {msg}");
    assert!(matches!(err, PullError::Registry { .. }), "{msg}");
    // "… (4 attempts over 3.6 s)": the back-off alone is 0.5 + 1 + 2 s.
    let (_, tail) = msg.rsplit_once(" (4 attempts over ").expect(&msg);
    let secs: f64 = tail.strip_suffix(" s)").expect(&msg).parse().expect(&msg);
    assert!(secs >= 3.5, "{msg}");
    assert!(msg.contains(&layer), "the message names the layer: {msg}");

    // Four GETs, each resuming from the bytes kept so far.
    let gets = proxy.gets(&format!("/blobs/{layer}"));
    assert_eq!(gets.len(), 4, "{gets:#?}");
    let starts: Vec<u64> = gets.iter().map(range_start).collect();
    assert_eq!(starts[0], 0, "{gets:#?}");
    for (i, pair) in starts.windows(2).enumerate() {
        assert!(pair[0] < pair[1], "{starts:?}");
        assert!(pair[1] <= (i as u64 + 1) * CUT as u64, "{starts:?}");
    }
    assert_eq!(puller.blob_fetches(), 2, "config and layer, once each");
    // Nothing half-written is visible.
    assert_no_temps(root.path());
    assert!(!store.has_blob(&layer).unwrap());
    assert!(store.resolve(&reference).is_err());
    assert!(store.list().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_found_is_not_retried() {
    require_root();
    let registry = Registry::start();
    registry.push_busybox("latest", &[]);
    let proxy = Proxy::start(&registry.addr);
    let root = tempfile::tempdir().unwrap();
    let (store, puller) = puller(root.path(), &proxy);

    let err = puller
        .pull(&format!("{}/busybox:nope", proxy.addr), None)
        .await
        .unwrap_err();
    assert!(matches!(err, PullError::NotFound { .. }), "{err}");
    // A 404 will not change: asked once, not four times.
    let gets = proxy.gets("/manifests/nope");
    assert_eq!(gets.len(), 1, "{gets:#?}");
    assert_eq!(puller.blob_fetches(), 0);
    assert!(store.list().unwrap().is_empty());
    // Dropping the proxy closes its port (and joins its threads).
    let addr = proxy.addr.clone();
    drop(proxy);
    assert!(TcpStream::connect(&addr).is_err());
}
