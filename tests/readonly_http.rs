//! The read-only HTTP endpoint (`--read-only-port`/`--address`) of a real daemon:
//! `/healthz`, `/pods` as a `v1.PodList`, `/metrics` as Prometheus text whose counters
//! move as pods start, restart, are probed and pull images; debug paths and writes
//! refused; nothing listening without `--read-only-port` (`--address` alone included);
//! a warning when the endpoint is not on loopback; a really stuck status writer makes
//! `/healthz` fail with its name.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::common_registry;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use common::{KillOnDrop, TestDaemon, container_status, phase, wait_until};
use k8s_openapi::List;
use k8s_openapi::api::core::v1::Pod;

/// One HTTP exchange's answer.
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: String,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// Sends one HTTP/1.1 request on a fresh connection (in the daemon's network).
fn request(d: &TestDaemon, addr: SocketAddr, method: &str, path: &str, extra: &str) -> Reply {
    let exchange = move || {
        let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{extra}Content-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).unwrap();
        String::from_utf8(raw).expect("a UTF-8 answer")
    };
    let raw = match &d.netns {
        Some(ns) => ns.run(exchange),
        None => exchange(),
    };
    let (head, body) = raw.split_once("\r\n\r\n").expect("a complete HTTP answer");
    let (status_line, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    Reply {
        status,
        headers: headers.to_string(),
        body: body.to_string(),
    }
}

fn get(d: &TestDaemon, addr: SocketAddr, path: &str) -> Reply {
    request(d, addr, "GET", path, "")
}

/// A port nothing listens on, in the daemon's network.
fn port_for(d: &TestDaemon) -> u16 {
    let pick = || {
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    };
    match &d.netns {
        Some(ns) => ns.run(pick),
        None => pick(),
    }
}

/// Starts a daemon with the endpoint on 127.0.0.1 and a free port.
fn daemon_with_endpoint(machine_network: bool, extra: &[&str]) -> (TestDaemon, SocketAddr) {
    let mut d = if machine_network {
        TestDaemon::prepare_on_machine_network(extra)
    } else {
        TestDaemon::prepare_with(extra)
    };
    let port = port_for(&d);
    d.extra_args.push(format!("--read-only-port={port}"));
    d.spawn_daemon();
    (d, SocketAddr::from(([127, 0, 0, 1], port)))
}

/// A Prometheus text exposition (format 0.0.4), checked line by line: every sample
/// belongs to a family declared by `# TYPE`, and has a name, labels and a number.
/// Returns the samples as `name{labels}` → value.
fn parse_prometheus_text(text: &str) -> BTreeMap<String, f64> {
    let mut families = BTreeMap::new();
    let mut samples = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
            assert!(
                ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                "unknown type in {line:?}"
            );
            families.insert(name.to_string(), kind.to_string());
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        assert!(!line.starts_with('#'), "not a 0.0.4 comment: {line:?}");
        let (series, value) = line.rsplit_once(' ').expect("a sample: series value");
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("bad value in {line:?}"));
        let name = series.split('{').next().unwrap();
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "bad metric name in {line:?}"
        );
        if let Some(labels) = series.strip_prefix(name) {
            assert!(
                labels.is_empty() || (labels.starts_with('{') && labels.ends_with('}')),
                "bad labels in {line:?}"
            );
        }
        let family = families.keys().find(|f| {
            name == f.as_str()
                || ["_bucket", "_sum", "_count"]
                    .iter()
                    .any(|s| name.strip_suffix(s) == Some(f.as_str()))
        });
        assert!(family.is_some(), "sample without a # TYPE: {line:?}");
        samples.insert(series.to_string(), value);
    }
    samples
}

/// The value of the one sample named `name` whose labels include all of `labels`.
fn sample(samples: &BTreeMap<String, f64>, name: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<f64> = samples
        .iter()
        .filter(|(series, _)| {
            series.split('{').next() == Some(name)
                && labels
                    .iter()
                    .all(|(k, v)| series.contains(&format!("{k}=\"{v}\"")))
        })
        .map(|(_, v)| *v)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "expected one {name} sample with {labels:?}, got {found:?}; all: {samples:#?}"
    );
    found[0]
}

fn metrics(d: &TestDaemon, addr: SocketAddr) -> BTreeMap<String, f64> {
    let reply = get(d, addr, "/metrics");
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(
        reply.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    parse_prometheus_text(&reply.body)
}

const POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: localhost/busybox:latest
    imagePullPolicy: Never
    command: [sh, -c, 'sleep 100']
    readinessProbe:
      exec:
        command: ['true']
      periodSeconds: 1
  - name: crash
    image: localhost/busybox:latest
    imagePullPolicy: Never
    command: [sh, -c, 'sleep 1; exit 3']
";

#[test]
fn the_endpoint_serves_health_pods_and_metrics_that_move() {
    common::require_root();
    let (d, addr) = daemon_with_endpoint(false, &[]);
    let health = get(&d, addr, "/healthz");
    assert_eq!(
        (health.status, health.body.as_str()),
        (200, "ok"),
        "{health:?}"
    );

    d.write_manifest("web.yaml", POD);
    let name = d.full_name("web");
    d.wait_pod("web", "web Running, app ready, crash restarted", 60, |p| {
        let restarted =
            container_status(p, "crash").is_some_and(|c| c["restartCount"].as_u64() >= Some(1));
        let ready = container_status(p, "app").is_some_and(|c| c["ready"] == true);
        (phase(p) == "Running" && restarted && ready).then_some(())
    });

    let pods = get(&d, addr, "/pods");
    assert_eq!(pods.status, 200, "{pods:?}");
    assert_eq!(pods.header("content-type"), Some("application/json"));
    let raw: serde_json::Value = serde_json::from_str(&pods.body).unwrap();
    assert_eq!(raw["kind"], "PodList");
    assert_eq!(raw["apiVersion"], "v1");
    let list: List<Pod> = serde_json::from_str(&pods.body).expect("a v1.PodList");
    let names: Vec<_> = list
        .items
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    assert_eq!(names, std::slice::from_ref(&name));
    assert_eq!(
        list.items[0]
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref()),
        Some("Running")
    );

    let m = metrics(&d, addr);
    let ours = [("namespace", "default"), ("pod", name.as_str())];
    let started = sample(
        &m,
        "kubelet_started_containers_total",
        &[("container_type", "container")],
    );
    assert!(started >= 3.0, "app once, crash at least twice: {started}");
    let restarts = sample(
        &m,
        "podhost_container_restarts_total",
        &[ours[0], ours[1], ("container", "crash")],
    );
    assert!(restarts >= 1.0, "{restarts}");
    let probes = sample(
        &m,
        "prober_probe_total",
        &[
            ours[0],
            ours[1],
            ("container", "app"),
            ("probe_type", "Readiness"),
            ("result", "successful"),
        ],
    );
    assert!(probes >= 1.0, "{probes}");
    assert_eq!(
        sample(&m, "kubelet_pod_start_duration_seconds_count", &[]),
        1.0
    );
    assert_eq!(sample(&m, "kubelet_running_pods", &[]), 1.0);
    assert_eq!(sample(&m, "podhost_pods", &[("phase", "Running")]), 1.0);
    assert_eq!(sample(&m, "podhost_pods", &[("phase", "Failed")]), 0.0);
    assert!(
        sample(
            &m,
            "kubelet_running_containers",
            &[("container_state", "running")]
        ) >= 1.0
    );

    // The counters keep moving: the crashing container restarts, the probe runs.
    wait_until(Duration::from_secs(30), "the counters to move", || {
        let later = metrics(&d, addr);
        let more_restarts = sample(
            &later,
            "podhost_container_restarts_total",
            &[ours[0], ours[1], ("container", "crash")],
        ) > restarts;
        let more_probes = sample(
            &later,
            "prober_probe_total",
            &[
                ours[0],
                ours[1],
                ("container", "app"),
                ("probe_type", "Readiness"),
            ],
        ) > probes;
        (more_restarts && more_probes).then_some(())
    })
    .expect("restarts and probe runs counted after the first scrape");

    let om = request(
        &d,
        addr,
        "GET",
        "/metrics",
        "Accept: application/openmetrics-text; version=1.0.0\r\n",
    );
    assert_eq!(om.status, 200);
    assert!(
        om.header("content-type")
            .is_some_and(|t| t.starts_with("application/openmetrics-text")),
        "{om:?}"
    );
    assert!(om.body.ends_with("# EOF\n"));

    let head = request(&d, addr, "HEAD", "/healthz", "");
    assert_eq!((head.status, head.body.as_str()), (200, ""), "{head:?}");
}

#[test]
fn debug_paths_writes_and_unknown_paths_are_refused() {
    common::require_root();
    let (d, addr) = daemon_with_endpoint(false, &[]);
    let log = d.daemon_log();
    assert!(
        !log.contains(NOT_LOOPBACK),
        "on 127.0.0.1, no warning:\n{log}"
    );
    for path in [
        "/exec/default/web/app?command=ls",
        "/run/default/web/app",
        "/attach/default/web/app",
        "/portForward/default/web",
        "/containerLogs/default/web/app",
        "/runningpods/",
        "/logs/",
        "/debug/pprof/",
    ] {
        let reply = get(&d, addr, path);
        assert_eq!(
            (reply.status, reply.body.as_str()),
            (405, "Debug endpoints are disabled.\n"),
            "{path}"
        );
    }
    for (method, path) in [
        ("POST", "/pods"),
        ("PUT", "/metrics"),
        ("DELETE", "/healthz"),
    ] {
        let reply = request(&d, addr, method, path, "");
        assert_eq!(reply.status, 405, "{method} {path}: {reply:?}");
        assert_eq!(reply.header("allow"), Some("GET, HEAD"));
    }
    assert_eq!(get(&d, addr, "/images").status, 404);
    assert_eq!(get(&d, addr, "/pods/web/log").status, 404);
    // The statistics are served here too, from the same collector as the unix API.
    let stats = get(&d, addr, "/stats/summary");
    assert_eq!(stats.status, 200, "{stats:?}");
    let summary: serde_json::Value = serde_json::from_str(&stats.body).unwrap();
    assert_eq!(summary["node"]["nodeName"], d.node.as_str(), "{summary}");
    let cadvisor = get(&d, addr, "/metrics/cadvisor");
    assert_eq!(cadvisor.status, 200, "{cadvisor:?}");
    assert_eq!(get(&d, addr, "/stats/container").status, 404);
}

/// What the daemon logs when the endpoint reaches beyond this host.
const NOT_LOOPBACK: &str = "the read-only HTTP endpoint is not on a loopback address: it \
                            serves every pod's spec (env values included)";

#[test]
fn nothing_listens_without_the_port_not_even_with_address() {
    common::require_root();
    // No flag, then --address alone (the kubelet API's address in cluster mode): the
    // kubelet's read-only port stays closed either way.
    for extra in [&[][..], &["--address=127.0.0.1"][..]] {
        let d = TestDaemon::start_with(extra);
        let port_10255 = SocketAddr::from(([127, 0, 0, 1], 10255));
        let connect = move || TcpStream::connect(port_10255).map(|_| ());
        let refused = match &d.netns {
            Some(ns) => ns.run(connect),
            None => connect(),
        };
        assert_eq!(
            refused.map_err(|e| e.kind()),
            Err(std::io::ErrorKind::ConnectionRefused),
            "with {extra:?}"
        );
    }
}

#[test]
fn an_endpoint_on_every_address_serves_and_is_warned_about() {
    common::require_root();
    // 0.0.0.0 in the daemon's own network namespace (or, under the shared-network
    // setting, on a throwaway VM): every address, loopback included.
    let (d, addr) = daemon_with_endpoint(false, &["--address=0.0.0.0"]);
    let reply = get(&d, addr, "/healthz");
    assert_eq!((reply.status, reply.body.as_str()), (200, "ok"));
    // Logged right after the bind, which the answer above may have overtaken.
    let warning = wait_until(Duration::from_secs(5), "the warning about 0.0.0.0", || {
        d.daemon_log()
            .lines()
            .find(|l| l.contains(NOT_LOOPBACK))
            .map(String::from)
    })
    .unwrap_or_else(|| panic!("no warning about 0.0.0.0:\n{}", d.daemon_log()));
    assert!(warning.contains("WARN"), "{warning}");
    assert!(
        warning.contains(&format!("0.0.0.0:{}", addr.port())),
        "{warning}"
    );
}

#[test]
fn a_taken_port_fails_the_start_and_names_the_flag() {
    common::require_root();
    let mut d = TestDaemon::prepare_with(&[]);
    let take = || TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = match &d.netns {
        Some(ns) => ns.run(take),
        None => take(),
    };
    let port = taken.local_addr().unwrap().port();
    d.extra_args.push(format!("--read-only-port={port}"));
    d.spawn_daemon_with_env(&[]);
    let status = d.wait_daemon_exit(Duration::from_secs(30));
    assert!(!status.success());
    let log = d.daemon_log();
    assert!(
        log.contains(&format!(
            "--read-only-port/--address: cannot listen on 127.0.0.1:{port}"
        )),
        "{log}"
    );
    drop(taken);
}

#[test]
fn an_image_pull_moves_the_pull_metrics() {
    common::require_root();
    let registry = common_registry::Registry::start();
    // A layer the daemon's store does not have yet (busybox's own is loaded).
    let layout = tempfile::tempdir().unwrap();
    common_registry::busybox_plus_big_layer(layout.path(), 1);
    registry.push(layout.path(), "localhost/busybox:big", "busybox:big", &[]);
    // The registry listens on the machine's loopback.
    let (d, addr) = daemon_with_endpoint(true, &["--insecure-registry", &registry.addr]);
    let before = metrics(&d, addr);
    assert!(
        !before
            .keys()
            .any(|k| k.starts_with("kubelet_image_pull_duration_seconds_count")),
        "{before:#?}"
    );
    let image = format!("{}/busybox:big", registry.addr);
    d.write_manifest(
        "pulled.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: pulled\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {image}\n    imagePullPolicy: Always\n    command: [sleep, '100']\n"
        ),
    );
    d.wait_pod("pulled", "pulled Running", 60, |p| {
        (phase(p) == "Running").then_some(())
    });
    let m = metrics(&d, addr);
    let pulls = sample(
        &m,
        "kubelet_image_pull_duration_seconds_count",
        &[("image_size_in_bytes", "0-10MB")],
    );
    assert_eq!(pulls, 1.0);
    let bytes = sample(&m, "podhost_image_pulled_bytes_total", &[]);
    assert!(
        (1_048_576.0..1_200_000.0).contains(&bytes),
        "the new 1 MiB layer, and only it, was downloaded: {bytes}"
    );
}

/// The status writer really blocks: every temp file name its next writes of the pod's
/// status can use is a FIFO nobody reads, so opening it for writing never returns.
/// After its busy limit (60 s), `/healthz` fails naming it.
#[test]
fn a_blocked_status_writer_fails_healthz_with_its_name() {
    common::require_root();
    let (d, addr) = daemon_with_endpoint(false, &[]);
    let pid = d.daemon_pid().expect("a daemon");
    let _kill = KillOnDrop(i32::try_from(pid).unwrap());
    d.write_manifest(
        "crash.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: crash\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: localhost/busybox:latest\n    imagePullPolicy: Never\n    command: [sh, -c, 'sleep 1; exit 1']\n",
    );
    let pod = d.wait_pod("crash", "crash Running", 60, |p| {
        (phase(p) == "Running").then(|| p.clone())
    });
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
    let pod_dir = d.root.join("pods").join(&uid);
    // The temp names are `.status.json.tmp.<pid>.<seq>`, seq counting every atomic
    // write of the daemon so far: far fewer than this many.
    for seq in 0..20_000 {
        let fifo = pod_dir.join(format!(".status.json.tmp.{pid}.{seq}"));
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    }
    // The container keeps crashing: its status changes, the writer takes it up and
    // blocks. Healthy until the limit passes, then stuck.
    let reply = wait_until(Duration::from_secs(150), "/healthz to fail", || {
        let reply = get(&d, addr, "/healthz");
        (reply.status != 200).then_some(reply)
    })
    .unwrap();
    assert_eq!(reply.status, 500, "{reply:?}");
    assert!(
        reply
            .body
            .lines()
            .any(|l| l.starts_with("status writer: stuck, no progress for ")
                && l.ends_with("(busy with one task for longer than 60s)")),
        "{reply:?}"
    );
    // The rest of the daemon still answers.
    assert_eq!(get(&d, addr, "/metrics").status, 200);
}
