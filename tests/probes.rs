//! Probe handlers against real servers (root): HTTP, HTTPS (a self-signed certificate
//! made with openssl), TCP and a gRPC health service (python3-grpcio) in a fresh
//! network namespace of the test's own; exec into a real container of a test daemon's
//! pod (success, failure, a timeout that leaves nothing running); and that a pod's
//! probe reaches the loopback of the pod's network namespace, not the host's.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use chrono::Utc;
use common::{BIN, TestDaemon, busybox_pod, container_status, phase, require_root, wait_until};
use podhost::model::probe::{
    HttpAction, HttpScheme, Outcome, ProbeAction, ProbeKind, ProbeResult, ProbeTiming,
};
use podhost::probe::{
    ContainerProbes, HandlerTarget, PodNetwork, ProbeReport, ProbeSpec, ProbedInstance,
    run_handler, run_prober,
};

const SECOND: Option<Duration> = Some(Duration::from_secs(1));

/// The probe servers in a network namespace of their own; killed (the whole process
/// group) on drop.
struct NetnsServers {
    child: Child,
    _dir: tempfile::TempDir,
}

impl NetnsServers {
    fn start() -> Self {
        assert!(require_root());
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        let out = Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            ])
            .args(["-subj", "/CN=probe.test", "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .output()
            .expect("openssl (scripts/install-deps.sh --test installs it)");
        assert!(
            out.status.success(),
            "openssl: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/probe_server.py");
        let mut child = Command::new("unshare")
            .args(["--net", "--", "sh", "-c"])
            .arg("ip link set lo up && exec /usr/bin/python3 \"$0\" \"$1\" \"$2\"")
            .arg(&script)
            .arg(&cert)
            .arg(&key)
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("unshare");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let servers = Self { child, _dir: dir };
        assert_eq!(
            line.trim(),
            "ready",
            "the probe servers did not start (python3-grpcio installed?)"
        );
        servers
    }

    fn network(&self) -> PodNetwork {
        PodNetwork::Namespace(PathBuf::from(format!("/proc/{}/ns/net", self.child.id())))
    }

    fn target(&self) -> HandlerTarget {
        target(self.network(), "no-container")
    }
}

impl Drop for NetnsServers {
    fn drop(&mut self) {
        let pgid = nix::unistd::Pid::from_raw(-i32::try_from(self.child.id()).unwrap());
        let _ = nix::sys::signal::kill(pgid, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

fn target(network: PodNetwork, container_id: &str) -> HandlerTarget {
    HandlerTarget {
        exe: PathBuf::from(BIN),
        libcontainer_root: PathBuf::from("/nonexistent"),
        container_id: container_id.to_string(),
        network,
        pod_ip: None,
    }
}

fn http(scheme: HttpScheme, port: u16, path: &str, headers: &[(&str, &str)]) -> ProbeAction {
    ProbeAction::Http(HttpAction {
        scheme,
        host: None,
        port,
        path: path.into(),
        headers: headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
    })
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Runtime::new().unwrap()
}

fn failure_text(o: &Outcome) -> &str {
    match o {
        Outcome::Failure(m) => m,
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[test]
fn http_get_status_redirects_headers_and_timeout() {
    let s = NetnsServers::start();
    let t = s.target();
    let get = |path: &str, headers: &[(&str, &str)]| {
        rt().block_on(run_handler(
            &t,
            &http(HttpScheme::Http, 8080, path, headers),
            SECOND,
        ))
    };
    assert_eq!(get("/ok", &[]), Outcome::Success, "200 with a 20 KB body");
    assert!(failure_text(&get("/fail", &[])).contains("statuscode: 500"));
    assert_eq!(
        get("/redirect", &[]),
        Outcome::Success,
        "302 to /ok followed"
    );
    assert!(
        failure_text(&get("/redirect-fail", &[])).contains("statuscode: 500"),
        "301 to /fail followed"
    );
    let away = get("/away", &[]);
    assert_eq!(
        away,
        Outcome::Warning("Probe terminated redirects, Response body: no".into()),
        "a redirect to another host is not followed: a success with the kubelet's warning"
    );
    assert_eq!(away.result(), podhost::model::probe::ProbeResult::Success);
    assert!(failure_text(&get("/loop", &[])).contains("stopped after 10 redirects"));
    assert!(failure_text(&get("/missing", &[])).contains("statuscode: 404"));
    assert_eq!(get("/headers", &[("X-Probe", "yes")]), Outcome::Success);
    assert!(failure_text(&get("/headers", &[])).contains("400"));
    assert_eq!(
        get("/ua", &[("User-Agent", "custom")]),
        Outcome::Success,
        "the probe's UA wins"
    );
    assert!(failure_text(&get("/ua", &[])).contains("400"));
    let slow = get("/slow", &[]);
    assert!(
        failure_text(&slow).contains("timed out after 1s"),
        "{slow:?}"
    );
}

#[test]
fn https_with_a_self_signed_certificate() {
    let s = NetnsServers::start();
    let t = s.target();
    let get = |scheme, port, path: &str| {
        rt().block_on(run_handler(&t, &http(scheme, port, path, &[]), SECOND))
    };
    assert_eq!(
        get(HttpScheme::Https, 8443, "/ok"),
        Outcome::Success,
        "not verified"
    );
    assert!(failure_text(&get(HttpScheme::Https, 8443, "/fail")).contains("500"));
    assert_eq!(get(HttpScheme::Https, 8443, "/redirect"), Outcome::Success);
    let plain = get(HttpScheme::Https, 8080, "/ok");
    assert!(
        failure_text(&plain).contains("TLS"),
        "HTTPS to a plain server: {plain:?}"
    );
}

#[test]
fn tcp_open_and_closed() {
    let s = NetnsServers::start();
    let t = s.target();
    let tcp = |port| {
        rt().block_on(run_handler(
            &t,
            &ProbeAction::Tcp { host: None, port },
            SECOND,
        ))
    };
    assert_eq!(tcp(8080), Outcome::Success);
    assert!(failure_text(&tcp(8081)).contains("refused"));
}

#[test]
fn grpc_health_serving_not_serving_and_unknown_service() {
    let s = NetnsServers::start();
    let t = s.target();
    let grpc = |port, service: Option<&str>| {
        let a = ProbeAction::Grpc {
            port,
            service: service.map(str::to_string),
            tls: false,
        };
        rt().block_on(run_handler(&t, &a, SECOND))
    };
    assert_eq!(grpc(9090, None), Outcome::Success);
    let down = grpc(9090, Some("down"));
    assert!(failure_text(&down).contains("NOT_SERVING"), "{down:?}");
    let unknown = grpc(9090, Some("nope"));
    assert!(failure_text(&unknown).contains("NotFound"), "{unknown:?}");
    let closed = grpc(9091, None);
    assert!(
        failure_text(&closed).contains("failed to connect"),
        "{closed:?}"
    );
    let http1 = grpc(8080, None);
    assert!(
        matches!(http1, Outcome::Failure(_)),
        "an HTTP/1 server is no gRPC server"
    );
}

#[test]
fn a_probe_reaches_the_loopback_of_its_network_not_the_hosts() {
    let s = NetnsServers::start();
    // A listener on the host's loopback, on a port nothing in the namespace listens on.
    let host = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = host.local_addr().unwrap().port();
    let tcp = |t: &HandlerTarget, port| {
        rt().block_on(run_handler(
            t,
            &ProbeAction::Tcp { host: None, port },
            SECOND,
        ))
    };
    assert_eq!(tcp(&target(PodNetwork::Host, "x"), port), Outcome::Success);
    assert!(
        matches!(tcp(&s.target(), port), Outcome::Failure(_)),
        "host port seen from the pod"
    );
    // And the namespace's server is the one the pod's probes reach.
    assert_eq!(tcp(&s.target(), 9090), Outcome::Success);
    let gone = target(PodNetwork::Namespace("/nonexistent/net".into()), "x");
    assert!(
        matches!(tcp(&gone, 9090), Outcome::Unknown(_)),
        "no namespace: podhost's error"
    );
}

#[test]
fn the_prober_reports_changes_waits_for_startup_and_holds() {
    let s = NetnsServers::start();
    let timing = |failure_threshold, grace: Option<u64>| ProbeTiming {
        period: Duration::from_secs(1),
        failure_threshold,
        termination_grace: grace.map(Duration::from_secs),
        ..ProbeTiming::default()
    };
    let probes = ContainerProbes {
        startup: Some(ProbeSpec {
            action: http(HttpScheme::Http, 8080, "/redirect", &[]),
            timing: timing(3, None),
        }),
        liveness: Some(ProbeSpec {
            action: ProbeAction::Tcp {
                host: None,
                port: 8081,
            },
            timing: timing(2, Some(3)),
        }),
        readiness: Some(ProbeSpec {
            action: http(HttpScheme::Http, 8080, "/ok", &[]),
            timing: timing(3, None),
        }),
    };
    let instance = ProbedInstance {
        container: "web".into(),
        started_at: Utc::now(),
        target: s.target(),
        series: Default::default(),
    };
    let reports: Vec<ProbeReport> = rt().block_on(async {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let prober = tokio::spawn(run_prober(probes, instance, tx));
        let mut got = Vec::new();
        while got.len() < 3 {
            got.push(*rx.recv().await.expect("a report"));
        }
        // Liveness is on hold now and readiness unchanged: nothing more within periods.
        let more = tokio::time::timeout(Duration::from_secs(3), rx.recv()).await;
        prober.abort();
        assert!(more.is_err(), "a report after the hold: {more:?}");
        got
    });
    assert_eq!(
        reports[0].kind,
        ProbeKind::Startup,
        "startup first: {reports:?}"
    );
    assert_eq!(reports[0].result, ProbeResult::Success);
    let live = reports
        .iter()
        .find(|r| r.kind == ProbeKind::Liveness)
        .unwrap();
    assert_eq!(live.result, ProbeResult::Failure);
    assert!(live.message.contains("refused"), "{live:?}");
    assert_eq!(live.termination_grace, Some(Duration::from_secs(3)));
    let ready = reports
        .iter()
        .find(|r| r.kind == ProbeKind::Readiness)
        .unwrap();
    assert_eq!(
        (ready.result, ready.message.as_str()),
        (ProbeResult::Success, "")
    );
}

#[test]
fn a_failing_startup_probe_keeps_liveness_and_readiness_from_running() {
    let s = NetnsServers::start();
    let timing = ProbeTiming {
        period: Duration::from_secs(1),
        failure_threshold: 2,
        ..ProbeTiming::default()
    };
    let ok = ProbeSpec {
        action: http(HttpScheme::Http, 8080, "/ok", &[]),
        timing,
    };
    let probes = ContainerProbes {
        startup: Some(ProbeSpec {
            action: http(HttpScheme::Http, 8080, "/fail", &[]),
            timing,
        }),
        liveness: Some(ok.clone()),
        readiness: Some(ok),
    };
    let instance = ProbedInstance {
        container: "web".into(),
        started_at: Utc::now(),
        target: s.target(),
        series: Default::default(),
    };
    rt().block_on(async {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let prober = tokio::spawn(run_prober(probes, instance, tx));
        let first = rx.recv().await.expect("a report");
        assert_eq!(
            (first.kind, first.result),
            (ProbeKind::Startup, ProbeResult::Failure)
        );
        // Everything ends: startup on hold, the others never started.
        let rest = tokio::time::timeout(Duration::from_secs(30), rx.recv()).await;
        assert!(
            matches!(rest, Ok(None)),
            "the prober should end without more: {rest:?}"
        );
        prober.await.unwrap();
    });
}

/// A test daemon with a running busybox pod `name`; returns it, the pod's uid and the
/// container's libcontainer id.
fn running_pod(name: &str, command: &str) -> (TestDaemon, String, String) {
    assert!(require_root());
    let d = TestDaemon::start();
    d.write_manifest(&format!("{name}.yaml"), &busybox_pod(name, "", "", command));
    let pod = d.wait_pod(name, "Running", 30, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
    let id = container_status(&pod, "main").unwrap()["containerID"]
        .as_str()
        .unwrap()
        .trim_start_matches("podhost://")
        .to_string();
    (d, uid, id)
}

fn pod_target(d: &TestDaemon, uid: &str, id: &str) -> HandlerTarget {
    HandlerTarget {
        exe: PathBuf::from(BIN),
        libcontainer_root: d.root.join("run/libcontainer"),
        container_id: id.to_string(),
        network: PodNetwork::Namespace(d.root.join("pods").join(uid).join("ns/net")),
        // The pod's loopback: what the probes below listen on.
        pod_ip: None,
    }
}

/// Live (not zombie) processes running `command` (whole words: other tests' `sleep
/// 1000` is not this test's `sleep 100`).
fn running(command: &str) -> Vec<i32> {
    TestDaemon::pids_running(command)
        .into_iter()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| {
                    !s.rsplit(')')
                        .next()
                        .unwrap_or("")
                        .trim_start()
                        .starts_with('Z')
                })
                .unwrap_or(false)
        })
        .collect()
}

fn exec(command: &[&str]) -> ProbeAction {
    ProbeAction::Exec {
        command: command.iter().map(|s| s.to_string()).collect(),
    }
}

#[test]
fn exec_probes_succeed_fail_and_time_out_leaving_nothing_running() {
    let (d, uid, id) = running_pod("execprobe", "sleep 3600");
    let t = pod_target(&d, &uid, &id);
    let run = |a: &ProbeAction, timeout| rt().block_on(run_handler(&t, a, timeout));
    assert_eq!(run(&exec(&["true"]), SECOND), Outcome::Success);
    let failed = run(&exec(&["sh", "-c", "echo broken; exit 3"]), SECOND);
    assert!(
        failure_text(&failed).contains("exited with 3: broken"),
        "{failed:?}"
    );
    // A command that exits 124 itself is a failure, not a timeout.
    let own = run(&exec(&["sh", "-c", "exit 124"]), SECOND);
    assert!(failure_text(&own).contains("exited with 124"), "{own:?}");
    // The timeout kills the command and what it started, inside the container.
    let slow = run(&exec(&["sh", "-c", "sleep 101 & sleep 100"]), SECOND);
    assert!(failure_text(&slow).contains("timed out"), "{slow:?}");
    assert_eq!(
        running("sleep 100"),
        Vec::<i32>::new(),
        "the command survived its timeout"
    );
    assert_eq!(
        running("sleep 101"),
        Vec::<i32>::new(),
        "its child survived the timeout"
    );
    // A hook's exec has no timeout.
    assert_eq!(run(&exec(&["sleep", "1"]), None), Outcome::Success);
    // The container itself is untouched.
    let pod = d.pod("execprobe").unwrap();
    assert_eq!(container_status(&pod, "main").unwrap()["restartCount"], 0);
    assert!(!running("sleep 3600").is_empty());
}

#[test]
fn a_dropped_exec_probe_kills_its_command() {
    let (d, uid, id) = running_pod("execdrop", "sleep 3600");
    let t = pod_target(&d, &uid, &id);
    rt().block_on(async {
        let probe = tokio::spawn({
            let t = t.clone();
            async move {
                run_handler(&t, &exec(&["sleep", "102"]), Some(Duration::from_secs(600))).await
            }
        });
        let seen = tokio::task::spawn_blocking(|| {
            wait_until(Duration::from_secs(20), "sleep 102 runs", || {
                (!running("sleep 102").is_empty()).then_some(())
            })
        });
        assert!(seen.await.unwrap().is_some(), "the exec never started");
        probe.abort();
    });
    let gone = wait_until(Duration::from_secs(20), "sleep 102 gone", || {
        running("sleep 102").is_empty().then_some(())
    });
    assert!(
        gone.is_some(),
        "an aborted exec probe left its command running"
    );
}

#[test]
fn a_pods_probes_run_in_its_network_namespace() {
    let (d, uid, id) = running_pod("netprobe", "exec httpd -f -p 18081");
    let t = pod_target(&d, &uid, &id);
    let tcp = |t: &HandlerTarget| {
        rt().block_on(run_handler(
            t,
            &ProbeAction::Tcp {
                host: None,
                port: 18081,
            },
            SECOND,
        ))
    };
    // The listener starts a moment after the container: wait for it through the probe.
    let up = wait_until(Duration::from_secs(20), "pod port open", || {
        (tcp(&t) == Outcome::Success).then_some(())
    });
    assert!(up.is_some(), "the pod's port never answered its probe");
    let on_host = TcpListener::bind("127.0.0.1:18081");
    assert!(
        on_host.is_ok(),
        "the pod's port is bound on the host's loopback"
    );
    drop(on_host);
    assert!(
        matches!(tcp(&target(PodNetwork::Host, &id)), Outcome::Failure(_)),
        "the host's loopback has no listener on 18081"
    );
}
