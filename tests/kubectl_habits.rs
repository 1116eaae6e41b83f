//! The CLI's kubectl habits on a live daemon: namespaces (`-n`, `-A`, `NS/NAME`, an
//! ambiguous name refused with its candidates, the API's `?namespace=`), `get`'s
//! selectors and output formats, and `logs`' container choice. The expected texts are
//! kubectl's formats (its `get -o name`, custom-columns, "No resources found in …
//! namespace.", "Defaulted container …").

use crate::common;

use common::*;

fn pod_in(namespace: &str, name: &str, labels: &str, containers: &[(&str, &str)]) -> String {
    let mut yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {namespace}\n  labels: {labels}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n"
    );
    for (container, says) in containers {
        yaml.push_str(&format!(
            "  - name: {container}\n    image: localhost/busybox:latest\n    imagePullPolicy: Never\n    command: [\"sh\", \"-c\", \"echo {says}; exec sleep 1000\"]\n"
        ));
    }
    yaml
}

fn text(out: &std::process::Output) -> (Option<i32>, String, String) {
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn namespaces_selectors_and_output_formats_as_kubectl() {
    assert!(require_root());
    let d = TestDaemon::start();
    d.write_manifest(
        "a.yaml",
        &pod_in("team-a", "dup", "{team: a}", &[("main", "from-a")]),
    );
    d.write_manifest(
        "b.yaml",
        &pod_in("team-b", "dup", "{team: b}", &[("main", "from-b")]),
    );
    d.write_manifest(
        "web.yaml",
        &pod_in(
            "default",
            "web",
            "{app: web}",
            &[("main", "main-says"), ("side", "side-says")],
        ),
    );
    let dup = d.full_name("dup");
    let web = d.full_name("web");
    wait_until(
        std::time::Duration::from_secs(60),
        "three pods running",
        || {
            let pods = d.pods();
            (pods.len() == 3 && pods.iter().all(|p| phase(p) == "Running")).then_some(())
        },
    )
    .unwrap_or_else(|| panic!("pods not running; log:\n{}", d.daemon_log()));
    // Each container has printed its line once it runs; wait for the logs to have them.
    wait_until(std::time::Duration::from_secs(10), "logs written", || {
        let a = text(&d.cli(&["logs", &format!("team-a/{dup}")])).1;
        let b = text(&d.cli(&["logs", &format!("team-b/{dup}")])).1;
        let w = text(&d.cli(&["logs", &web, "--all-containers"])).1;
        (!a.is_empty() && !b.is_empty() && w.lines().count() == 2).then_some(())
    })
    .expect("every container's line in its log");

    // -A: a NAMESPACE column first, every pod.
    let (code, out, _) = text(&d.cli(&[
        "get", "pods", "-A", "-o",
        "custom-columns=NAMESPACE:.metadata.namespace,NAME:.metadata.name,FIRST:.spec.containers[0].name",
    ]));
    assert_eq!(code, Some(0));
    let mut rows: Vec<&str> = out.lines().skip(1).collect();
    rows.sort();
    let w = dup.len().max(web.len()) + 3;
    assert_eq!(
        out.lines().next().unwrap(),
        format!("NAMESPACE   {:<w$}FIRST", "NAME")
    );
    assert_eq!(
        rows,
        [
            format!("default     {web:<w$}main"),
            format!("team-a      {dup:<w$}main"),
            format!("team-b      {dup:<w$}main"),
        ]
    );
    let (_, table, _) = text(&d.cli(&["get", "pods", "-A"]));
    assert!(table.starts_with("NAMESPACE   NAME"), "{table}");
    assert_eq!(table.lines().count(), 4, "{table}");

    // Without -n or -A: the default namespace only.
    let (_, names, _) = text(&d.cli(&["get", "pods", "-o", "name"]));
    assert_eq!(names, format!("pod/{web}\n"));
    let (_, names, _) = text(&d.cli(&["get", "pods", "-n", "team-b", "-o", "name"]));
    assert_eq!(names, format!("pod/{dup}\n"));
    let (code, out, err) = text(&d.cli(&["get", "pods", "-n", "nobody"]));
    assert_eq!((code, out.as_str()), (Some(0), ""));
    assert!(
        err.starts_with("No resources found in nobody namespace.\n"),
        "{err}"
    );
    assert!(
        err.contains("3 pods in other namespaces: default, team-a, team-b"),
        "{err}"
    );

    // -l and --show-labels.
    let (_, names, _) = text(&d.cli(&["get", "pods", "-A", "-l", "team", "-o", "name"]));
    assert_eq!(names, format!("pod/{dup}\npod/{dup}\n"));
    let (_, names, _) = text(&d.cli(&[
        "get",
        "pods",
        "-A",
        "-l",
        "team notin (a),!app",
        "-o",
        "name",
    ]));
    assert_eq!(names, format!("pod/{dup}\n"));
    let (_, table, _) = text(&d.cli(&["get", "pods", "--show-labels", "--no-headers"]));
    assert!(
        table.starts_with(&web) && table.trim_end().ends_with("app=web"),
        "{table}"
    );

    // A name in two namespaces: refused, the candidates listed; NS/NAME and -n pick one.
    let (code, _, err) = text(&d.cli(&["logs", &dup]));
    assert_eq!(code, Some(1));
    assert_eq!(
        err,
        format!(
            "error: pod name \"{dup}\" is used in 2 namespaces: team-a/{dup}, team-b/{dup}; name one as NAMESPACE/NAME or with -n NAMESPACE\n"
        )
    );
    let (code, _, err) = text(&d.cli(&["exec", &dup, "--", "true"]));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("is used in 2 namespaces"), "{err}");
    assert_eq!(
        text(&d.cli(&["logs", &format!("team-a/{dup}")])).1,
        "from-a\n"
    );
    assert_eq!(text(&d.cli(&["logs", "-n", "team-b", &dup])).1, "from-b\n");
    let (code, out, _) =
        text(&d.cli(&["exec", "-n", "team-b", &dup, "--", "cat", "/etc/hostname"]));
    assert_eq!((code, out.trim()), (Some(0), dup.as_str()));
    let (code, _, err) = text(&d.cli(&["logs", "-n", "team-c", &dup]));
    assert_eq!(code, Some(1));
    assert!(
        err.contains(&format!("pod \"{dup}\" not found in namespace \"team-c\"")),
        "{err}"
    );
    let (code, _, err) = text(&d.cli(&["logs", "-n", "team-b", &format!("team-a/{dup}")]));
    assert_eq!(code, Some(1));
    assert!(err.contains("but -n says \"team-b\""), "{err}");
    let (code, out, _) = text(&d.cli(&["describe", "pod", "-n", "team-a", &dup]));
    assert_eq!(code, Some(0));
    assert!(
        out.contains("Namespace:") && out.contains("team-a"),
        "{out}"
    );
    // get by name: one pod prints as the object itself.
    let (_, ns, _) = text(&d.cli(&[
        "get",
        "pods",
        &format!("team-b/{dup}"),
        "-o",
        "jsonpath={.kind} {.metadata.namespace}",
    ]));
    assert_eq!(ns, "Pod team-b");
    let (code, out, err) = text(&d.cli(&["get", "pods", &web, "nosuch", "-o", "name"]));
    assert_eq!((code, out), (Some(1), format!("pod/{web}\n")));
    assert!(err.contains("pod \"nosuch\" not found"), "{err}");

    // The API honours the namespace in both forms.
    let client = podhost::api::client::Client::new(&d.socket);
    let list: serde_json::Value = client.get_json("/pods?namespace=team-a").unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    assert_eq!(list["items"][0]["metadata"]["namespace"], "team-a");
    let pod: serde_json::Value = client
        .get_json(&format!("/pods/{dup}?namespace=team-b"))
        .unwrap();
    assert_eq!(pod["metadata"]["namespace"], "team-b");
    let pod: serde_json::Value = client
        .get_json(&format!("/namespaces/team-a/pods/{dup}"))
        .unwrap();
    assert_eq!(pod["metadata"]["labels"]["team"], "a");

    // describe node: the pods of every namespace, the pod network named.
    let (code, node, _) = text(&d.cli(&["describe", "node"]));
    assert_eq!(code, Some(0));
    assert!(
        node.starts_with("Name:") && node.lines().next().unwrap().ends_with(&d.node),
        "{node}"
    );
    assert!(node.contains("podhost.io/pod-network: "), "{node}");
    assert!(node.contains("(3 in total)"), "{node}");
    for ns in ["team-a", "team-b", "default"] {
        assert!(
            node.lines().any(|l| l.trim_start().starts_with(ns)),
            "{node}"
        );
    }
    let (code, _, err) = text(&d.cli(&["describe", "node", "elsewhere"]));
    assert_eq!(code, Some(1));
    assert!(err.contains("node \"elsewhere\" not found"), "{err}");

    // logs: the first container, said on stderr; every container with --prefix.
    let (code, out, err) = text(&d.cli(&["logs", &web]));
    assert_eq!((code, out.as_str()), (Some(0), "main-says\n"));
    assert_eq!(err, "Defaulted container \"main\" out of: main, side\n");
    let (_, out, err) = text(&d.cli(&["logs", &web, "--all-containers", "--prefix"]));
    assert_eq!(
        out,
        format!("[pod/{web}/main] main-says\n[pod/{web}/side] side-says\n")
    );
    assert_eq!(err, "");

    for f in ["a.yaml", "b.yaml", "web.yaml"] {
        d.remove_manifest(f);
    }
    wait_until(std::time::Duration::from_secs(40), "pods gone", || {
        d.pods().is_empty().then_some(())
    })
    .expect("the pods go with their manifests");

    // Their events outlive them (an hour), by namespace and by object.
    let (code, out, _) = text(&d.cli(&[
        "get",
        "events",
        "-n",
        "team-a",
        "--for",
        &format!("pod/{dup}"),
    ]));
    assert_eq!(code, Some(0));
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("LAST SEEN   TYPE"), "{out}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains(&format!("pod/{dup} ")) && l.contains("Started container main")),
        "{out}"
    );
    assert!(lines.iter().any(|l| l.contains("Killing")), "{out}");
    let (_, all, _) = text(&d.cli(&["get", "events", "-A", "--for", &format!("pod/{dup}")]));
    assert!(all.starts_with("NAMESPACE   LAST SEEN"), "{all}");
    for ns in ["team-a", "team-b"] {
        assert!(
            all.lines()
                .any(|l| l.starts_with(ns) && l.contains("Started")),
            "{all}"
        );
    }
    let (_, defaults, _) = text(&d.cli(&["get", "events"]));
    assert!(!defaults.contains(&format!("pod/{dup}")), "{defaults}");
    assert!(defaults.contains("Started container side"), "{defaults}");
}
