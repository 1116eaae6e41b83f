//! A TCP forwarder in front of a registry that counts how its connections open: with
//! a TLS handshake (a first byte of 0x16, a TLS handshake record) or with anything
//! else (plain HTTP). It shows which protocol a pull spoke to a registry, whatever
//! the registry itself logs. Its listener may be made in another network namespace
//! (its connections to the registry are made from the test's).

use std::io;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// The first byte of a TLS connection: a handshake record (the ClientHello).
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// A running forwarder; stops accepting on drop.
pub struct Handshakes {
    /// Where to connect instead of the registry: `IP:PORT`.
    pub addr: String,
    counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
}

#[derive(Default)]
struct Counts {
    tls: AtomicUsize,
    plain: AtomicUsize,
}

impl Handshakes {
    /// A forwarder on 127.0.0.1 to `upstream` (`IP:PORT`).
    pub fn on_loopback(upstream: &str) -> Handshakes {
        Self::start(TcpListener::bind("127.0.0.1:0").unwrap(), upstream)
    }

    /// A forwarder accepting on `listener` (bound wherever) to `upstream`.
    pub fn start(listener: TcpListener, upstream: &str) -> Handshakes {
        let addr = listener.local_addr().unwrap().to_string();
        // Polled, so that it stops on drop even in a namespace the test cannot reach.
        listener.set_nonblocking(true).unwrap();
        let counts = Arc::new(Counts::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s, upstream) = (counts.clone(), stop.clone(), upstream.to_string());
        std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        let (c, upstream) = (c.clone(), upstream.clone());
                        std::thread::spawn(move || forward(conn, &upstream, &c));
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    Err(_) => {}
                }
            }
        });
        Handshakes { addr, counts, stop }
    }

    /// Connections opened with a TLS handshake so far.
    pub fn tls(&self) -> usize {
        self.counts.tls.load(Ordering::SeqCst)
    }

    /// Connections opened with anything else (plain HTTP) so far.
    pub fn plain(&self) -> usize {
        self.counts.plain.load(Ordering::SeqCst)
    }
}

impl Drop for Handshakes {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Counts how `client` opens, then copies bytes both ways until either side closes.
fn forward(client: TcpStream, upstream: &str, counts: &Counts) {
    let _ = client.set_nonblocking(false);
    let _ = client.set_read_timeout(Some(Duration::from_secs(10)));
    let mut first = [0u8; 1];
    if !matches!(client.peek(&mut first), Ok(1)) {
        return;
    }
    let counter = match first[0] {
        TLS_HANDSHAKE_RECORD => &counts.tls,
        _ => &counts.plain,
    };
    counter.fetch_add(1, Ordering::SeqCst);
    let _ = client.set_read_timeout(None);
    let Ok(server) = TcpStream::connect(upstream) else {
        return;
    };
    let (Ok(mut client_reader), Ok(mut server_writer)) = (client.try_clone(), server.try_clone())
    else {
        return;
    };
    let upward = std::thread::spawn(move || {
        let _ = io::copy(&mut client_reader, &mut server_writer);
        let _ = server_writer.shutdown(Shutdown::Write);
    });
    let (mut server_reader, mut client_writer) = (server, client);
    let _ = io::copy(&mut server_reader, &mut client_writer);
    let _ = client_writer.shutdown(Shutdown::Both);
    let _ = upward.join();
}
