//! The image's config is honoured and merged with the pod's as Kubernetes does:
//! Entrypoint/Cmd vs command/args, Env, WorkingDir, User, StopSignal.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

fn pod(name: &str, container: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  restartPolicy: Never\n  terminationGracePeriodSeconds: 10\n  containers:\n  - name: main\n    image: localhost/variant:v1\n{container}"
    )
}

#[test]
fn image_config_is_merged_with_the_pod() {
    require_root();
    let d = TestDaemon::start();
    let layout = image_variant(
        &d.dir.path().join("variant"),
        "localhost/variant:v1",
        json!({
            "Entrypoint": ["/bin/sh", "-c"],
            "Cmd": ["echo img-cmd $FROM_IMAGE $SHARED; id -u; id -g; pwd"],
            "Env": ["PATH=/bin:/usr/bin", "FROM_IMAGE=img", "SHARED=from-image"],
            "WorkingDir": "/tmp",
            "User": "nobody",
        }),
    );
    d.load(&layout);
    // Neither command nor args: Entrypoint + Cmd, image env, user and workdir.
    d.write_manifest("plain.yaml", &pod("plain", ""));
    // args only: Entrypoint + args; pod env overrides the image's.
    d.write_manifest(
        "args.yaml",
        &pod(
            "args",
            "    args: [\"echo args $SHARED $FROM_IMAGE; pwd\"]\n    workingDir: /etc\n    env:\n    - name: SHARED\n      value: from-pod\n",
        ),
    );
    // command: replaces Entrypoint and drops Cmd.
    d.write_manifest(
        "cmd.yaml",
        &pod("cmd", "    command: [\"echo\", \"only-command\"]\n"),
    );
    for name in ["plain", "args", "cmd"] {
        d.wait_pod(name, "Succeeded", 20, |p| {
            (phase(p) == "Succeeded").then_some(())
        });
    }
    let plain = d.logs_of("plain", "main");
    assert_eq!(plain, "img-cmd img from-image\n65534\n65534\n/tmp\n");
    assert_eq!(d.logs_of("args", "main"), "args from-pod img\n/etc\n");
    assert_eq!(d.logs_of("cmd", "main"), "only-command\n");
}

#[test]
fn image_stop_signal_is_used() {
    require_root();
    let d = TestDaemon::start();
    let layout = image_variant(
        &d.dir.path().join("sig"),
        "localhost/variant:v1",
        json!({ "StopSignal": "SIGUSR1" }),
    );
    d.load(&layout);
    d.write_manifest(
        "sig.yaml",
        &pod(
            "sig",
            "    command: [\"sh\", \"-c\", \"trap 'echo got-usr1; exit 0' USR1; trap 'echo got-term' TERM; echo up; while true; do sleep 0.1; done\"]\n",
        ),
    );
    d.wait_pod("sig", "Running", 20, |p| {
        (phase(p) == "Running").then_some(())
    });
    wait_until(Duration::from_secs(5), "up", || {
        d.logs_of("sig", "main").contains("up").then_some(())
    })
    .unwrap();
    let t = Instant::now();
    let full = d.full_name("sig");
    let uid = d.pod("sig").unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    d.remove_manifest("sig.yaml");
    d.wait_gone("sig", 20);
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "stopped by its stop signal, not SIGKILL"
    );
    let lines = log_lines(&d.logs.join(format!("default_{full}_{uid}/main/0.log")));
    let msgs: Vec<&str> = lines.iter().map(|l| l.2.as_str()).collect();
    assert_eq!(msgs, ["up", "got-usr1"]);
}
