//! `podhost port-forward`: local ports in the test's own network namespace reach ports
//! on the loopback of a pod's network namespace through the daemon's API socket, as
//! `kubectl port-forward` does: HTTP from busybox httpd, concurrent connections, a
//! random local port, 10 MiB intact both ways with half-closes, a refused port failing
//! only its connection, and the command ending when the pod goes.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;

/// A pod with busybox httpd on port 80 (an index page and a 10 MiB random file with its
/// sha256) and an echo server (`nc -e cat`) on 9000, each Ready once it listens.
fn web_pod(name: &str) -> String {
    let httpd = "mkdir -p /www && echo hello-from-pod > /www/index.html \
        && dd if=/dev/urandom of=/www/big bs=1048576 count=10 2>/dev/null \
        && sha256sum /www/big | cut -d' ' -f1 > /www/big.sha \
        && exec httpd -f -p 80 -h /www";
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: httpd
    image: localhost/busybox:latest
    imagePullPolicy: Never
    command: ["sh", "-c", {httpd}]
    ports:
    - name: http
      containerPort: 80
    readinessProbe:
      tcpSocket:
        port: 80
      periodSeconds: 1
  - name: echo
    image: localhost/busybox:latest
    imagePullPolicy: Never
    command: ["nc", "-ll", "-p", "9000", "-e", "cat"]
    readinessProbe:
      tcpSocket:
        port: 9000
      periodSeconds: 1
"#,
        httpd = serde_json::to_string(httpd).unwrap()
    )
}

/// Starts the web pod and waits until both servers listen; returns its full name.
fn start_web_pod(d: &TestDaemon, name: &str) -> String {
    d.write_manifest(&format!("{name}.yaml"), &web_pod(name));
    d.wait_pod(name, "the web pod Ready", 60, |p| {
        p["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
            .then_some(())
    });
    d.full_name(name)
}

/// A running `podhost port-forward`: its output lines as they come; killed on drop.
struct Forwarder {
    child: Child,
    stdout: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Forwarder {
    fn start(d: &TestDaemon, args: &[&str]) -> Self {
        let mut child = Command::new(BIN)
            .arg("--socket")
            .arg(&d.socket)
            .arg("port-forward")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn podhost port-forward");
        let collect = |stream: Box<dyn Read + Send>| {
            let lines = Arc::new(Mutex::new(Vec::new()));
            let sink = lines.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    sink.lock().unwrap().push(line);
                }
            });
            lines
        };
        let stdout = collect(Box::new(child.stdout.take().unwrap()));
        let stderr = collect(Box::new(child.stderr.take().unwrap()));
        Self {
            child,
            stdout,
            stderr,
        }
    }

    fn stdout(&self) -> Vec<String> {
        self.stdout.lock().unwrap().clone()
    }

    fn stderr(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    fn output(&self) -> String {
        format!(
            "stdout:\n{}\nstderr:\n{}",
            self.stdout().join("\n"),
            self.stderr().join("\n")
        )
    }

    /// Waits for a stdout line `f` accepts (or fails showing all output).
    fn wait_stdout<T>(&self, what: &str, f: impl Fn(&str) -> Option<T>) -> T {
        wait_until(Duration::from_secs(20), what, || {
            self.stdout().iter().find_map(|l| f(l))
        })
        .unwrap_or_else(|| panic!("no {what}; {}", self.output()))
    }

    /// Waits for a stderr line containing `needle`; returns it.
    fn wait_stderr(&self, needle: &str) -> String {
        wait_until(Duration::from_secs(20), needle, || {
            self.stderr().into_iter().find(|l| l.contains(needle))
        })
        .unwrap_or_else(|| panic!("no stderr line with {needle:?}; {}", self.output()))
    }

    /// The local port printed in `Forwarding from 127.0.0.1:PORT -> REMOTE`.
    fn local_port(&self, remote: u16) -> u16 {
        let suffix = format!(" -> {remote}");
        self.wait_stdout("Forwarding from 127.0.0.1", |l| {
            l.strip_prefix("Forwarding from 127.0.0.1:")?
                .strip_suffix(&suffix)?
                .parse()
                .ok()
        })
    }

    fn wait_exit(&mut self, secs: u64) -> ExitStatus {
        let child = &mut self.child;
        wait_until(Duration::from_secs(secs), "port-forward to exit", || {
            child.try_wait().unwrap()
        })
        .unwrap_or_else(|| panic!("port-forward still runs after {secs} s"))
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], port))).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

/// An HTTP/1.0 GET whose client half-closes after the request (the answer must still
/// come); returns the status line and the body.
fn http_get(mut s: TcpStream, path: &str) -> (String, Vec<u8>) {
    write!(s, "GET {path} HTTP/1.0\r\nHost: pod\r\n\r\n").unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).unwrap();
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP head in {:?}", String::from_utf8_lossy(&answer)));
    let head = String::from_utf8_lossy(&answer[..split]).into_owned();
    let status = head.lines().next().unwrap_or_default().to_string();
    (status, answer[split + 4..].to_vec())
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// A local port nothing listens on right now (taken and released).
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn http_through_the_forward_concurrently_and_10_mib_intact_both_ways() {
    require_root();
    let d = TestDaemon::start();
    let pod = start_web_pod(&d, "web");

    // `:80`: a free local port, printed for both loopbacks; a named remote port too.
    let fwd = Forwarder::start(&d, &[&pod, ":80", ":9000"]);
    let port = fwd.local_port(80);
    let echo_port = fwd.local_port(9000);
    assert!(
        fwd.stdout()
            .contains(&format!("Forwarding from [::1]:{port} -> 80")),
        "{}",
        fwd.output()
    );
    let (status, body) = http_get(connect(port), "/index.html");
    assert!(status.contains("200"), "{status}");
    assert_eq!(body, b"hello-from-pod\n");
    fwd.wait_stdout("Handling connection", |l| {
        (l == format!("Handling connection for {port}")).then_some(())
    });

    // Several connections open at once, each answered.
    let conns: Vec<TcpStream> = (0..8).map(|_| connect(port)).collect();
    let answers: Vec<_> = conns
        .into_iter()
        .map(|c| std::thread::spawn(move || http_get(c, "/index.html")))
        .collect();
    for a in answers {
        let (status, body) = a.join().unwrap();
        assert!(status.contains("200"), "{status}");
        assert_eq!(body, b"hello-from-pod\n");
    }

    // 10 MiB from the pod: the file's hash, computed in the pod, matches.
    let (_, want) = http_get(connect(port), "/big.sha");
    let (status, big) = http_get(connect(port), "/big");
    assert!(status.contains("200"), "{status}");
    assert_eq!(big.len(), 10 << 20);
    assert_eq!(sha256_hex(&big), String::from_utf8_lossy(&want).trim());

    // 10 MiB to the pod and back through `cat`: the client half-closes after sending
    // and still reads every byte of the answer.
    let mut data = vec![0u8; 10 << 20];
    fastrand::Rng::with_seed(11).fill(&mut data);
    let s = connect(echo_port);
    let mut writer = s.try_clone().unwrap();
    let sent = data.clone();
    let send = std::thread::spawn(move || {
        writer.write_all(&sent).unwrap();
        writer.shutdown(Shutdown::Write).unwrap();
    });
    let mut back = Vec::with_capacity(data.len());
    (&s).read_to_end(&mut back).unwrap();
    send.join().unwrap();
    assert_eq!(back.len(), data.len(), "{}", fwd.output());
    assert!(back == data, "the echoed bytes differ from the sent ones");

    // A client that goes away mid-download (its unread data makes the close a reset)
    // ends only its connection: the forwarder's writes then fail with EPIPE, never a
    // SIGPIPE that kills it.
    for _ in 0..3 {
        let mut s = connect(port);
        write!(s, "GET /big HTTP/1.0\r\n\r\n").unwrap();
        let mut first = [0u8; 4096];
        s.read_exact(&mut first).unwrap();
        drop(s);
        // Closed before the answer comes: a FIN, then writes into a closed socket.
        let mut s = connect(port);
        write!(s, "GET /big HTTP/1.0\r\n\r\n").unwrap();
        drop(s);
    }
    std::thread::sleep(Duration::from_millis(500));
    let (status, body) = http_get(connect(port), "/index.html");
    assert!(status.contains("200"), "{status}; {}", fwd.output());
    assert_eq!(body, b"hello-from-pod\n");

    // LOCAL:REMOTE with pod/NAME and a named port, also on ::1.
    let fixed = free_port();
    let named = Forwarder::start(&d, &[&format!("pod/{pod}"), &format!("{fixed}:http")]);
    assert_eq!(named.local_port(80), fixed);
    named.wait_stdout("the ::1 listener", |l| {
        (l == format!("Forwarding from [::1]:{fixed} -> 80")).then_some(())
    });
    let v6 = TcpStream::connect(SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, fixed))).unwrap();
    v6.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let (status, body) = http_get(v6, "/index.html");
    assert!(status.contains("200"), "{status}");
    assert_eq!(body, b"hello-from-pod\n");
}

#[test]
fn a_refused_port_fails_only_its_connection() {
    require_root();
    let d = TestDaemon::start();
    let pod = start_web_pod(&d, "refuse");
    let fwd = Forwarder::start(&d, &[&pod, ":80", ":81"]);
    let (port, dead) = (fwd.local_port(80), fwd.local_port(81));

    let mut s = connect(dead);
    let mut got = Vec::new();
    // The pod refused: the local connection is closed without a byte.
    let _ = s.read_to_end(&mut got);
    assert!(got.is_empty(), "{got:?}");
    let line = fwd.wait_stderr("an error occurred forwarding");
    for part in [
        &format!("forwarding {dead} -> 81"),
        &pod,
        "127.0.0.1:81",
        "[::1]:81",
        "connect: connection refused",
    ] {
        assert!(line.contains(part), "{part:?} missing from {line:?}");
    }

    // The forwarder goes on serving, the refused port's listener included.
    let (status, body) = http_get(connect(port), "/index.html");
    assert!(status.contains("200"), "{status}; {}", fwd.output());
    assert_eq!(body, b"hello-from-pod\n");
    let _ = connect(dead).read_to_end(&mut got);
    wait_until(Duration::from_secs(20), "a second refusal", || {
        (fwd.stderr()
            .iter()
            .filter(|l| l.contains("an error occurred forwarding"))
            .count()
            == 2)
            .then_some(())
    })
    .unwrap_or_else(|| panic!("{}", fwd.output()));
}

#[test]
fn the_command_ends_on_sigint_and_with_an_error_when_the_pod_goes() {
    require_root();
    let d = TestDaemon::start();
    let pod = start_web_pod(&d, "gone");

    let mut interrupted = Forwarder::start(&d, &[&pod, ":80"]);
    interrupted.local_port(80);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(interrupted.child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = interrupted.wait_exit(20);
    assert_eq!(status.code(), Some(0), "{}", interrupted.output());

    let mut fwd = Forwarder::start(&d, &[&pod, ":80"]);
    let port = fwd.local_port(80);
    assert!(http_get(connect(port), "/").0.contains("200"));
    d.remove_manifest("gone.yaml");
    let status = fwd.wait_exit(60);
    assert_eq!(status.code(), Some(1), "{}", fwd.output());
    let line = fwd.wait_stderr("lost connection to pod");
    assert!(line.contains(&pod), "{line}");
}

#[test]
fn unknown_or_pending_pods_and_bad_ports_are_refused_up_front() {
    require_root();
    let d = TestDaemon::start();
    let out = d.cli(&["port-forward", "nosuch", ":80"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("pod \"nosuch\" not found"), "{stderr}");

    // A pod whose image is missing stays Pending: kubectl's refusal.
    d.write_manifest(
        "pending.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: pending\nspec:\n  containers:\n  - name: main\n    image: localhost/absent:1\n    imagePullPolicy: Never\n",
    );
    d.wait_pod("pending", "the pending pod", 30, |p| {
        (phase(p) == "Pending").then_some(())
    });
    let out = d.cli(&["port-forward", &d.full_name("pending"), ":80"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr
            .contains("unable to forward port because pod is not running. Current status=Pending"),
        "{stderr}"
    );

    let pod = start_web_pod(&d, "bad");
    for (args, needle) in [
        (
            vec![pod.as_str(), "metrics"],
            "does not have a named port 'metrics'",
        ),
        (vec![pod.as_str(), "80:0"], "Error parsing remote port '0'"),
        (vec![pod.as_str(), "x:80"], "Error parsing local port 'x'"),
        (
            vec![pod.as_str(), ":80", "--address", "nowhere"],
            "\"nowhere\" is not a valid IP address",
        ),
        (vec!["deployment/x/y", ":80"], "is not a pod"),
    ] {
        let mut full = vec!["port-forward"];
        full.extend(args.iter().copied());
        let out = d.cli(&full);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{full:?}: {stderr}");
        assert!(stderr.contains(needle), "{full:?}: {stderr}");
    }
}

#[test]
fn the_forwarder_outlives_a_daemon_killed_with_a_connection_open() {
    require_root();
    let mut d = TestDaemon::start();
    let pod = start_web_pod(&d, "restart");
    let fwd = Forwarder::start(&d, &[&pod, ":9000", ":80"]);
    let (echo_port, port) = (fwd.local_port(9000), fwd.local_port(80));

    // A connection open (and idle, every byte echoed) when the daemon dies: the
    // client's next bytes go into the closed unix socket (EPIPE), which must end that
    // connection, not the command.
    let mut s = connect(echo_port);
    s.write_all(b"before\n").unwrap();
    let mut echoed = [0u8; 7];
    s.read_exact(&mut echoed).unwrap();
    assert_eq!(&echoed, b"before\n");
    d.kill9();
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..3 {
        let _ = s.write_all(b"after\n");
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(s);
    let mut fwd = fwd;
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        fwd.child.try_wait().unwrap().is_none(),
        "port-forward ended with the daemon: {}",
        fwd.output()
    );

    // The restarted daemon adopts the pod; the same forwarder reaches it again.
    d.spawn_daemon();
    let (status, body) = wait_until(Duration::from_secs(30), "a GET after the restart", || {
        let (status, body) = http_get(connect(port), "/index.html");
        status.contains("200").then_some((status, body))
    })
    .unwrap_or_else(|| panic!("no answer after the restart: {}", fwd.output()));
    assert!(status.contains("200"));
    assert_eq!(body, b"hello-from-pod\n");
}

#[test]
fn a_host_network_pod_is_reached_on_the_daemons_loopback() {
    require_root();
    let d = TestDaemon::start();
    let port = free_port();
    d.write_manifest(
        "hostnet.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: hostnet
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  containers:
  - name: echo
    image: localhost/busybox:latest
    imagePullPolicy: Never
    command: ["nc", "-ll", "-p", "{port}", "-e", "cat"]
    readinessProbe:
      tcpSocket:
        port: {port}
      periodSeconds: 1
"#
        ),
    );
    d.wait_pod("hostnet", "the hostNetwork pod Ready", 60, |p| {
        p["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
            .then_some(())
    });
    let fwd = Forwarder::start(&d, &[&d.full_name("hostnet"), &format!(":{port}")]);
    let local = fwd.local_port(port);
    let mut s = connect(local);
    s.write_all(b"through the host\n").unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let mut back = String::new();
    s.read_to_string(&mut back).unwrap();
    assert_eq!(back, "through the host\n", "{}", fwd.output());
}
