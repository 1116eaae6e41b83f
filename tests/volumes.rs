//! Pod volumes with the real daemon, real mounts and real containers: emptyDir shared
//! by two containers, a Memory emptyDir's tmpfs, hostPath data that outlives an edited
//! manifest, each hostPath type check, readOnly, subPath/subPathExpr, a symlink escape
//! refused, and nothing left mounted after the pod goes (also after a daemon kill -9).

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use serde_json::{Value, json};

fn container(name: &str, script: &str, mounts: Value) -> Value {
    json!({
        "name": name,
        "image": "localhost/busybox:latest",
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", script],
        "volumeMounts": mounts,
    })
}

fn manifest(name: &str, volumes: Value, containers: Vec<Value>) -> String {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"terminationGracePeriodSeconds": 2, "volumes": volumes, "containers": containers},
    })
    .to_string()
}

fn uid(pod: &Value) -> String {
    pod["metadata"]["uid"].as_str().unwrap().to_string()
}

/// The container's log messages so far.
fn log_of(d: &TestDaemon, pod: &Value, c: &str) -> Vec<String> {
    let name = pod["metadata"]["name"].as_str().unwrap();
    let path = d
        .logs
        .join(format!("default_{name}_{}/{c}/0.log", uid(pod)));
    log_lines(&path).into_iter().map(|l| l.2).collect()
}

fn wait_log(d: &TestDaemon, pod: &Value, c: &str, line: &str) -> Vec<String> {
    wait_until(Duration::from_secs(20), line, || {
        let lines = log_of(d, pod, c);
        lines.iter().any(|l| l == line).then_some(lines)
    })
    .unwrap_or_else(|| {
        panic!(
            "no {line:?} from {c}: {:?}\ndaemon log:\n{}",
            log_of(d, pod, c),
            d.daemon_log()
        )
    })
}

fn running(d: &TestDaemon, name: &str) -> Value {
    d.wait_pod(name, "Running", 30, |p| {
        (phase(p) == "Running").then(|| p.clone())
    })
}

/// Mount points under the daemon's root dir (real mountinfo).
fn mounts_under_root(d: &TestDaemon) -> Vec<String> {
    let root = std::fs::canonicalize(&d.root).unwrap();
    d.mounts()
        .into_iter()
        .filter(|m| Path::new(m).starts_with(&root))
        .collect()
}

/// The tmpfs line of mountinfo at `point`, if one is mounted there.
fn tmpfs_at(point: &Path) -> Option<String> {
    let point = std::fs::canonicalize(point).ok()?;
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .find(|l| l.split(' ').nth(4) == Some(point.to_str().unwrap()) && l.contains(" - tmpfs "))
        .map(str::to_string)
}

/// Nothing of pod `uid` is mounted any more and its volumes dir is gone.
fn assert_released(d: &TestDaemon, uid: &str) {
    let pod_dir = std::fs::canonicalize(&d.root)
        .unwrap()
        .join("pods")
        .join(uid);
    let left: Vec<String> = mounts_under_root(d)
        .into_iter()
        .filter(|m| Path::new(m).starts_with(&pod_dir))
        .collect();
    assert!(left.is_empty(), "still mounted under the pod dir: {left:?}");
    let volumes = d.root.join("pods").join(uid).join("volumes");
    assert!(!volumes.exists(), "{} is still there", volumes.display());
}

#[test]
fn empty_dirs_shared_memory_tmpfs_read_only_and_released() {
    require_root();
    let d = TestDaemon::start();
    let volumes = json!([
        {"name": "shared", "emptyDir": {}},
        {"name": "mem", "emptyDir": {"medium": "Memory", "sizeLimit": "8Mi"}},
    ]);
    let writer = container(
        "writer",
        "echo hello > /data/msg && echo tmp > /mem/file && echo written; sleep 3600",
        json!([
            {"name": "shared", "mountPath": "/data"},
            {"name": "mem", "mountPath": "/mem"},
        ]),
    );
    let reader = container(
        "reader",
        "while [ ! -f /in/msg ]; do sleep 0.1; done; echo \"read $(cat /in/msg)\"; \
         touch /in/other 2>/dev/null && echo ro-broken || echo ro-refused; \
         grep ' /mem ' /proc/mounts; sleep 3600",
        json!([
            {"name": "shared", "mountPath": "/in", "readOnly": true},
            {"name": "mem", "mountPath": "/mem"},
        ]),
    );
    d.write_manifest("ed.yaml", &manifest("ed", volumes, vec![writer, reader]));
    let pod = running(&d, "ed");
    wait_log(&d, &pod, "writer", "written");
    let lines = wait_log(&d, &pod, "reader", "read hello");
    wait_log(&d, &pod, "reader", "ro-refused");
    let mem_line = wait_until(Duration::from_secs(5), "mem line", || {
        log_of(&d, &pod, "reader")
            .into_iter()
            .find(|l| l.starts_with("tmpfs /mem tmpfs"))
    })
    .unwrap_or_else(|| panic!("no tmpfs at /mem in the container: {lines:?}"));
    assert!(mem_line.contains("size=8192k"), "{mem_line}");
    assert!(
        mem_line.contains("nosuid") && mem_line.contains("nodev"),
        "{mem_line}"
    );

    let vols = d.root.join("pods").join(uid(&pod)).join("volumes");
    assert_eq!(
        std::fs::read_to_string(vols.join("empty-dir/shared/msg")).unwrap(),
        "hello\n"
    );
    let host_tmpfs = tmpfs_at(&vols.join("empty-dir/mem")).expect("a tmpfs on the host");
    assert!(host_tmpfs.contains("size=8192k"), "{host_tmpfs}");
    assert!(tmpfs_at(&vols.join("empty-dir/shared")).is_none());

    d.remove_manifest("ed.yaml");
    d.wait_gone("ed", 30);
    assert_released(&d, &uid(&pod));
    assert_eq!(mounts_under_root(&d), Vec::<String>::new());
}

#[test]
fn host_path_data_survives_an_edited_manifest_with_sub_paths() {
    require_root();
    let d = TestDaemon::start();
    let host = d.dir.path().join("host/etcd");
    assert!(!host.exists());
    let volumes = json!([
        {"name": "etcd-data", "hostPath": {"path": host, "type": "DirectoryOrCreate"}},
    ]);
    let pod_with = |version: &str| {
        let mut c = container(
            "etcd",
            &format!(
                "echo {version} >> /var/lib/etcd/member && echo {version} > /sub/f && \
                 echo {version} > /expr/f && echo done-{version}; sleep 3600"
            ),
            json!([
                {"name": "etcd-data", "mountPath": "/var/lib/etcd"},
                {"name": "etcd-data", "mountPath": "/sub", "subPath": "fixed/dir"},
                {"name": "etcd-data", "mountPath": "/expr", "subPathExpr": "by-pod/$(POD_NAME)"},
            ]),
        );
        c["env"] = json!([{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]);
        manifest("etcd", volumes.clone(), vec![c])
    };
    d.write_manifest("etcd.yaml", &pod_with("v1"));
    let first = running(&d, "etcd");
    wait_log(&d, &first, "etcd", "done-v1");
    assert!(host.is_dir(), "DirectoryOrCreate made the directory");
    assert_eq!(
        std::fs::read_to_string(host.join("member")).unwrap(),
        "v1\n"
    );
    assert_eq!(
        std::fs::read_to_string(host.join("fixed/dir/f")).unwrap(),
        "v1\n"
    );
    let full = d.full_name("etcd");
    assert_eq!(
        std::fs::read_to_string(host.join("by-pod").join(&full).join("f")).unwrap(),
        "v1\n"
    );

    // What every kubeadm upgrade does: an edited manifest, a new pod.
    d.write_manifest("etcd.yaml", &pod_with("v2"));
    let second = d.wait_pod("etcd", "new pod running", 40, |p| {
        (uid(p) != uid(&first) && phase(p) == "Running").then(|| p.clone())
    });
    wait_log(&d, &second, "etcd", "done-v2");
    assert_eq!(
        std::fs::read_to_string(host.join("member")).unwrap(),
        "v1\nv2\n",
        "the data of the first pod is still there"
    );
    assert_released(&d, &uid(&first));

    d.remove_manifest("etcd.yaml");
    d.wait_gone("etcd", 30);
    assert_released(&d, &uid(&second));
    assert_eq!(mounts_under_root(&d), Vec::<String>::new());
    // Nothing inside a hostPath is ever deleted.
    assert_eq!(
        std::fs::read_to_string(host.join("fixed/dir/f")).unwrap(),
        "v2\n"
    );
}

/// Each hostPath type that does not match is the container's CreateContainerConfigError
/// with the kubelet's message.
#[test]
fn host_path_type_checks_are_config_errors() {
    require_root();
    let d = TestDaemon::start();
    let base = d.dir.path().join("hp");
    std::fs::create_dir_all(base.join("dir")).unwrap();
    std::fs::write(base.join("file"), b"x").unwrap();
    let cases: [(&str, PathBuf, &str); 8] = [
        ("Directory", base.join("file"), "is not a directory"),
        ("DirectoryOrCreate", base.join("file"), "is not a directory"),
        ("File", base.join("dir"), "is not a file"),
        ("FileOrCreate", base.join("dir"), "is not a file"),
        ("Socket", base.join("file"), "is not a socket file"),
        ("CharDevice", base.join("file"), "is not a character device"),
        ("BlockDevice", base.join("file"), "is not a block device"),
        (
            "FileOrCreate",
            base.join("missing/parent"),
            "No such file or directory",
        ),
    ];
    let mut volumes = Vec::new();
    let mut containers = Vec::new();
    for (i, (typ, path, _)) in cases.iter().enumerate() {
        volumes.push(json!({"name": format!("v{i}"), "hostPath": {"path": path, "type": typ}}));
        containers.push(container(
            &format!("c{i}"),
            "sleep 3600",
            json!([{"name": format!("v{i}"), "mountPath": "/v"}]),
        ));
    }
    d.write_manifest("types.yaml", &manifest("types", json!(volumes), containers));
    let pod = d.wait_pod("types", "every container blocked", 30, |p| {
        let all = (0..cases.len()).all(|i| {
            container_status(p, &format!("c{i}"))
                .is_some_and(|s| s["state"]["waiting"]["reason"] == "CreateContainerConfigError")
        });
        all.then(|| p.clone())
    });
    for (i, (typ, path, what)) in cases.iter().enumerate() {
        let s = container_status(&pod, &format!("c{i}")).unwrap();
        let message = s["state"]["waiting"]["message"].as_str().unwrap();
        if what.starts_with("is not") {
            assert_eq!(
                message,
                format!(
                    "hostPath type check failed: {} {what} (volume \"v{i}\")",
                    path.display()
                ),
                "{typ}"
            );
        } else {
            assert!(message.contains(what), "{typ}: {message}");
        }
    }
    assert!(
        !base.join("missing").exists(),
        "FileOrCreate makes no parent"
    );
    d.remove_manifest("types.yaml");
    d.wait_gone("types", 30);
    assert_released(&d, &uid(&pod));
}

#[test]
fn a_sub_path_symlink_out_of_the_volume_is_refused() {
    require_root();
    let d = TestDaemon::start();
    let host = d.dir.path().join("vol");
    std::fs::create_dir_all(&host).unwrap();
    std::os::unix::fs::symlink("/etc", host.join("escape")).unwrap();
    let c = container(
        "main",
        "cat /x/passwd; sleep 3600",
        json!([{"name": "v", "mountPath": "/x", "subPath": "escape"}]),
    );
    d.write_manifest(
        "esc.yaml",
        &manifest(
            "esc",
            json!([{"name": "v", "hostPath": {"path": host, "type": "Directory"}}]),
            vec![c],
        ),
    );
    let pod = d.wait_pod("esc", "blocked", 30, |p| {
        container_status(p, "main")
            .filter(|s| s["state"]["waiting"]["reason"] == "CreateContainerConfigError")
            .map(|_| p.clone())
    });
    let message = container_status(&pod, "main").unwrap()["state"]["waiting"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains(
            "subPath \"escape\" of volume \"v\" (container main) resolves outside the volume"
        ),
        "{message}"
    );
    d.remove_manifest("esc.yaml");
    d.wait_gone("esc", 30);
    assert_released(&d, &uid(&pod));
}

#[test]
fn a_daemon_killed_with_volumes_mounted_releases_them_next_time() {
    require_root();
    let mut d = TestDaemon::start();
    let c = container(
        "main",
        "echo x > /mem/f && echo x > /sub/f && echo ready; sleep 3600",
        json!([
            {"name": "mem", "mountPath": "/mem"},
            {"name": "mem", "mountPath": "/sub", "subPath": "s"},
        ]),
    );
    d.write_manifest(
        "k.yaml",
        &manifest(
            "k",
            json!([{"name": "mem", "emptyDir": {"medium": "Memory"}}]),
            vec![c],
        ),
    );
    let pod = running(&d, "k");
    wait_log(&d, &pod, "main", "ready");
    assert_eq!(
        mounts_under_root(&d)
            .iter()
            .filter(|m| m.contains("/volumes/"))
            .count(),
        2
    );
    d.kill9();
    d.remove_manifest("k.yaml");
    // A pod dir no pod owns any more (no status.json), with a tmpfs still on it.
    let orphan = d.root.join("pods/0rphan/volumes/empty-dir/x");
    std::fs::create_dir_all(&orphan).unwrap();
    nix::mount::mount(
        Some("tmpfs"),
        &orphan,
        Some("tmpfs"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    )
    .unwrap();
    d.spawn_daemon();
    d.wait_gone("k", 40);
    assert_released(&d, &uid(&pod));
    assert!(!d.root.join("pods/0rphan/volumes").exists());
    assert_eq!(mounts_under_root(&d), Vec::<String>::new());
}

#[test]
fn an_empty_dir_over_its_size_limit_gets_the_pod_evicted() {
    require_root();
    let d = TestDaemon::start();
    d.write_manifest(
        "hog.yaml",
        &manifest(
            "hog",
            json!([{"name": "scratch", "emptyDir": {"sizeLimit": "1Mi"}}]),
            vec![container(
                "main",
                "dd if=/dev/zero of=/scratch/fill bs=1M count=4; exec sleep 1000",
                json!([{"name": "scratch", "mountPath": "/scratch"}]),
            )],
        ),
    );
    // The check runs every 10 s, as the kubelet's eviction manager.
    let pod = d.wait_pod("hog", "evicted", 40, |p| {
        (p["status"]["reason"] == "Evicted").then(|| p.clone())
    });
    assert_eq!(phase(&pod), "Failed");
    assert_eq!(
        pod["status"]["message"],
        "Usage of EmptyDir volume \"scratch\" exceeds the limit \"1Mi\"."
    );
    let stopped = d.wait_pod("hog", "container stopped", 30, |p| {
        container_status(p, "main")?["state"]["terminated"]
            .is_object()
            .then(|| p.clone())
    });
    assert_eq!(
        container_status(&stopped, "main").unwrap()["restartCount"],
        0
    );
    let events = d.pod_events("hog");
    assert!(
        events.iter().any(|e| e["reason"] == "Evicted"),
        "{events:?}"
    );
}
