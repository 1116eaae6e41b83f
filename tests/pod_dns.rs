//! The pods' name service files with the real daemon, read inside real containers:
//! resolv.conf per dnsPolicy (Default, None + dnsConfig, ClusterFirst with and without
//! --cluster-dns), hostAliases, hostname/subdomain/setHostnameAsFQDN (`hostname`,
//! `hostname -f`, /etc/hostname), a container's own /etc/hosts kept, read-only files
//! with a read-only root, a hostNetwork pod's files and an ephemeral container's.
//!
//! Every daemon gets its resolver configuration from a file of the test's own
//! (`--resolv-conf`), so nothing depends on the host's or on the daemon's network
//! namespace.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::PathBuf;

use common::*;
use serde_json::{Value, json};

/// The host resolver configuration every test daemon reads.
const HOST_RESOLV: &str = "# test host\nnameserver 192.0.2.53\nnameserver 192.0.2.54\nsearch corp.example\noptions ndots:2 edns0\n";
/// The same, as a pod gets it with dnsPolicy Default (containerd's layout).
const DEFAULT_RESOLV: &str =
    "search corp.example\nnameserver 192.0.2.53\nnameserver 192.0.2.54\noptions ndots:2 edns0\n";

/// The kubelet's managed hosts file up to the pod's own lines.
const MANAGED_HEAD: &str = "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n";

/// A daemon whose host resolv.conf is [`HOST_RESOLV`], with `flags` besides.
fn daemon(flags: &[&str]) -> TestDaemon {
    assert!(require_root());
    let mut d = TestDaemon::prepare_with(&[]);
    let resolv = d.dir.path().join("host-resolv.conf");
    std::fs::write(&resolv, HOST_RESOLV).unwrap();
    d.extra_args
        .push(format!("--resolv-conf={}", resolv.display()));
    d.extra_args.extend(flags.iter().map(|s| s.to_string()));
    d.spawn_daemon();
    d
}

fn sleeper(name: &str) -> Value {
    json!({
        "name": name,
        "image": "localhost/busybox:latest",
        "imagePullPolicy": "Never",
        "command": ["sleep", "3600"],
    })
}

/// Writes a pod of `containers` with `spec` merged in, and waits until it runs.
fn run_pod(d: &TestDaemon, name: &str, spec: Value, containers: Vec<Value>) -> String {
    let mut spec_obj = json!({"terminationGracePeriodSeconds": 1, "containers": containers});
    for (k, v) in spec.as_object().unwrap() {
        spec_obj[k] = v.clone();
    }
    let pod =
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec_obj});
    d.write_manifest(&format!("{name}.json"), &pod.to_string());
    d.wait_pod(name, &format!("{name} Running"), 60, |p| {
        (phase(p) == "Running").then_some(())
    });
    d.full_name(name)
}

/// `podhost exec POD -c C -- CMD…`'s stdout; fails the test when it fails.
fn exec(d: &TestDaemon, pod: &str, container: &str, cmd: &[&str]) -> String {
    let mut argv = vec!["exec", pod, "-c", container, "--"];
    argv.extend_from_slice(cmd);
    let out = d.cli(&argv);
    assert!(
        out.status.success(),
        "exec {cmd:?} in {pod}/{container}: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        d.daemon_log()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn events_with_reason(events: &[Value], reason: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["reason"] == reason)
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn resolv_conf_per_dns_policy_with_cluster_dns() {
    let d = daemon(&["--cluster-dns=10.96.0.10", "--cluster-domain=cluster.local"]);
    let main = vec![sleeper("main")];
    let default = run_pod(&d, "dflt", json!({"dnsPolicy": "Default"}), main.clone());
    assert_eq!(
        exec(&d, &default, "main", &["cat", "/etc/resolv.conf"]),
        DEFAULT_RESOLV
    );

    let cluster = run_pod(
        &d,
        "cf",
        json!({"dnsConfig": {"searches": ["extra.example"], "options": [{"name": "ndots", "value": "1"}, {"name": "rotate"}]}}),
        main.clone(),
    );
    assert_eq!(
        exec(&d, &cluster, "main", &["cat", "/etc/resolv.conf"]),
        "search default.svc.cluster.local svc.cluster.local cluster.local corp.example extra.example\nnameserver 10.96.0.10\noptions ndots:1 rotate\n"
    );

    // None: dnsConfig alone.
    let none = run_pod(
        &d,
        "none",
        json!({"dnsPolicy": "None", "dnsConfig": {
            "nameservers": ["203.0.113.1", "203.0.113.2"],
            "searches": ["a.example"],
            "options": [{"name": "edns0"}],
        }}),
        main.clone(),
    );
    assert_eq!(
        exec(&d, &none, "main", &["cat", "/etc/resolv.conf"]),
        "search a.example\nnameserver 203.0.113.1\nnameserver 203.0.113.2\noptions edns0\n"
    );
    assert!(events_with_reason(&d.pod_events("none"), "DNSConfigForming").is_empty());

    // Default + dnsConfig: the host's two nameservers and two more are one too many;
    // the fourth is dropped and an event names it.
    let many = run_pod(
        &d,
        "many",
        json!({"dnsPolicy": "Default", "dnsConfig": {"nameservers": ["203.0.113.1", "192.0.2.53", "203.0.113.2"]}}),
        main,
    );
    assert_eq!(
        exec(&d, &many, "main", &["cat", "/etc/resolv.conf"]),
        "search corp.example\nnameserver 192.0.2.53\nnameserver 192.0.2.54\nnameserver 203.0.113.1\noptions ndots:2 edns0\n"
    );
    assert_eq!(
        events_with_reason(&d.pod_events("many"), "DNSConfigForming"),
        [
            "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 192.0.2.53 192.0.2.54 203.0.113.1 (omitted: 203.0.113.2)"
        ]
    );
    assert!(events_with_reason(&d.node_events(), "MissingClusterDNS").is_empty());
}

#[test]
fn cluster_first_without_cluster_dns_falls_back_to_default_and_says_so_once() {
    let d = daemon(&[]);
    for name in ["one", "two"] {
        let pod = run_pod(&d, name, json!({}), vec![sleeper("main")]);
        assert_eq!(
            exec(&d, &pod, "main", &["cat", "/etc/resolv.conf"]),
            DEFAULT_RESOLV
        );
    }
    let said = events_with_reason(&d.node_events(), "MissingClusterDNS");
    assert_eq!(
        said,
        [
            "podhost has no --cluster-dns configured and cannot create Pod using \"ClusterFirst\" policy. Falling back to \"Default\" policy."
        ]
    );
}

#[test]
fn hostname_subdomain_fqdn_and_host_aliases() {
    let d = daemon(&["--cluster-domain=cluster.local"]);
    let aliases = json!([{"ip": "10.1.2.3", "hostnames": ["db", "db.local"]}, {"ip": "fd00::9", "hostnames": ["six"]}]);
    let fq = run_pod(
        &d,
        "fq",
        json!({"hostname": "h1", "subdomain": "sub", "setHostnameAsFQDN": true, "hostAliases": aliases}),
        vec![sleeper("main")],
    );
    let fqdn = "h1.sub.default.svc.cluster.local";
    assert_eq!(exec(&d, &fq, "main", &["hostname"]).trim(), fqdn);
    assert_eq!(exec(&d, &fq, "main", &["hostname", "-f"]).trim(), fqdn);
    assert_eq!(
        exec(&d, &fq, "main", &["cat", "/etc/hostname"]),
        format!("{fqdn}\n")
    );
    let hosts = exec(&d, &fq, "main", &["cat", "/etc/hosts"]);
    let own = hosts
        .strip_prefix(MANAGED_HEAD)
        .unwrap_or_else(|| panic!("not the managed hosts file:\n{hosts}"));
    let (own, aliases) = own
        .split_once("\n# Entries added by HostAliases.\n")
        .unwrap();
    // One line per pod address (127.0.1.1 without a pod network), FQDN then hostname.
    assert!(!own.is_empty());
    for line in own.lines() {
        assert!(line.ends_with(&format!("\t{fqdn}\th1")), "{hosts}");
    }
    assert_eq!(aliases, "10.1.2.3\tdb\tdb.local\nfd00::9\tsix\n");

    // A subdomain without setHostnameAsFQDN: the short name in the UTS namespace, the
    // FQDN through /etc/hosts.
    let short = run_pod(
        &d,
        "short",
        json!({"hostname": "h2", "subdomain": "sub"}),
        vec![sleeper("main")],
    );
    assert_eq!(exec(&d, &short, "main", &["hostname"]).trim(), "h2");
    assert_eq!(
        exec(&d, &short, "main", &["hostname", "-f"]).trim(),
        "h2.sub.default.svc.cluster.local"
    );
    assert_eq!(exec(&d, &short, "main", &["cat", "/etc/hostname"]), "h2\n");

    // No spec.hostname: the pod's name.
    let named = run_pod(&d, "named", json!({}), vec![sleeper("main")]);
    assert_eq!(exec(&d, &named, "main", &["hostname"]).trim(), named);
}

#[test]
fn an_fqdn_over_64_characters_fails_the_sandbox_with_the_kubelets_message() {
    let d = daemon(&["--cluster-domain=cluster.local"]);
    let sub = "s".repeat(40);
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "long"}, "spec": {
        "hostname": "h", "subdomain": sub, "setHostnameAsFQDN": true,
        "containers": [sleeper("main")],
    }});
    d.write_manifest("long.json", &pod.to_string());
    let fqdn = format!("h.{sub}.default.svc.cluster.local");
    let want = format!(
        "Failed to create pod sandbox: pod {}: failed to construct FQDN from pod hostname and cluster domain, FQDN {fqdn} is too long (64 characters is the max, {} characters requested)",
        d.full_name("long"),
        fqdn.len()
    );
    let events = wait_until(std::time::Duration::from_secs(30), "sandbox event", || {
        let e = events_with_reason(&d.pod_events("long"), "FailedCreatePodSandBox");
        (!e.is_empty()).then_some(e)
    })
    .unwrap_or_else(|| panic!("no FailedCreatePodSandBox; daemon log:\n{}", d.daemon_log()));
    assert_eq!(events[0], want);
    let pod = d.pod("long").unwrap();
    assert_ne!(phase(&pod), "Running");
}

#[test]
fn own_hosts_mount_is_kept_and_a_read_only_root_gets_read_only_files() {
    let d = daemon(&[]);
    let own_hosts: PathBuf = d.dir.path().join("my-hosts");
    std::fs::write(&own_hosts, "192.0.2.99\tmine\n").unwrap();
    let mut mounts_own = sleeper("own");
    mounts_own["volumeMounts"] = json!([{"name": "h", "mountPath": "/etc/hosts"}]);
    let mut locked = sleeper("locked");
    locked["securityContext"] = json!({"readOnlyRootFilesystem": true});
    let pod = run_pod(
        &d,
        "mix",
        json!({"volumes": [{"name": "h", "hostPath": {"path": own_hosts, "type": "File"}}]}),
        vec![mounts_own, locked, sleeper("plain")],
    );
    assert_eq!(
        exec(&d, &pod, "own", &["cat", "/etc/hosts"]),
        "192.0.2.99\tmine\n"
    );
    // Its resolv.conf and hostname are still the pod's.
    assert_eq!(
        exec(&d, &pod, "own", &["cat", "/etc/resolv.conf"]),
        DEFAULT_RESOLV
    );
    assert!(exec(&d, &pod, "plain", &["cat", "/etc/hosts"]).starts_with(MANAGED_HEAD));

    // Read-only root: the three files cannot be written; writable otherwise.
    for file in ["/etc/hosts", "/etc/resolv.conf", "/etc/hostname"] {
        let script = format!("echo '# x' >> {file} && echo wrote || echo refused");
        assert_eq!(
            exec(&d, &pod, "locked", &["sh", "-c", &script]).trim(),
            "refused",
            "{file}"
        );
        assert_eq!(
            exec(&d, &pod, "plain", &["sh", "-c", &script]).trim(),
            "wrote",
            "{file}"
        );
    }
}

#[test]
fn host_network_pod_gets_the_nodes_hosts_file_and_hostname() {
    let d = daemon(&["--cluster-dns=10.96.0.10", "--cluster-domain=cluster.local"]);
    let pod = run_pod(
        &d,
        "hostnet",
        json!({"hostNetwork": true, "hostAliases": [{"ip": "10.9.9.9", "hostnames": ["x"]}]}),
        vec![sleeper("main")],
    );
    let node_hosts = std::fs::read_to_string("/etc/hosts").unwrap();
    assert_eq!(
        exec(&d, &pod, "main", &["cat", "/etc/hosts"]),
        format!(
            "# Kubernetes-managed hosts file (host network).\n{node_hosts}\n# Entries added by HostAliases.\n10.9.9.9\tx\n"
        )
    );
    let uts = exec(&d, &pod, "main", &["hostname"]);
    assert_eq!(exec(&d, &pod, "main", &["cat", "/etc/hostname"]), uts);
    // ClusterFirst on the host network is Default, as in the kubelet.
    assert_eq!(
        exec(&d, &pod, "main", &["cat", "/etc/resolv.conf"]),
        DEFAULT_RESOLV
    );
}

#[test]
fn an_ephemeral_container_sees_the_pods_files() {
    let d = daemon(&["--cluster-domain=cluster.local"]);
    let pod = run_pod(
        &d,
        "dbg",
        json!({"hostname": "h3", "subdomain": "sub", "dnsPolicy": "Default"}),
        vec![sleeper("main")],
    );
    let out = d.cli(&[
        "debug",
        &pod,
        "--image",
        "localhost/busybox:latest",
        "--image-pull-policy",
        "Never",
        "-c",
        "peek",
        "--",
        "sh",
        "-c",
        "cat /etc/resolv.conf /etc/hostname; hostname -f",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{DEFAULT_RESOLV}h3\nh3.sub.default.svc.cluster.local\n")
    );
}

#[test]
fn a_host_without_resolv_conf_runs_pods_with_no_nameservers_and_says_so() {
    // A minimal appliance or initramfs: no /etc/resolv.conf.
    require_root();
    let mut d = TestDaemon::prepare_with(&[]);
    let missing = d.dir.path().join("no-such-resolv.conf");
    d.extra_args
        .extend(["--resolv-conf".to_string(), missing.display().to_string()]);
    d.spawn_daemon();
    let pod = run_pod(
        &d,
        "bare",
        json!({"dnsPolicy": "Default"}),
        vec![sleeper("main")],
    );
    assert_eq!(exec(&d, &pod, "main", &["cat", "/etc/resolv.conf"]), "");
    let said = events_with_reason(&d.pod_events("bare"), "DNSConfigForming");
    assert!(
        said.iter()
            .any(|m| m.contains("does not exist") && m.contains(&missing.display().to_string())),
        "{said:?}"
    );
}
