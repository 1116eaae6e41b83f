use std::collections::BTreeSet;
use std::path::Path;

use clap::{Args, Parser};
use serde_json::Value;

use super::fields::{CRASH_LOOP_BACK_OFF_FIELDS, FIELDS, LOGGING_FIELDS, Support};
use super::*;
use crate::daemon::flags::DaemonFlags;
use crate::daemon::reload::{Changes, changes, resolve};

#[derive(Parser)]
struct Wrapper {
    #[command(flatten)]
    flags: DaemonFlags,
}

fn flags(args: &[&str]) -> DaemonFlags {
    let argv = ["podhost", "--node-name", "node-a"].iter().chain(args);
    Wrapper::try_parse_from(argv).unwrap().flags
}

fn parse(text: &str) -> Result<ConfigFile, KubeletConfigError> {
    ConfigFile::parse(Path::new("/etc/podhost/config.yaml"), text)
}

const HEADER: &str = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";

fn doc(body: &str) -> String {
    format!("{HEADER}{body}")
}

fn given(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

#[test]
fn every_implemented_row_is_a_typed_field_and_every_typed_field_a_row() {
    let Value::Object(typed) = serde_json::to_value(Implemented::default()).unwrap() else {
        panic!("not an object");
    };
    let rows: BTreeSet<&str> = FIELDS
        .iter()
        .filter(|(_, s)| matches!(s, Support::Flag(_)))
        .map(|(n, _)| *n)
        .collect();
    let keys: BTreeSet<&str> = typed.keys().map(String::as_str).collect();
    assert_eq!(rows, keys);
    let sub = |table: &[(&str, Support)]| -> BTreeSet<String> {
        table
            .iter()
            .filter(|(_, s)| matches!(s, Support::Flag(_)))
            .map(|(n, _)| n.to_string())
            .collect()
    };
    let Value::Object(logging) = serde_json::to_value(typed::Logging::default()).unwrap() else {
        panic!()
    };
    assert_eq!(sub(LOGGING_FIELDS), logging.keys().cloned().collect());
    let Value::Object(clbo) = serde_json::to_value(typed::CrashLoopBackOff::default()).unwrap()
    else {
        panic!()
    };
    assert_eq!(
        sub(CRASH_LOOP_BACK_OFF_FIELDS),
        clbo.keys().cloned().collect()
    );
}

#[test]
fn every_mapped_flag_is_a_daemon_flag() {
    let command = DaemonFlags::augment_args(clap::Command::new("daemon"));
    let ids: BTreeSet<&str> = command
        .get_arguments()
        .map(|a| a.get_id().as_str())
        .collect();
    for table in [FIELDS, LOGGING_FIELDS, CRASH_LOOP_BACK_OFF_FIELDS] {
        for (name, support) in table {
            if let Support::Flag(flag) = support {
                assert!(
                    ids.contains(flag),
                    "{name} maps onto --{flag}, which does not exist"
                );
            }
        }
    }
    let names: BTreeSet<&str> = FIELDS.iter().map(|(n, _)| *n).collect();
    assert_eq!(names.len(), FIELDS.len(), "a field is listed twice");
}

#[test]
fn a_kubeadm_style_file_maps_its_fields_and_lists_the_rest() {
    let file = parse(&doc(r#"
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
authorization: {mode: Webhook}
cgroupDriver: systemd
clusterDNS: [10.96.0.10]
clusterDomain: cluster.local
containerRuntimeEndpoint: ""
healthzBindAddress: 127.0.0.1
healthzPort: 10248
rotateCertificates: true
staticPodPath: /etc/kubernetes/manifests
fileCheckFrequency: 2m30s
logging:
  format: json
  verbosity: 2
evictionHard:
  memory.available: 200Mi
  nodefs.available: 5%
evictionSoft: {memory.available: 500Mi}
evictionSoftGracePeriod: {memory.available: 1m30s}
evictionPressureTransitionPeriod: 0s
containerLogMaxSize: 5Mi
containerLogMaxFiles: 3
maxOpenFiles: 4096
crashLoopBackOff: {maxContainerRestartPeriod: 1m}
readOnlyPort: 0
address: 0.0.0.0
"#))
    .unwrap();
    let unsupported: Vec<&str> = file.unsupported.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        unsupported,
        [
            "authentication",
            "authorization",
            "cgroupDriver",
            "containerRuntimeEndpoint",
            "healthzBindAddress",
            "healthzPort",
            "logging.verbosity"
        ]
    );
    assert!(
        file.unsupported_summary()
            .contains("cgroupDriver (podhost writes cgroupfs")
    );
    let mut f = flags(&[]);
    apply(&file, &mut f, &BTreeSet::new()).unwrap();
    assert_eq!(f.pod_manifest_path, Path::new("/etc/kubernetes/manifests"));
    assert_eq!(f.rescan_interval, 150.0);
    assert_eq!(f.log_format, "json");
    assert_eq!(
        f.eviction_hard,
        "memory.available<200Mi,nodefs.available<5%"
    );
    assert_eq!(f.eviction_soft, "memory.available<500Mi");
    assert_eq!(f.eviction_soft_grace_period, "memory.available=1m30s");
    assert_eq!(
        f.eviction_pressure_transition_period, 300.0,
        "0s means the default"
    );
    assert_eq!(f.container_log_max_size, "5Mi");
    assert_eq!(f.container_log_max_files, 3);
    assert_eq!(f.max_open_files, 4096);
    assert_eq!(f.crashloop_max_backoff, 60.0);
    assert_eq!(
        f.cluster_dns,
        ["10.96.0.10".parse::<std::net::IpAddr>().unwrap()]
    );
    assert_eq!(f.cluster_domain, "cluster.local");
    assert_eq!(f.read_only_port, None, "readOnlyPort 0 is off");
    assert_eq!(f.address, Some("0.0.0.0".parse().unwrap()));
    let cfg = f.into_config("/run/x.sock".into()).unwrap();
    assert_eq!(
        cfg.read_only, None,
        "address alone must not open the read-only port"
    );
    assert_eq!(cfg.max_open_files, 4096);
    assert_eq!(cfg.log_rotation.max_files, 3);
}

#[test]
fn json_works_as_yaml_does_and_the_read_only_server_takes_the_address() {
    let file = parse(
        r#"{"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "readOnlyPort": 10255, "address": "127.0.0.2",
            "staticPodURL": "http://10.0.0.1/pods", "httpCheckFrequency": "5s",
            "staticPodURLHeader": {"X-Token": ["a", "b"]}, "podPidsLimit": 100,
            "seccompDefault": false, "imageGCHighThresholdPercent": 90,
            "imageMinimumGCAge": "1h"}"#,
    )
    .unwrap();
    assert!(file.unsupported.is_empty());
    let mut f = flags(&[]);
    apply(&file, &mut f, &BTreeSet::new()).unwrap();
    assert_eq!(f.read_only_port, Some(10255));
    assert_eq!(f.address, Some("127.0.0.2".parse().unwrap()));
    assert_eq!(
        f.clone()
            .into_config("/run/x.sock".into())
            .unwrap()
            .read_only,
        Some("127.0.0.2:10255".parse().unwrap())
    );
    assert_eq!(f.manifest_url.as_deref(), Some("http://10.0.0.1/pods"));
    assert_eq!(f.http_check_frequency, 5.0);
    assert_eq!(f.manifest_url_header, ["X-Token:a", "X-Token:b"]);
    assert_eq!(f.pod_pids_limit, 100);
    assert!(!f.seccomp_default);
    assert_eq!(f.image_gc_high_threshold, 90);
    assert_eq!(f.image_minimum_gc_age, 3600.0);
}

#[test]
fn flags_given_on_the_command_line_win_over_the_file() {
    let file = parse(&doc(
        "containerLogMaxSize: 5Mi\ncontainerLogMaxFiles: 3\nlogging: {format: json}\n",
    ))
    .unwrap();
    let mut f = flags(&["--container-log-max-size", "1Mi", "--log-format", "text"]);
    apply(
        &file,
        &mut f,
        &given(&["container_log_max_size", "log_format"]),
    )
    .unwrap();
    assert_eq!(f.container_log_max_size, "1Mi");
    assert_eq!(f.log_format, "text");
    assert_eq!(
        f.container_log_max_files, 3,
        "a flag not given takes the file's value"
    );
    assert_eq!(
        file.overridden(&given(&["container_log_max_size", "log_format"])),
        ["containerLogMaxSize", "logging.format"]
    );
}

#[test]
fn an_unknown_field_is_an_error_that_names_it_and_suggests_the_field() {
    let err = parse(&doc("staticPodPth: /x\n")).unwrap_err().to_string();
    assert_eq!(
        err,
        "config file /etc/podhost/config.yaml: unknown field \"staticPodPth\" (did you mean \
         \"staticPodPath\"?); it is not a field of kubelet.config.k8s.io/v1beta1 \
         KubeletConfiguration: fix or remove it"
    );
    let err = parse(&doc("rootDir: /var/lib/x\n"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown field \"rootDir\""), "{err}");
    let err = parse(&doc("logging: {formt: json}\n"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("\"logging.formt\" (did you mean \"format\"?)"),
        "{err}"
    );
}

#[test]
fn a_wrong_kind_or_value_is_an_error_that_names_the_file_and_field() {
    let err = parse("apiVersion: v1\nkind: Pod\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("found apiVersion \"v1\", kind \"Pod\""),
        "{err}"
    );
    let err = parse(&doc("readOnlyPort: abc\n")).unwrap_err().to_string();
    assert!(
        err.starts_with("config file /etc/podhost/config.yaml: field readOnlyPort: invalid type"),
        "{err}"
    );
    let bad = |body: &str| {
        let file = parse(&doc(body)).unwrap();
        apply(&file, &mut flags(&[]), &BTreeSet::new())
            .unwrap_err()
            .to_string()
    };
    assert!(
        bad("fileCheckFrequency: \"20\"\n")
            .contains("field fileCheckFrequency: \"20\" is not a duration")
    );
    assert!(bad("readOnlyPort: 70000\n").contains("field readOnlyPort: 70000 is not a port"));
    assert!(bad("clusterDNS: [dns.local]\n").contains("field clusterDNS: \"dns.local\""));
    assert!(bad("logging: {format: xml}\n").contains("field logging.format: \"xml\""));
    assert!(bad("imageGCLowThresholdPercent: 95\n").contains("above imageGCHighThresholdPercent"));
    // A value only the flag's own check refuses is still named by its field.
    let file = parse(&doc("containerLogMaxSize: ten\n")).unwrap();
    let err = resolve(&flags(&[]), &BTreeSet::new(), "/run/x.sock".into(), &file)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("config file /etc/podhost/config.yaml: field containerLogMaxSize: "),
        "{err}"
    );
}

#[test]
fn a_reload_sorts_changes_into_live_restart_and_overridden() {
    let started = parse(&doc(
        "containerLogMaxSize: 5Mi\npodPidsLimit: 100\nclusterDomain: a\n",
    ))
    .unwrap();
    let new = parse(&doc(
        "containerLogMaxSize: 1Mi\npodPidsLimit: 200\nclusterDomain: b\nimageGCHighThresholdPercent: 70\n",
    ))
    .unwrap();
    let c = changes(&started, &started, &new, &given(&["cluster_domain"]));
    assert_eq!(
        c,
        Changes {
            live: vec![
                "containerLogMaxSize".into(),
                "imageGCHighThresholdPercent".into()
            ],
            restart: vec!["podPidsLimit".into()],
            overridden: vec!["clusterDomain".into()],
        }
    );
    // A restart field changed back to what is in effect is no longer pending.
    let back = parse(&doc(
        "containerLogMaxSize: 1Mi\npodPidsLimit: 100\nclusterDomain: a\n",
    ))
    .unwrap();
    let c = changes(&started, &new, &back, &BTreeSet::new());
    assert_eq!(c.restart, Vec::<String>::new());
    assert_eq!(c.live, ["imageGCHighThresholdPercent"]);
}

#[test]
fn the_node_registration_fields_map_onto_the_cluster_flags() {
    let file = parse(&doc("kubeReserved: {cpu: 100m, memory: 256Mi}\n\
         systemReserved: {ephemeral-storage: 1Gi}\n\
         registerWithTaints:\n\
         - {key: dedicated, value: edge, effect: NoSchedule}\n\
         - {key: spot, effect: PreferNoSchedule}\n\
         nodeStatusUpdateFrequency: 20s\n\
         nodeStatusReportFrequency: 1m\n\
         nodeLeaseDurationSeconds: 60\n\
         rotateCertificates: true\n\
         maxPods: 30\n"))
    .unwrap();
    assert!(file.unsupported.is_empty(), "{:?}", file.unsupported);
    let mut f = flags(&["--kubeconfig", "/etc/podhost/node.kubeconfig"]);
    apply(&file, &mut f, &BTreeSet::new()).unwrap();
    assert_eq!(f.cluster.kube_reserved, "cpu=100m,memory=256Mi");
    assert_eq!(
        f.cluster.register_with_taints,
        "dedicated=edge:NoSchedule,spot:PreferNoSchedule"
    );
    let cluster = f
        .into_config("/run/x.sock".into())
        .unwrap()
        .cluster
        .unwrap();
    assert_eq!(cluster.kube_reserved.cpu_millis, 100);
    assert_eq!(cluster.system_reserved.ephemeral_storage_bytes, 1 << 30);
    assert_eq!(cluster.taints.len(), 2);
    assert_eq!(cluster.taints[1].value, None);
    assert_eq!(cluster.status_update_every.as_secs(), 20);
    assert_eq!(cluster.status_report_every.as_secs(), 60);
    assert_eq!(cluster.lease_duration.as_secs(), 60);
    assert_eq!(cluster.max_pods, 30);
    assert!(cluster.rotate_certificates);
    // No --cert-dir: the kubelet's ROOT/pki.
    assert_eq!(
        cluster.cert_dir,
        Path::new(podhost_disk::DEFAULT_ROOT_DIR).join("pki")
    );

    let bad = parse(&doc("nodeLeaseDurationSeconds: 0\n")).unwrap();
    let error = apply(&bad, &mut flags(&[]), &BTreeSet::new()).unwrap_err();
    assert!(
        error.to_string().contains("nodeLeaseDurationSeconds"),
        "{error}"
    );
    let bad = parse(&doc("maxPods: -1\n")).unwrap();
    let error = apply(&bad, &mut flags(&[]), &BTreeSet::new()).unwrap_err();
    assert!(error.to_string().contains("maxPods"), "{error}");
}

#[test]
fn the_bootstrap_flags_name_their_files_and_a_flag_beats_the_file() {
    let cluster = flags(&[
        "--root-dir",
        "/var/lib/ph",
        "--kubeconfig",
        "node.kubeconfig",
        "--bootstrap-kubeconfig",
        "/etc/bootstrap.kubeconfig",
        "--rotate-certificates",
    ])
    .into_config("/run/x.sock".into())
    .unwrap()
    .cluster
    .unwrap();
    assert_eq!(cluster.cert_dir, Path::new("/var/lib/ph/pki"));
    assert_eq!(
        cluster.kubeconfig,
        std::env::current_dir().unwrap().join("node.kubeconfig")
    );
    assert_eq!(
        cluster.bootstrap_kubeconfig.as_deref(),
        Some(Path::new("/etc/bootstrap.kubeconfig"))
    );
    assert!(cluster.rotate_certificates);
    let cluster = flags(&[
        "--kubeconfig",
        "/k",
        "--cert-dir",
        "/etc/pki",
        "--rotate-certificates=false",
    ])
    .into_config("/run/x.sock".into())
    .unwrap()
    .cluster
    .unwrap();
    assert_eq!(cluster.cert_dir, Path::new("/etc/pki"));
    assert!(!cluster.rotate_certificates);
    // A bootstrap kubeconfig is for writing --kubeconfig: without it, an error.
    let argv = [
        "podhost",
        "--node-name",
        "n",
        "--bootstrap-kubeconfig",
        "/b",
    ];
    assert!(Wrapper::try_parse_from(argv).is_err());
    // --rotate-certificates given on the command line beats the file's false.
    let file = parse(&doc("rotateCertificates: false\n")).unwrap();
    let mut f = flags(&["--kubeconfig", "/k", "--rotate-certificates"]);
    let given: BTreeSet<String> = ["rotate_certificates".to_string()].into();
    apply(&file, &mut f, &given).unwrap();
    assert!(f.cluster.rotate_certificates);
}
