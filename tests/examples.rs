//! The real-world manifests of examples/real/ run unchanged on real server software:
//! kubeadm's etcd static pod keeps its data on its hostPath across an edit of its
//! manifest (what a kubeadm upgrade does), and the nginx web pod serves the page its
//! init container wrote into an emptyDir. The images are Debian's packages packed by
//! scripts/build-debian-image.sh (cached under the target dir: built once per machine).

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;

use common::*;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The OCI layout of the image `name` of oci/debian/images, built by
/// scripts/build-debian-image.sh (instant when its cache is current). Builds one at a
/// time: each is a whole mmdebstrap run on a 2-core machine.
fn debian_image(name: &str) -> PathBuf {
    static BUILDING: Mutex<()> = Mutex::new(());
    let list = std::fs::read_to_string(repo().join("oci/debian/images")).unwrap();
    let packages: Vec<&str> = list
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|words| words.first() == Some(&name))
        .unwrap_or_else(|| panic!("oci/debian/images lists no image {name}"))[1..]
        .to_vec();
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("debian-images")
        .join(name);
    let _one_at_a_time = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    let run = Command::new("bash")
        .arg(repo().join("scripts/build-debian-image.sh"))
        .arg(&out)
        .arg(name)
        .args(&packages)
        .output()
        .expect("run scripts/build-debian-image.sh");
    assert!(
        run.status.success(),
        "scripts/build-debian-image.sh {name} failed:\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    out
}

/// An example manifest as parsed YAML.
fn example(file: &str) -> Value {
    let text = std::fs::read_to_string(repo().join("examples/real").join(file)).unwrap();
    serde_yaml_ng::from_str(&text).unwrap()
}

fn to_yaml(pod: &Value) -> String {
    serde_yaml_ng::to_string(pod).unwrap()
}

/// Three loopback ports free right now (the etcd pod uses the host's network).
fn free_ports() -> [u16; 3] {
    let listeners: Vec<TcpListener> = (0..3)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let ports: Vec<u16> = listeners
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect();
    [ports[0], ports[1], ports[2]]
}

fn condition<'a>(pod: &'a Value, kind: &str) -> &'a str {
    pod["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind))
        .and_then(|c| c["status"].as_str())
        .unwrap_or("")
}

/// A plain HTTP/1.0 GET; (status code, body), or None when nothing answers.
fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let code = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())?;
    Some((code, body))
}

/// `http_get` from inside the network namespace of process `pid` (a pod's own network),
/// in a thread of its own: setns changes only the calling thread's namespace.
fn http_get_in_netns_of(pid: i32, port: u16, path: &str) -> Option<(u16, String)> {
    let ns = std::fs::File::open(format!("/proc/{pid}/ns/net")).unwrap();
    let path = path.to_string();
    std::thread::spawn(move || {
        nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns into the pod");
        http_get(SocketAddr::from(([127, 0, 0, 1], port)), &path)
    })
    .join()
    .unwrap()
}

/// The pid of the running instance of `container` in the pod with `uid`.
fn container_pid(d: &TestDaemon, uid: &str, container: &str) -> i32 {
    let dir = d
        .root
        .join("pods")
        .join(uid)
        .join("containers")
        .join(container);
    let mut attempts: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|a| a.join("started.json").exists() && !a.join("exit.json").exists())
        .collect();
    assert_eq!(
        attempts.len(),
        1,
        "one running attempt of {container}: {attempts:?}"
    );
    let started: Value =
        serde_json::from_slice(&std::fs::read(attempts.remove(0).join("started.json")).unwrap())
            .unwrap();
    i32::try_from(started["init_pid"].as_i64().unwrap()).unwrap()
}

/// Every `upper` dir (a container's writable layer) under the daemon's root that holds
/// `rel`: where data lands when a volume is not mounted.
fn uppers_holding(root: &Path, rel: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![root.join("pods")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if entry.file_name() == "upper" {
                if path.join(rel).exists() {
                    found.push(path);
                }
            } else {
                stack.push(path);
            }
        }
    }
    found
}

/// kubeadm's etcd manifest with its ports moved to `ports` (client, peer, metrics) and
/// its data hostPath at `data`; `edit` marks the version (an annotation and a flag, as a
/// kubeadm upgrade changes them).
fn etcd_manifest(ports: [u16; 3], data: &Path, edit: u32) -> String {
    let mut pod = example("etcd.yaml");
    let moved = |s: &str| {
        s.replace(":2379", &format!(":{}", ports[0]))
            .replace(":2380", &format!(":{}", ports[1]))
            .replace(":2381", &format!(":{}", ports[2]))
    };
    let annotations = pod["metadata"]["annotations"].as_object_mut().unwrap();
    for v in annotations.values_mut() {
        *v = moved(v.as_str().unwrap()).into();
    }
    annotations.insert("example.podhost/edit".into(), edit.to_string().into());
    let etcd = &mut pod["spec"]["containers"][0];
    for arg in etcd["command"].as_array_mut().unwrap() {
        let mut s = moved(arg.as_str().unwrap());
        if s.starts_with("--snapshot-count=") {
            s = format!("--snapshot-count={}", 10000 - edit);
        }
        *arg = s.into();
    }
    for probe in ["livenessProbe", "startupProbe"] {
        assert_eq!(
            etcd[probe]["httpGet"]["port"], 2381,
            "{probe} uses the metrics port"
        );
        etcd[probe]["httpGet"]["port"] = ports[2].into();
    }
    let volumes = pod["spec"]["volumes"].as_array_mut().unwrap();
    let etcd_data = volumes
        .iter_mut()
        .find(|v| v["name"] == "etcd-data")
        .expect("the etcd-data volume");
    assert_eq!(etcd_data["hostPath"]["path"], "/var/lib/etcd");
    etcd_data["hostPath"]["path"] = data.display().to_string().into();
    to_yaml(&pod)
}

fn etcdctl(d: &TestDaemon, client_port: u16, args: &[&str]) -> String {
    let pod = d.full_name("etcd");
    let endpoints = format!("--endpoints=http://127.0.0.1:{client_port}");
    let mut argv = vec!["exec", &pod, "-c", "etcd", "--", "etcdctl", &endpoints];
    argv.extend_from_slice(args);
    let out = d.cli(&argv);
    assert!(
        out.status.success(),
        "etcdctl {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Waits until the pod `name` (a UID other than `not_uid`) is Ready; returns it.
fn wait_ready(d: &TestDaemon, name: &str, not_uid: &str, secs: u64) -> Value {
    d.wait_pod(name, &format!("{name} Ready"), secs, |p| {
        (p["metadata"]["uid"] != not_uid && condition(p, "Ready") == "True").then(|| p.clone())
    })
}

#[test]
fn kubeadm_etcd_keeps_its_data_on_the_host_path_across_a_manifest_edit() {
    require_root();
    let layout = debian_image("etcd");
    // etcd uses the host's network, and the test talks to it there.
    let d = TestDaemon::start_on_machine_network(&[]);
    d.load(&layout);
    let ports = free_ports();
    // A path that does not exist yet: DirectoryOrCreate makes it, as on a fresh node.
    let data = d.dir.path().join("host/var/lib/etcd");
    let metrics = SocketAddr::from(([127, 0, 0, 1], ports[2]));

    d.write_manifest("etcd.yaml", &etcd_manifest(ports, &data, 0));
    let first = wait_ready(&d, "etcd", "", 120);
    let first_uid = first["metadata"]["uid"].as_str().unwrap().to_string();
    // Ready follows the startupProbe: etcd answers its health check by then.
    let status = container_status(&first, "etcd").unwrap();
    assert_eq!(status["started"], true, "{status}");
    let health = http_get(metrics, "/health?serializable=false");
    assert!(
        health
            .as_ref()
            .is_some_and(|(code, body)| *code == 200 && body.contains("true")),
        "Ready, but etcd's /health answers {health:?}"
    );

    assert_eq!(
        etcdctl(&d, ports[0], &["put", "podhost/example", "kept"]),
        "OK"
    );
    assert!(
        data.join("member/wal").is_dir() && data.join("member/snap/db").is_file(),
        "etcd's data is not on its hostPath {}: {:?}",
        data.display(),
        std::fs::read_dir(&data).map(|r| r.flatten().map(|e| e.path()).collect::<Vec<_>>())
    );
    let in_overlay = uppers_holding(&d.root, "var/lib/etcd/member");
    assert!(
        in_overlay.is_empty(),
        "etcd wrote into its overlay: {in_overlay:?}"
    );

    // The upgrade: a changed flag and annotation give a new pod on the same data.
    d.write_manifest("etcd.yaml", &etcd_manifest(ports, &data, 1));
    let second = wait_ready(&d, "etcd", &first_uid, 180);
    assert_ne!(second["metadata"]["uid"], first_uid.as_str());
    assert_eq!(
        etcdctl(
            &d,
            ports[0],
            &["get", "podhost/example", "--print-value-only"]
        ),
        "kept",
        "the key written before the edit is gone: etcd started on an empty data dir"
    );
    let in_overlay = uppers_holding(&d.root, "var/lib/etcd/member");
    assert!(
        in_overlay.is_empty(),
        "etcd wrote into its overlay: {in_overlay:?}"
    );

    d.remove_manifest("etcd.yaml");
    d.wait_gone("etcd", 60);
    assert!(
        data.join("member/snap/db").is_file(),
        "removing the pod removed its hostPath data"
    );
}

#[test]
fn nginx_serves_the_page_its_init_container_wrote_into_an_empty_dir() {
    require_root();
    let layout = debian_image("nginx");
    let d = TestDaemon::start();
    d.load(&layout);
    // Unchanged, as a user copies it.
    let manifest = std::fs::read_to_string(repo().join("examples/real/web.yaml")).unwrap();
    d.write_manifest("web.yaml", &manifest);

    let pod = wait_ready(&d, "web", "", 120);
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
    let init = pod["status"]["initContainerStatuses"]
        .as_array()
        .and_then(|s| s.iter().find(|c| c["name"] == "render-page"))
        .unwrap_or_else(|| panic!("no status of the init container: {}", pod["status"]));
    assert_eq!(init["state"]["terminated"]["reason"], "Completed", "{init}");
    assert_eq!(init["state"]["terminated"]["exitCode"], 0, "{init}");
    assert_eq!(condition(&pod, "Initialized"), "True");
    assert_eq!(container_status(&pod, "nginx").unwrap()["ready"], true);

    // From inside the pod's network, as a client in the pod would ask.
    let pid = container_pid(&d, &uid, "nginx");
    let page = http_get_in_netns_of(pid, 80, "/");
    assert_eq!(
        page,
        Some((
            200,
            "<h1>Hello from podhost</h1><p>written by the init container</p>\n".to_string()
        )),
        "nginx does not serve the init container's page; nginx logs:\n{}",
        d.logs_of("web", "nginx")
    );

    d.remove_manifest("web.yaml");
    d.wait_gone("web", 60);
    let left: Vec<String> = d
        .mounts()
        .into_iter()
        .filter(|m| m.contains(&uid))
        .collect();
    assert!(left.is_empty(), "the pod's mounts outlive it: {left:?}");
}
