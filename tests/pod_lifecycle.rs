//! The rest of a pod's lifecycle with the real daemon: init containers one by one,
//! sidecars started first and stopped last, postStart hooks, termination messages and
//! activeDeadlineSeconds (kubelet-semantics §1, §3).

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use serde_json::Value;

/// A busybox container entry (YAML, under `containers:` or `initContainers:`).
fn container(name: &str, command: &str, extra: &str) -> String {
    format!(
        "  - name: {name}\n    image: localhost/busybox:latest\n    imagePullPolicy: Never\n    command: [\"sh\", \"-c\", {cmd}]\n{extra}",
        cmd = serde_json::to_string(command).unwrap()
    )
}

fn manifest(name: &str, spec_extra: &str, init: &[String], containers: &[String]) -> String {
    let init = if init.is_empty() {
        String::new()
    } else {
        format!("  initContainers:\n{}", init.concat())
    };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n{spec_extra}{init}  containers:\n{}",
        containers.concat()
    )
}

fn init_status<'a>(pod: &'a Value, name: &str) -> &'a Value {
    pod["status"]["initContainerStatuses"]
        .as_array()
        .and_then(|l| l.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no init status {name} in {pod}"))
}

fn condition(pod: &Value, kind: &str) -> String {
    pod["status"]["conditions"]
        .as_array()
        .and_then(|l| l.iter().find(|c| c["type"] == kind))
        .map(|c| c["status"].as_str().unwrap_or("").to_string())
        .unwrap_or_default()
}

fn first_line_time(
    d: &TestDaemon,
    pod: &Value,
    container: &str,
    msg: &str,
) -> chrono::DateTime<chrono::Utc> {
    let uid = pod["metadata"]["uid"].as_str().unwrap();
    let name = pod["metadata"]["name"].as_str().unwrap();
    let path = d
        .logs
        .join(format!("default_{name}_{uid}/{container}/0.log"));
    // A container shown Running may not have had its first line logged yet.
    wait_until(std::time::Duration::from_secs(10), "the log line", || {
        log_lines(&path).iter().find(|l| l.2 == msg).map(|l| l.0)
    })
    .unwrap_or_else(|| panic!("no {msg:?} in {container}'s log: {:?}", log_lines(&path)))
}

#[test]
fn init_containers_run_in_order_before_the_app() {
    require_root();
    let d = TestDaemon::start();
    d.write_manifest(
        "init.yaml",
        &manifest(
            "init",
            "",
            &[
                container("one", "echo one; sleep 1", ""),
                container("two", "echo two", ""),
            ],
            &[container("app", "echo app; exec sleep 1000", "")],
        ),
    );
    let pod = d.wait_pod("init", "app running", 30, |p| {
        container_status(p, "app")?["state"]["running"]
            .is_object()
            .then(|| p.clone())
    });
    for name in ["one", "two"] {
        let s = init_status(&pod, name);
        assert_eq!(s["state"]["terminated"]["reason"], "Completed", "{s}");
        assert_eq!(s["ready"], true);
    }
    assert_eq!(condition(&pod, "Initialized"), "True");
    assert_eq!(phase(&pod), "Running");
    let one = first_line_time(&d, &pod, "one", "one");
    let two = first_line_time(&d, &pod, "two", "two");
    let app = first_line_time(&d, &pod, "app", "app");
    assert!(
        one + chrono::Duration::milliseconds(900) <= two,
        "two ran after one ended"
    );
    assert!(two <= app, "the app after the last init container");
    let out = d.cli(&["get", "pods"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("Running"));
}

#[test]
fn a_failing_init_container_fails_the_pod_under_never_and_crash_loops_otherwise() {
    require_root();
    let d = TestDaemon::start();
    d.write_manifest(
        "never.yaml",
        &manifest(
            "never",
            "  restartPolicy: Never\n",
            &[container("setup", "exit 3", "")],
            &[container("app", "exec sleep 1000", "")],
        ),
    );
    d.write_manifest(
        "loop.yaml",
        &manifest(
            "loop",
            "",
            &[container("setup", "exit 3", "")],
            &[container("app", "exec sleep 1000", "")],
        ),
    );
    let pod = d.wait_pod("never", "Failed", 30, |p| {
        (phase(p) == "Failed").then(|| p.clone())
    });
    assert_eq!(
        init_status(&pod, "setup")["state"]["terminated"]["exitCode"],
        3
    );
    assert_eq!(
        container_status(&pod, "app").unwrap()["state"]["waiting"]["reason"],
        "PodInitializing"
    );
    let pod = d.wait_pod("loop", "init restarted twice", 30, |p| {
        let s = init_status(p, "setup");
        (s["restartCount"].as_i64()? >= 2).then(|| p.clone())
    });
    assert_eq!(phase(&pod), "Pending");
    assert!(container_status(&pod, "app").unwrap()["state"]["running"].is_null());
    let out = String::from_utf8_lossy(&d.cli(&["get", "pods"]).stdout).into_owned();
    let line = out
        .lines()
        .find(|l| l.contains(&d.full_name("loop")))
        .unwrap()
        .to_string();
    // Init:CrashLoopBackOff or Init:Error, or Init:0/1 while a restart runs.
    assert!(line.contains("Init:"), "{line}");
}

#[test]
fn a_sidecar_starts_before_the_next_and_stops_after_the_app() {
    require_root();
    let d = TestDaemon::start();
    let on_term = |name: &str| {
        format!(
            "trap 'echo {name}-term; sleep 1; exit 0' TERM; echo {name}-up; while true; do sleep 0.1; done"
        )
    };
    d.write_manifest(
        "sidecar.yaml",
        &manifest(
            "sidecar",
            "  terminationGracePeriodSeconds: 20\n",
            &[container(
                "proxy",
                &on_term("proxy"),
                "    restartPolicy: Always\n",
            )],
            &[container("app", &on_term("app"), "")],
        ),
    );
    let pod = d.wait_pod("sidecar", "both running", 30, |p| {
        container_status(p, "app")?["state"]["running"]
            .is_object()
            .then(|| p.clone())
    });
    assert_eq!(init_status(&pod, "proxy")["started"], true);
    assert!(
        first_line_time(&d, &pod, "proxy", "proxy-up")
            <= first_line_time(&d, &pod, "app", "app-up")
    );
    let out = String::from_utf8_lossy(&d.cli(&["get", "pods"]).stdout).into_owned();
    assert!(out.contains("2/2"), "the sidecar counts in READY: {out}");
    d.remove_manifest("sidecar.yaml");
    d.wait_gone("sidecar", 30);
    let uid = pod["metadata"]["uid"].as_str().unwrap();
    let name = pod["metadata"]["name"].as_str().unwrap();
    let log = |c: &str| log_lines(&d.logs.join(format!("default_{name}_{uid}/{c}/0.log")));
    let at = |c: &str, msg: &str| {
        log(c)
            .iter()
            .find(|l| l.2 == msg)
            .unwrap_or_else(|| panic!("{c}: {msg}"))
            .0
    };
    let app_term = at("app", "app-term");
    let proxy_term = at("proxy", "proxy-term");
    assert!(
        proxy_term >= app_term + chrono::Duration::milliseconds(900),
        "the sidecar got SIGTERM after the app exited (app {app_term}, proxy {proxy_term})"
    );
}

#[test]
fn post_start_runs_before_running_and_a_failing_one_restarts_the_container() {
    require_root();
    let d = TestDaemon::start();
    let hook = |cmd: &str| {
        format!(
            "    lifecycle:\n      postStart:\n        exec:\n          command: [\"sh\", \"-c\", {}]\n",
            serde_json::to_string(cmd).unwrap()
        )
    };
    d.write_manifest(
        "good.yaml",
        &manifest(
            "good",
            "",
            &[],
            &[container(
                "app",
                "exec sleep 1000",
                &hook("sleep 1; echo hooked > /tmp/mark"),
            )],
        ),
    );
    d.write_manifest(
        "bad.yaml",
        // `sleep` as the container's PID 1 ignores SIGTERM: without a short grace the
        // kill after the failed hook would wait the default 30 s for its SIGKILL.
        &manifest(
            "bad",
            "  terminationGracePeriodSeconds: 2\n",
            &[],
            &[container("app", "exec sleep 1000", &hook("exit 7"))],
        ),
    );
    let pod = d.wait_pod("good", "running", 30, |p| {
        container_status(p, "app")?["state"]["running"]
            .is_object()
            .then(|| p.clone())
    });
    assert_eq!(container_status(&pod, "app").unwrap()["restartCount"], 0);
    let out = d.cli(&["exec", &d.full_name("good"), "--", "cat", "/tmp/mark"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "hooked",
        "Running only after the hook"
    );
    d.wait_pod("bad", "restarted", 30, |p| {
        (container_status(p, "app")?["restartCount"].as_i64()? >= 1).then_some(())
    });
    let events = d.pod_events("bad");
    let reasons: Vec<&str> = events.iter().filter_map(|e| e["reason"].as_str()).collect();
    assert!(reasons.contains(&"FailedPostStartHook"), "{events:?}");
    assert!(reasons.contains(&"Killing"), "{events:?}");
}

#[test]
fn termination_messages_from_the_file_or_the_log() {
    require_root();
    let d = TestDaemon::start();
    d.write_manifest(
        "file.yaml",
        &manifest(
            "file",
            "  restartPolicy: Never\n",
            &[],
            &[container(
                "app",
                "echo 'disk full' > /dev/termination-log; exit 3",
                "",
            )],
        ),
    );
    d.write_manifest(
        "custom.yaml",
        &manifest(
            "custom",
            "  restartPolicy: Never\n",
            &[],
            &[container(
                "app",
                "echo done > /tmp/msg; exit 0",
                "    terminationMessagePath: /tmp/msg\n",
            )],
        ),
    );
    d.write_manifest(
        "logs.yaml",
        &manifest(
            "logs",
            "  restartPolicy: Never\n",
            &[],
            &[container(
                "app",
                "echo first; echo 'last words'; exit 1",
                "    terminationMessagePolicy: FallbackToLogsOnError\n",
            )],
        ),
    );
    // A last line without a newline comes back without one (the kubelet's reading of
    // containerd's partial line; Kubernetes' conformance test expects exactly "DONE").
    d.write_manifest(
        "partial.yaml",
        &manifest(
            "partial",
            "  restartPolicy: Never\n",
            &[],
            &[container(
                "app",
                "printf DONE; exit 1",
                "    terminationMessagePolicy: FallbackToLogsOnError\n",
            )],
        ),
    );
    let message = |name: &str| {
        d.wait_pod(name, "terminated", 30, |p| {
            let t = &container_status(p, "app")?["state"]["terminated"];
            t.is_object()
                .then(|| t["message"].as_str().unwrap_or("").to_string())
        })
    };
    assert_eq!(message("file"), "disk full\n");
    assert_eq!(message("custom"), "done\n");
    assert_eq!(message("logs"), "first\nlast words\n");
    assert_eq!(message("partial"), "DONE");
}

#[test]
fn active_deadline_fails_the_pod_with_deadline_exceeded() {
    require_root();
    let d = TestDaemon::start();
    d.write_manifest(
        "deadline.yaml",
        &manifest(
            "deadline",
            "  activeDeadlineSeconds: 2\n  terminationGracePeriodSeconds: 3\n",
            &[],
            &[container("app", "exec sleep 1000", "")],
        ),
    );
    let pod = d.wait_pod("deadline", "failed", 30, |p| {
        let s = container_status(p, "app")?;
        (phase(p) == "Failed" && s["state"]["terminated"].is_object()).then(|| p.clone())
    });
    assert_eq!(pod["status"]["reason"], "DeadlineExceeded");
    assert_eq!(
        pod["status"]["message"],
        "Pod was active on the node longer than the specified deadline"
    );
    std::thread::sleep(std::time::Duration::from_secs(2));
    let pod = d.pod("deadline").unwrap();
    assert_eq!(
        container_status(&pod, "app").unwrap()["restartCount"],
        0,
        "never restarted"
    );
}

#[test]
fn liveness_failure_kills_with_the_probe_grace_and_readiness_drives_ready() {
    require_root();
    let d = TestDaemon::start();
    // The app ignores SIGTERM: only the probe's 2 s grace (not the pod's 60 s) ends it.
    let app = container(
        "app",
        "trap '' TERM; touch /tmp/alive /tmp/ready; while true; do sleep 0.2; done",
        "    livenessProbe:\n      exec: {command: [test, -f, /tmp/alive]}\n      periodSeconds: 1\n      failureThreshold: 1\n      terminationGracePeriodSeconds: 2\n    readinessProbe:\n      exec: {command: [test, -f, /tmp/ready]}\n      periodSeconds: 1\n",
    );
    d.write_manifest(
        "live.yaml",
        &manifest("live", "  terminationGracePeriodSeconds: 60\n", &[], &[app]),
    );
    d.wait_pod("live", "ready", 30, |p| {
        (container_status(p, "app")?["ready"] == true && condition(p, "Ready") == "True")
            .then_some(())
    });
    let pod = d.full_name("live");
    let sh = |cmd: &str| d.cli(&["exec", &pod, "--", "sh", "-c", cmd]);
    sh("rm /tmp/ready");
    d.wait_pod("live", "not ready", 30, |p| {
        (container_status(p, "app")?["ready"] == false && condition(p, "Ready") == "False")
            .then_some(())
    });
    let killed_at = std::time::Instant::now();
    sh("rm /tmp/alive");
    d.wait_pod("live", "restarted", 30, |p| {
        (container_status(p, "app")?["restartCount"].as_i64()? >= 1).then_some(())
    });
    assert!(
        killed_at.elapsed() < std::time::Duration::from_secs(20),
        "killed with the probe's grace, not the pod's 60 s"
    );
    let events = d.pod_events("live");
    let has = |reason: &str, text: &str| {
        events
            .iter()
            .any(|e| e["reason"] == reason && e["message"].as_str().unwrap_or("").contains(text))
    };
    assert!(has("Unhealthy", "Liveness probe failed"), "{events:?}");
    assert!(has("Unhealthy", "Readiness probe failed"), "{events:?}");
    assert!(
        has(
            "Killing",
            "Container app failed liveness probe, will be restarted"
        ),
        "{events:?}"
    );
}

#[test]
fn an_exec_probe_that_times_out_fails() {
    require_root();
    let d = TestDaemon::start();
    let app = container(
        "app",
        "exec sleep 1000",
        "    startupProbe:\n      exec: {command: [sleep, '37']}\n      timeoutSeconds: 1\n      periodSeconds: 1\n      failureThreshold: 2\n",
    );
    d.write_manifest(
        "slow.yaml",
        &manifest("slow", "  terminationGracePeriodSeconds: 2\n", &[], &[app]),
    );
    d.wait_pod("slow", "restarted", 40, |p| {
        (container_status(p, "app")?["restartCount"].as_i64()? >= 1).then_some(())
    });
    let events = d.pod_events("slow");
    assert!(
        events.iter().any(|e| e["reason"] == "Unhealthy"
            && e["message"].as_str().unwrap_or("").contains("timed out")),
        "{events:?}"
    );
    assert!(
        TestDaemon::pids_running("sleep 37").is_empty()
            || wait_until(
                std::time::Duration::from_secs(10),
                "probe commands gone",
                || {
                    TestDaemon::pids_running("sleep 37")
                        .is_empty()
                        .then_some(())
                }
            )
            .is_some(),
        "a timed-out probe's command was left running"
    );
}

#[test]
fn http_get_hooks_reach_the_pod() {
    require_root();
    let d = TestDaemon::start();
    // The server is a sidecar whose startupProbe gates the app's start: the app's
    // postStart then never races the server's listen (a refused hook would restart the
    // app, which a loaded machine turned into a failure on every attempt).
    // busybox httpd -vv logs each request on stderr, that is in the sidecar's log.
    let web = container(
        "web",
        "mkdir -p /www && echo ok > /www/started && echo ok > /www/stopping && exec httpd -f -vv -p 18080 -h /www",
        "    restartPolicy: Always\n    startupProbe:\n      tcpSocket: {port: 18080}\n      periodSeconds: 1\n      failureThreshold: 30\n",
    );
    let app = container(
        "app",
        "exec sleep 1000",
        "    lifecycle:\n      postStart:\n        httpGet: {path: /started, port: 18080}\n      preStop:\n        httpGet: {path: /stopping, port: 18080}\n",
    );
    d.write_manifest(
        "hooks.yaml",
        &manifest(
            "hooks",
            "  terminationGracePeriodSeconds: 2\n",
            &[web],
            &[app],
        ),
    );
    let pod = d.wait_pod("hooks", "running", 60, |p| {
        container_status(p, "app")?["state"]["running"]
            .is_object()
            .then(|| p.clone())
    });
    let uid = pod["metadata"]["uid"].as_str().unwrap().to_string();
    let name = pod["metadata"]["name"].as_str().unwrap().to_string();
    let log_dir = d.logs.join(format!("default_{name}_{uid}/web"));
    let all_lines = || {
        let mut lines = Vec::new();
        for entry in std::fs::read_dir(&log_dir).into_iter().flatten().flatten() {
            lines.extend(log_lines(&entry.path()));
        }
        lines
    };
    let logged = |path: &str| {
        all_lines()
            .iter()
            .any(|l| l.2.contains(&format!("GET {path}")) || l.2.contains(&format!("url:{path}")))
    };
    // The container is Running only after its postStart returned: the request is in
    // the server's log (written a moment after it answered).
    let started = wait_until(
        std::time::Duration::from_secs(10),
        "postStart request",
        || logged("/started").then_some(()),
    );
    assert!(
        started.is_some(),
        "no postStart request in {:?}",
        all_lines()
    );
    let app_status = container_status(&pod, "app").unwrap();
    assert_eq!(
        app_status["restartCount"], 0,
        "the postStart hook failed although the server was up: {pod}"
    );
    d.remove_manifest("hooks.yaml");
    d.wait_gone("hooks", 30);
    // The sidecar stops after the app, so the app's preStop reached it.
    assert!(
        logged("/stopping"),
        "no preStop request logged: {:?}",
        all_lines()
    );
}
