//! A restarted daemon never breaks a running pod's sandbox, whatever set-up step fails
//! on its way back (issue 29): real pods — an emptyDir with fsGroup whose container
//! churns files, a shared PID namespace, a pod-network pod with a hostPort, a configMap
//! volume — survive the daemon killed -9 and restarted while each sandbox step in turn
//! fails (`PODHOST_TEST_SANDBOX_FAULT`, debug builds: the step fails twice per pod,
//! then works; `network-pending` is the cluster-mode wait for the Node's podCIDR).
//! Afterwards every pod has the same container ids, init pids and start times, pause
//! pid, network namespace, veth and addresses, its hostPort answers, restartCount did
//! not move, and a Warning event named the failed step.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{TestDaemon, phase, require_root, static_program_layout, wait_until};
use serde_json::Value;

const IMAGE: &str = "localhost/netcheck:latest";
const HOST_PORT: u16 = 18_471;

fn netcheck_layout() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("netcheck-faults-{}", std::process::id()));
        std::fs::create_dir_all(&work).unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/netcheck.c");
        static_program_layout(&src, &work, IMAGE)
    })
}

const CONFIG: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {greeting: hello}\n";

fn manifests() -> Vec<(&'static str, String)> {
    let head = |name: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 2\n"
        )
    };
    vec![
        (
            "churn",
            head("churn")
                + "  securityContext: {fsGroup: 2345}\n  volumes:\n  - name: data\n    emptyDir: {}\n  containers:\n  - name: main\n    image: localhost/busybox:latest\n    imagePullPolicy: Never\n    volumeMounts: [{name: data, mountPath: /data}]\n    command: [sh, -c, 'i=0; while true; do i=$((i+1)); mkdir -p /data/d$((i%7)); echo $i > /data/d$((i%7))/f$i; rm -rf /data/d$(((i+3)%7)); done']\n",
        ),
        (
            "shared",
            head("shared")
                + "  shareProcessNamespace: true\n  containers:\n  - name: a\n    image: localhost/busybox:latest\n    imagePullPolicy: Never\n    command: [sleep, '3601']\n  - name: b\n    image: localhost/busybox:latest\n    imagePullPolicy: Never\n    command: [sleep, '3602']\n",
        ),
        (
            "web",
            head("web")
                + &format!(
                    "  containers:\n  - name: main\n    image: {IMAGE}\n    imagePullPolicy: Never\n    command: [netcheck, serve, '7000']\n    ports: [{{containerPort: 7000, hostPort: {HOST_PORT}}}]\n"
                ),
        ),
        (
            "cfg",
            head("cfg")
                + "  volumes:\n  - name: conf\n    configMap: {name: app}\n  containers:\n  - name: main\n    image: localhost/busybox:latest\n    imagePullPolicy: Never\n    volumeMounts: [{name: conf, mountPath: /conf}]\n    command: [sh, -c, 'while true; do cat /conf/greeting >/dev/null; sleep 1; done']\n",
        ),
    ]
}

/// What must not change across a daemon restart.
#[derive(Debug, PartialEq, Eq)]
struct PodSnapshot {
    /// Per container: id, restartCount, startedAt, the init's pid.
    containers: BTreeMap<String, (String, i64, String, i64)>,
    pod_ips: Vec<String>,
    /// The network namespace's inode, and the pause pid (shared PID namespace).
    netns_inode: u64,
    pause_pid: Option<String>,
}

fn snapshot(d: &TestDaemon, name: &str) -> PodSnapshot {
    let pod = d.pod(name).unwrap_or_else(|| panic!("pod {name} is gone"));
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
    let pod_dir = d.root.join("pods").join(&uid);
    let mut containers = BTreeMap::new();
    for c in pod["status"]["containerStatuses"].as_array().unwrap() {
        let cname = c["name"].as_str().unwrap().to_string();
        let restarts = c["restartCount"].as_i64().unwrap();
        let started = c["state"]["running"]["startedAt"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}/{cname} is not running: {c}"))
            .to_string();
        let record: Value = serde_json::from_slice(
            &std::fs::read(
                pod_dir
                    .join("containers")
                    .join(&cname)
                    .join(restarts.to_string())
                    .join("started.json"),
            )
            .unwrap(),
        )
        .unwrap();
        let pid = record["init_pid"].as_i64().unwrap();
        assert!(
            Path::new(&format!("/proc/{pid}")).exists(),
            "{name}/{cname}: its init {pid} is gone"
        );
        containers.insert(
            cname,
            (
                c["containerID"].as_str().unwrap().to_string(),
                restarts,
                started,
                pid,
            ),
        );
    }
    let ns = pod_dir.join("ns");
    PodSnapshot {
        containers,
        pod_ips: pod["status"]["podIPs"]
            .as_array()
            .map(|ips| ips.iter().map(|ip| ip["ip"].to_string()).collect())
            .unwrap_or_default(),
        netns_inode: std::fs::metadata(ns.join("net")).unwrap().ino(),
        pause_pid: std::fs::read_to_string(ns.join("pause.pid")).ok(),
    }
}

fn veths(d: &TestDaemon) -> Vec<String> {
    let mut names: Vec<String> = d
        .netns
        .as_ref()
        .unwrap()
        .ip(&["-o", "link", "show", "type", "veth"])
        .lines()
        .filter_map(|l| {
            l.split(": ")
                .nth(1)
                .map(|n| n.split('@').next().unwrap_or(n).to_string())
        })
        .collect();
    names.sort();
    names
}

fn host_port_answers(d: &TestDaemon) -> Result<String, String> {
    let addr: SocketAddr = format!("127.0.0.1:{HOST_PORT}").parse().unwrap();
    d.netns.as_ref().unwrap().run(move || {
        let mut s =
            TcpStream::connect_timeout(&addr, Duration::from_secs(3)).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(b"ping").map_err(|e| e.to_string())?;
        let mut answer = String::new();
        s.read_to_string(&mut answer).map_err(|e| e.to_string())?;
        Ok(answer)
    })
}

/// Whether an event happened at or after `since`.
fn since(e: &Value, since: chrono::DateTime<chrono::Utc>) -> bool {
    e["time"]
        .as_str()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .is_some_and(|t| t >= since)
}

/// Waits until the pod's Ready condition is True again; returns the pod.
fn wait_ready(d: &TestDaemon, name: &str) -> Value {
    d.wait_pod(name, &format!("{name} Ready again"), 60, |p| {
        let ready = p["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        ready.then(|| p.clone())
    })
}

fn restart_with_fault(d: &mut TestDaemon, fault: &str) {
    d.kill9();
    d.spawn_daemon_with_env(&[("PODHOST_TEST_SANDBOX_FAULT", fault)]);
    wait_until(
        Duration::from_secs(20),
        "the restarted daemon's API",
        || {
            d.cli(&["get", "pods", "-A", "-o", "json"])
                .status
                .success()
                .then_some(())
        },
    )
    .unwrap_or_else(|| panic!("no API after the restart:\n{}", d.daemon_log()));
}

/// The event a failed step leaves on an adopted pod, and the one its repair leaves.
fn saw_failure_and_repair(
    d: &TestDaemon,
    name: &str,
    fault: &str,
    since: chrono::DateTime<chrono::Utc>,
) -> Option<()> {
    let events: Vec<Value> = d
        .pod_events(name)
        .into_iter()
        .filter(|e| self::since(e, since))
        .collect();
    let described = if fault == "dns" { "DNS files" } else { fault };
    let failed = events.iter().any(|e| {
        e["reason"] == "FailedSandboxRepair"
            && e["type"] == "Warning"
            && e["message"]
                .as_str()
                .is_some_and(|m| m.contains(&format!("the pod's {described} could not be set up")))
    });
    let repaired = events.iter().any(|e| e["reason"] == "SandboxRepaired");
    (failed && repaired).then_some(())
}

#[test]
fn a_daemon_restarted_while_each_sandbox_step_fails_leaves_every_running_pod_as_it_was() {
    require_root();
    let mut d = TestDaemon::prepare_with(&[]);
    let config = d.dir.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("app.yaml"), CONFIG).unwrap();
    d.extra_args.push("--config-dir".into());
    d.extra_args.push(config.display().to_string());
    d.spawn_daemon();
    d.load(netcheck_layout());
    let pods = manifests();
    for (name, yaml) in &pods {
        d.write_manifest(&format!("{name}.yaml"), yaml);
    }
    for (name, _) in &pods {
        d.wait_pod(name, &format!("{name} Running"), 90, |p| {
            (phase(p) == "Running").then_some(())
        });
    }
    wait_until(Duration::from_secs(30), "the hostPort answering", || {
        host_port_answers(&d).ok()
    })
    .unwrap_or_else(|| panic!("the hostPort never answered:\n{}", d.daemon_log()));
    let before: Vec<PodSnapshot> = pods.iter().map(|(n, _)| snapshot(&d, n)).collect();
    let veths_before = veths(&d);
    assert_eq!(veths_before.len(), 4, "one veth per pod: {veths_before:?}");
    let mut ips: Vec<&String> = before.iter().flat_map(|s| &s.pod_ips).collect();
    ips.sort();
    ips.dedup();
    assert_eq!(ips.len(), 8, "dual stack, no address twice: {ips:?}");
    assert!(
        before[1].pause_pid.is_some(),
        "the shared PID pod has a pause"
    );

    for fault in ["volumes", "network", "dns", "cgroup", "network-pending"] {
        let since = chrono::Utc::now();
        restart_with_fault(&mut d, fault);
        if fault == "network-pending" {
            // A running pod whose network the restarted daemon cannot check until the
            // node's pod network starts: nothing is wrong with it, so no event at all
            // (neither NetworkNotReady nor SandboxRepaired), and nothing changes.
            for (name, _) in &pods {
                wait_ready(&d, name);
            }
            std::thread::sleep(Duration::from_secs(3));
            for (name, _) in &pods {
                let noise: Vec<Value> = d
                    .pod_events(name)
                    .into_iter()
                    .filter(|e| self::since(e, since))
                    .filter(|e| {
                        e["reason"] == "NetworkNotReady" || e["reason"] == "SandboxRepaired"
                    })
                    .collect();
                assert!(noise.is_empty(), "{fault}: {name}: {noise:#?}");
            }
        }
        for (name, _) in pods.iter().filter(|_| fault != "network-pending") {
            wait_until(
                Duration::from_secs(60),
                &format!("{name}: a Warning naming the {fault} step, then its repair"),
                || saw_failure_and_repair(&d, name, fault, since),
            )
            .unwrap_or_else(|| {
                panic!(
                    "{fault}: {name}'s events: {:#?}\ndaemon log:\n{}",
                    d.pod_events(name),
                    d.daemon_log()
                )
            });
        }
        for ((name, _), was) in pods.iter().zip(&before) {
            let pod = wait_ready(&d, name);
            assert_eq!(phase(&pod), "Running", "{fault}: {name}");
            assert_eq!(&snapshot(&d, name), was, "{fault}: {name} changed");
        }
        assert_eq!(veths(&d), veths_before, "{fault}: the veths changed");
        let answer = host_port_answers(&d);
        assert!(
            answer.as_ref().is_ok_and(|a| a.ends_with("ping")),
            "{fault}: the hostPort does not answer: {answer:?}"
        );
        let log = d.daemon_log();
        assert!(
            !log.contains("its sandbox is made anew"),
            "{fault}: a sandbox was recreated:\n{log}"
        );
    }
}

/// A fresh pod whose network waits for the node (cluster mode's podCIDR, injected) stays
/// Pending with the reason and starts once the network is there, with one event and no
/// teardown; a hostNetwork pod never waits for the pod network.
#[test]
fn a_fresh_pod_waits_for_the_pod_network_and_a_host_network_pod_never_does() {
    require_root();
    let mut d = TestDaemon::prepare_with(&[]);
    d.spawn_daemon_with_env(&[("PODHOST_TEST_SANDBOX_FAULT", "network-pending:3")]);
    wait_until(Duration::from_secs(20), "the daemon's API", || {
        d.cli(&["get", "pods", "-A", "-o", "json"])
            .status
            .success()
            .then_some(())
    })
    .unwrap_or_else(|| panic!("no API:\n{}", d.daemon_log()));
    let pod = |name: &str, host_network: bool| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  hostNetwork: {host_network}\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: localhost/busybox:latest\n    imagePullPolicy: Never\n    command: [sleep, '3600']\n"
        )
    };
    d.write_manifest("net.yaml", &pod("net", false));
    d.write_manifest("hostnet.yaml", &pod("hostnet", true));
    for name in ["net", "hostnet"] {
        d.wait_pod(name, &format!("{name} Running"), 60, |p| {
            (phase(p) == "Running").then_some(())
        });
    }
    let reasons = |name: &str| -> Vec<String> {
        d.pod_events(name)
            .iter()
            .map(|e| e["reason"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let net = reasons("net");
    assert_eq!(
        net.iter().filter(|r| *r == "NetworkNotReady").count(),
        1,
        "{net:?}"
    );
    assert!(
        !net.iter().any(|r| r == "FailedCreatePodSandBox"),
        "{net:?}"
    );
    let hostnet = reasons("hostnet");
    assert!(
        !hostnet.iter().any(|r| r == "NetworkNotReady"),
        "{hostnet:?}"
    );
    let log = d.daemon_log();
    assert!(!log.contains("its sandbox is made anew"), "{log}");
}

/// A running pod whose host veth is deleted under it (by an administrator, another tool)
/// is noticed within the daemon's sandbox check and gets its network back with the same
/// addresses; its container keeps running and its hostPort answers again.
#[test]
fn a_network_deleted_under_a_running_pod_is_noticed_and_set_up_again() {
    require_root();
    let mut d = TestDaemon::prepare_with(&[]);
    d.spawn_daemon();
    d.load(netcheck_layout());
    let web = manifests()
        .into_iter()
        .find(|(n, _)| *n == "web")
        .unwrap()
        .1;
    d.write_manifest("web.yaml", &web);
    d.wait_pod("web", "web Running", 60, |p| {
        (phase(p) == "Running").then_some(())
    });
    wait_until(Duration::from_secs(30), "the hostPort answering", || {
        host_port_answers(&d).ok()
    })
    .unwrap_or_else(|| panic!("the hostPort never answered:\n{}", d.daemon_log()));
    let before = snapshot(&d, "web");
    let veth = veths(&d);
    assert_eq!(veth.len(), 1, "{veth:?}");
    d.netns.as_ref().unwrap().ip(&["link", "del", &veth[0]]);
    assert!(
        host_port_answers(&d).is_err(),
        "the hostPort answers without a veth"
    );
    let since = chrono::Utc::now() - chrono::Duration::seconds(1);
    let events = wait_until(
        Duration::from_secs(40),
        "NetworkMissing then SandboxRepaired",
        || {
            let reasons: Vec<String> = d
                .pod_events("web")
                .iter()
                .filter(|e| {
                    e["time"]
                        .as_str()
                        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                        .is_some_and(|t| t >= since)
                })
                .map(|e| e["reason"].as_str().unwrap_or_default().to_string())
                .collect();
            (reasons.iter().any(|r| r == "NetworkMissing")
                && reasons.iter().any(|r| r == "SandboxRepaired"))
            .then_some(reasons)
        },
    )
    .unwrap_or_else(|| {
        panic!(
            "not repaired: {:#?}\n{}",
            d.pod_events("web"),
            d.daemon_log()
        )
    });
    assert!(events.iter().any(|r| r == "NetworkMissing"), "{events:?}");
    let answer = wait_until(
        Duration::from_secs(10),
        "the hostPort answering again",
        || host_port_answers(&d).ok(),
    );
    assert!(answer.is_some_and(|a| a.ends_with("ping")));
    assert_eq!(veths(&d), veth, "the veth came back under its name");
    assert_eq!(snapshot(&d, "web"), before, "the pod changed");
}

/// A real cause rather than an injected one: the daemon restarted with a pod network that
/// cannot work (a CNI config naming a plugin that does not exist). The running pods keep
/// their sandbox, their bridge network and hostPort; the failure is a Warning naming the
/// network and the pod is not Ready; restarted with its bridge again, everything is as
/// it was.
#[test]
fn a_daemon_restarted_with_a_broken_pod_network_leaves_running_pods_alone() {
    require_root();
    let mut d = TestDaemon::prepare_with(&[]);
    d.spawn_daemon();
    d.load(netcheck_layout());
    let pods: Vec<(&str, String)> = manifests()
        .into_iter()
        .filter(|(n, _)| matches!(*n, "web" | "shared"))
        .collect();
    for (name, yaml) in &pods {
        d.write_manifest(&format!("{name}.yaml"), yaml);
    }
    for (name, _) in &pods {
        d.wait_pod(name, &format!("{name} Running"), 60, |p| {
            (phase(p) == "Running").then_some(())
        });
    }
    wait_until(Duration::from_secs(30), "the hostPort answering", || {
        host_port_answers(&d).ok()
    })
    .unwrap_or_else(|| panic!("the hostPort never answered:\n{}", d.daemon_log()));
    let before: Vec<PodSnapshot> = pods.iter().map(|(n, _)| snapshot(&d, n)).collect();
    let veths_before = veths(&d);

    let broken = d.dir.path().join("broken-cni");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(
        broken.join("10-broken.conflist"),
        r#"{"cniVersion": "1.0.0", "name": "broken", "plugins": [{"type": "podhost-no-such-plugin"}]}"#,
    )
    .unwrap();
    let normal_args = d.extra_args.clone();
    d.extra_args.push("--pod-network=cni".into());
    d.extra_args
        .push(format!("--cni-conf-dir={}", broken.display()));
    let since = chrono::Utc::now();
    d.kill9();
    d.spawn_daemon();
    for (name, _) in &pods {
        let pod = d.wait_pod(
            name,
            &format!("{name} not Ready, naming the network"),
            60,
            |p| {
                let unready = p["status"]["conditions"].as_array()?.iter().any(|c| {
                    c["type"] == "Ready"
                        && c["status"] == "False"
                        && c["reason"] == "PodSandboxNotReady"
                        && c["message"]
                            .as_str()
                            .is_some_and(|m| m.starts_with("network"))
                });
                unready.then(|| p.clone())
            },
        );
        assert_eq!(phase(&pod), "Running", "{name}");
        let warned = d.pod_events(name).iter().any(|e| {
            e["reason"] == "FailedSandboxRepair"
                && e["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("the pod's network could not be set up"))
                && e["time"]
                    .as_str()
                    .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                    .is_some_and(|t| t >= since)
        });
        assert!(warned, "{name}: {:#?}", d.pod_events(name));
    }
    for ((name, _), was) in pods.iter().zip(&before) {
        assert_eq!(&snapshot(&d, name), was, "broken network: {name} changed");
    }
    assert_eq!(veths(&d), veths_before, "the veths changed");
    let answer = host_port_answers(&d);
    assert!(
        answer.as_ref().is_ok_and(|a| a.ends_with("ping")),
        "the hostPort stopped answering: {answer:?}"
    );

    d.extra_args = normal_args;
    d.kill9();
    d.spawn_daemon();
    for ((name, _), was) in pods.iter().zip(&before) {
        wait_ready(&d, name);
        assert_eq!(&snapshot(&d, name), was, "bridge again: {name} changed");
    }
    assert_eq!(veths(&d), veths_before, "the veths changed");
    assert!(!d.daemon_log().contains("its sandbox is made anew"));
}
