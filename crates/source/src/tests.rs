//! Tests of the source through its public API, on real files in temp directories.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tempfile::TempDir;

use super::*;

const NODE: &str = "Node-1";

const WEB: &str = "\
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: nginx
    image: nginx:1.27
    ports: [{containerPort: 80}]
  - name: sidecar
    image: busybox
    command: [sleep, infinity]
";

/// Writes a file atomically (temp + rename), as config tools do: a periodic rescan
/// racing a plain write could see the file half-written (the manager keeps the last good
/// version of such a file; the source itself reports what it reads).
fn write(dir: &Path, name: &str, content: &str) -> PathBuf {
    let p = dir.join(name);
    let tmp = dir.join(format!(".{name}.tmp"));
    fs::write(&tmp, content).unwrap();
    fs::rename(&tmp, &p).unwrap();
    p
}

fn load_str(content: &str) -> (TempDir, Result<StaticPod, ManifestError>) {
    let d = TempDir::new().unwrap();
    let p = write(d.path(), "web.yaml", content);
    let r = load_manifest(&p, NODE);
    (d, r)
}

fn err_of(content: &str) -> (String, String) {
    let (d, r) = load_str(content);
    let e = r.expect_err("manifest should be rejected");
    let file = d.path().join("web.yaml").display().to_string();
    (e.to_string(), file)
}

#[test]
fn identity_name_namespace_annotations_defaults() {
    let (_d, r) = load_str(WEB);
    let sp = r.unwrap();
    assert_eq!(sp.name, "web-node-1");
    assert_eq!(sp.namespace, "default");
    assert_eq!(sp.uid.len(), 32);
    assert!(sp.warnings.is_empty(), "{:?}", sp.warnings);

    let pod = &sp.pod;
    assert_eq!(pod.metadata.name.as_deref(), Some("web-node-1"));
    assert_eq!(pod.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(pod.metadata.uid.as_deref(), Some(sp.uid.as_str()));
    let ann = pod.metadata.annotations.as_ref().unwrap();
    assert_eq!(ann[ANNOTATION_CONFIG_HASH], sp.uid);
    assert_eq!(ann[ANNOTATION_CONFIG_SOURCE], "file");
    let seen = chrono::DateTime::parse_from_rfc3339(&ann[ANNOTATION_CONFIG_SEEN]).unwrap();
    assert!((chrono::Utc::now() - seen.to_utc()).num_seconds().abs() < 60);
    assert_eq!(pod.metadata.labels.as_ref().unwrap()["app"], "web");

    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.node_name.as_deref(), Some(NODE));
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
    assert_eq!(spec.termination_grace_period_seconds, Some(30));
    assert_eq!(spec.dns_policy.as_deref(), Some("ClusterFirst"));
    let tol = spec.tolerations.as_ref().unwrap();
    assert!(tol.iter().any(|t| t.operator.as_deref() == Some("Exists")
        && t.effect.as_deref() == Some("NoExecute")
        && t.key.is_none()));
    let [nginx, sidecar] = &spec.containers[..] else {
        panic!("two containers expected")
    };
    assert_eq!(nginx.image_pull_policy.as_deref(), Some("IfNotPresent"));
    assert_eq!(sidecar.image_pull_policy.as_deref(), Some("Always"));
    for c in [nginx, sidecar] {
        assert_eq!(
            c.termination_message_path.as_deref(),
            Some("/dev/termination-log")
        );
        assert_eq!(c.termination_message_policy.as_deref(), Some("File"));
    }
    assert_eq!(
        nginx.ports.as_ref().unwrap()[0].protocol.as_deref(),
        Some("TCP")
    );
    assert_eq!(
        pod.status.as_ref().unwrap().phase.as_deref(),
        Some("Pending")
    );
}

#[test]
fn explicit_values_are_kept() {
    let y = WEB.replace(
        "spec:\n",
        "  namespace: kube-system\nspec:\n  restartPolicy: Never\n  terminationGracePeriodSeconds: 5\n",
    )
    .replace("image: busybox\n", "image: busybox\n    imagePullPolicy: Never\n");
    let (_d, r) = load_str(&y);
    let sp = r.unwrap();
    assert_eq!(sp.namespace, "kube-system");
    let spec = sp.pod.spec.clone().unwrap();
    assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
    assert_eq!(spec.termination_grace_period_seconds, Some(5));
    assert_eq!(
        spec.containers[1].image_pull_policy.as_deref(),
        Some("Never")
    );
}

#[test]
fn uid_is_stable_and_changes_with_content_node_and_path() {
    let d = TempDir::new().unwrap();
    let a = write(d.path(), "a.yaml", WEB);
    let b = write(d.path(), "b.yaml", WEB);
    let uid = load_manifest(&a, NODE).unwrap().uid;
    // Same content, node and path; the `seen` time differs but does not count.
    std::thread::sleep(Duration::from_millis(2));
    assert_eq!(load_manifest(&a, NODE).unwrap().uid, uid);
    // Formatting and comments do not change the pod.
    write(
        d.path(),
        "a.yaml",
        &format!(
            "# a comment\n{}",
            WEB.replace("{app: web}", "\n    app: web")
        ),
    );
    assert_eq!(load_manifest(&a, NODE).unwrap().uid, uid);
    // Any change of the pod does.
    write(
        d.path(),
        "a.yaml",
        &WEB.replace("sleep, infinity", "sleep, \"100\""),
    );
    assert_ne!(load_manifest(&a, NODE).unwrap().uid, uid);
    write(d.path(), "a.yaml", WEB);
    assert_ne!(load_manifest(&a, "node-2").unwrap().uid, uid);
    assert_ne!(load_manifest(&b, NODE).unwrap().uid, uid);
}

#[test]
fn json_manifest_is_accepted() {
    let json = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},
        "spec":{"containers":[{"name":"c","image":"busybox:1"}]}}"#;
    let (_d, r) = load_str(json);
    assert_eq!(r.unwrap().name, "j-node-1");
}

#[test]
fn missing_image_names_file_and_field() {
    let (e, file) = err_of(&WEB.replace("    image: busybox\n", ""));
    assert_eq!(
        e,
        format!(
            "manifest {file}: spec.containers[1]: field \"image\" is required; add the image to run"
        )
    );
}

#[test]
fn missing_container_name() {
    let (e, file) = err_of(&WEB.replace("  - name: sidecar\n    image", "  - image"));
    assert!(
        e.starts_with(&format!(
            "manifest {file}: spec.containers[1]: field \"name\" is required"
        )),
        "{e}"
    );
}

#[test]
fn missing_metadata_name() {
    let (e, file) = err_of(&WEB.replace("  name: web\n", ""));
    assert_eq!(
        e,
        format!("manifest {file}: metadata.name: field is required; give the pod a name")
    );
    let (e, _) = err_of(&WEB.replace("  name: web\n", "  name: \"\"\n"));
    assert!(e.contains("metadata.name: field is required"), "{e}");
}

#[test]
fn no_containers() {
    let y = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: []}\n";
    let (e, file) = err_of(y);
    assert!(
        e.starts_with(&format!(
            "manifest {file}: spec.containers: at least one container is required"
        )),
        "{e}"
    );
    let (e, _) = err_of("apiVersion: v1\nkind: Pod\nmetadata: {name: web}\n");
    assert!(e.contains("spec.containers: at least one"), "{e}");
}

#[test]
fn duplicate_container_names() {
    let (e, file) = err_of(&WEB.replace("name: sidecar", "name: nginx"));
    assert_eq!(
        e,
        format!(
            "manifest {file}: spec.containers[1].name: duplicate container name \"nginx\" (also used by spec.containers[0]); give every container a unique name"
        )
    );
}

#[test]
fn unknown_field_typo_in_container() {
    let (e, file) = err_of(&WEB.replace("command:", "comand:"));
    assert!(
        e.starts_with(&format!(
            "manifest {file}: spec.containers[1].comand: unknown field (did you mean \"command\"?);"
        )),
        "{e}"
    );
}

#[test]
fn null_values_are_not_unknown_fields() {
    let (_d, r) = load_str(&WEB.replace(
        "  labels:",
        "  creationTimestamp: null\n  bogus: null\n  labels:",
    ));
    r.unwrap();
}

#[test]
fn wrong_kind_multi_doc_and_api_version() {
    let (e, file) = err_of("apiVersion: v1\nkind: PodList\nitems: []\n");
    assert!(
        e.starts_with(&format!(
            "manifest {file}: expected kind Pod, found kind PodList"
        )),
        "{e}"
    );
    let (e, _) = err_of(&format!(
        "{WEB}---\n{}",
        WEB.replace("name: web", "name: web2")
    ));
    assert!(
        e.contains("holds 2 YAML documents, expected kind Pod"),
        "{e}"
    );
    let (e, _) = err_of(&WEB.replace("apiVersion: v1", "apiVersion: v2"));
    assert!(
        e.contains("apiVersion: expected \"v1\", found \"v2\""),
        "{e}"
    );
    let (e, _) = err_of("apiVersion: apps/v1\nkind: Deployment\n");
    assert!(
        e.contains("expected kind Pod, found kind Deployment"),
        "{e}"
    );
}

#[test]
fn invalid_yaml() {
    let (e, file) = err_of("apiVersion: v1\nkind: Pod\nmetadata:\n  name: [web\n");
    assert!(
        e.starts_with(&format!("manifest {file}: invalid YAML")),
        "{e}"
    );
}

#[test]
fn invalid_names_and_enums() {
    let (e, _) = err_of(&WEB.replace("name: web", "name: ../etc"));
    assert!(e.contains("metadata.name: invalid value \"../etc\""), "{e}");
    let (e, _) = err_of(&WEB.replace("name: nginx", "name: Nginx"));
    assert!(
        e.contains("spec.containers[0].name: invalid value \"Nginx\""),
        "{e}"
    );
    let (e, _) = err_of(&WEB.replace("spec:\n", "spec:\n  restartPolicy: Sometimes\n"));
    assert!(
        e.contains("spec.restartPolicy: invalid value \"Sometimes\": must be one of Always, OnFailure, Never"),
        "{e}"
    );
}

#[test]
fn size_limit() {
    let d = TempDir::new().unwrap();
    let p = d.path().join("big.yaml");
    let mut content = WEB.to_string();
    content.push('#');
    content.push_str(&"x".repeat(usize::try_from(MAX_MANIFEST_BYTES).unwrap()));
    content.push('\n');
    fs::write(&p, content).unwrap();
    let e = load_manifest(&p, NODE).unwrap_err();
    assert!(matches!(e, ManifestError::TooLarge { .. }), "{e}");
    assert!(e.to_string().contains(&p.display().to_string()), "{e}");
    assert!(
        e.to_string()
            .contains("more than the limit of 10485760 bytes"),
        "{e}"
    );

    // Exactly at the limit is accepted.
    let pad = usize::try_from(MAX_MANIFEST_BYTES).unwrap() - WEB.len() - 2;
    fs::write(&p, format!("{WEB}#{}\n", "x".repeat(pad))).unwrap();
    assert_eq!(fs::metadata(&p).unwrap().len(), MAX_MANIFEST_BYTES);
    load_manifest(&p, NODE).unwrap();
}

#[test]
fn warnings_for_unhonoured_fields() {
    let y = WEB
        .replace(
            "    ports: [{containerPort: 80}]\n",
            "    ports: [{containerPort: 80}]\n    livenessProbe: {httpGet: {port: 80}}\n    resizePolicy: [{resourceName: cpu, restartPolicy: NotRequired}]\n    env:\n    - {name: A, value: a}\n    - name: B\n      valueFrom: {fieldRef: {fieldPath: metadata.name}}\n",
        )
        .replace("spec:\n", "spec:\n  readinessGates: [{conditionType: example.com/ready}]\n");
    let (_d, r) = load_str(&y);
    let sp = r.unwrap();
    assert_eq!(
        sp.warnings,
        vec![
            "spec.containers[0].resizePolicy is ignored: a static pod is never resized in place (a changed manifest replaces the pod): honoured for pods of the API server (pods/resize), not for static pods",
            "spec.readinessGates is ignored: a readiness gate's condition is written through the API server: honoured for pods of the API server, not for static pods",
        ]
    );
    // Warned fields are still kept in the pod (for status and future use).
    assert!(sp.pod.spec.clone().unwrap().readiness_gates.is_some());
}

#[test]
fn user_uid_is_replaced_with_a_warning() {
    let (_d, r) = load_str(&WEB.replace("  name: web\n", "  name: web\n  uid: fixed\n"));
    let sp = r.unwrap();
    assert_ne!(sp.uid, "fixed");
    assert_eq!(sp.pod.metadata.uid.as_deref(), Some(sp.uid.as_str()));
    assert_eq!(sp.warnings.len(), 1, "{:?}", sp.warnings);
    assert!(sp.warnings[0].starts_with("metadata.uid \"fixed\" is replaced"));
}

#[test]
fn honoured_fields_list_is_exported() {
    assert!(honoured_fields().any(|f| f == "spec.containers[*].image"));
    assert!(honoured_fields().any(|f| f.contains("livenessProbe")));
    assert!(!honoured_fields().any(|f| f.contains("resizePolicy")));
}

// ---- scan_dir ----

#[test]
fn scan_skips_dotfiles_sorts_and_reports_subdirs() {
    let d = TempDir::new().unwrap();
    write(d.path(), "b.yaml", &WEB.replace("name: web", "name: bbb"));
    write(
        d.path(),
        "a.manifest",
        &WEB.replace("name: web", "name: aaa"),
    );
    write(
        d.path(),
        ".hidden.yaml",
        &WEB.replace("name: web", "name: hidden"),
    );
    write(d.path(), ".swp", "garbage: [");
    write(d.path(), "c.txt", "not a pod");
    fs::create_dir(d.path().join("sub")).unwrap();
    fs::create_dir(d.path().join(".git")).unwrap();

    let r = scan_dir(d.path(), NODE);
    let names: Vec<_> = r.pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["aaa-node-1", "bbb-node-1"]);
    assert_eq!(r.errors.len(), 2, "{:?}", r.errors);
    assert!(matches!(r.errors[0], ManifestError::WrongKind { .. }));
    assert!(r.errors[0].path().ends_with("c.txt"));
    assert!(matches!(r.errors[1], ManifestError::Subdirectory { .. }));
    assert!(r.errors[1].to_string().contains("sub: is a directory"));
}

#[test]
fn scan_duplicate_pod_names_keep_the_first_file() {
    let d = TempDir::new().unwrap();
    write(d.path(), "20-web.yaml", &WEB.replace("sleep", "sleepy"));
    write(d.path(), "10-web.yaml", WEB);
    let r = scan_dir(d.path(), NODE);
    assert_eq!(r.pods.len(), 1);
    assert!(r.pods[0].path.ends_with("10-web.yaml"));
    assert_eq!(r.errors.len(), 1);
    let e = r.errors[0].to_string();
    assert!(
        matches!(r.errors[0], ManifestError::DuplicatePod { .. }),
        "{e}"
    );
    assert!(
        e.contains("20-web.yaml: pod default/web-node-1 is already defined by"),
        "{e}"
    );
    assert!(e.contains("10-web.yaml"), "{e}");
    // Same name in another namespace is a different pod.
    write(
        d.path(),
        "20-web.yaml",
        &WEB.replace("  name: web\n", "  name: web\n  namespace: other\n"),
    );
    let r = scan_dir(d.path(), NODE);
    assert_eq!(r.pods.len(), 2);
    assert!(r.errors.is_empty());
}

#[test]
fn scan_missing_dir() {
    let d = TempDir::new().unwrap();
    let missing = d.path().join("nope");
    let r = scan_dir(&missing, NODE);
    assert!(r.pods.is_empty());
    assert_eq!(r.errors.len(), 1);
    assert!(matches!(r.errors[0], ManifestError::DirMissing { .. }));
    assert!(r.errors[0].to_string().contains("nope: does not exist"));
}

#[test]
fn scan_bad_file_does_not_hide_good_ones() {
    let d = TempDir::new().unwrap();
    write(d.path(), "a.yaml", "apiVersion: v1\nkind: Pod\n");
    write(d.path(), "b.yaml", WEB);
    let r = scan_dir(d.path(), NODE);
    assert_eq!(r.pods.len(), 1);
    assert_eq!(r.errors.len(), 1);
    assert!(matches!(r.errors[0], ManifestError::MissingName { .. }));
}

// ---- watch ----

async fn next(rx: &mut tokio::sync::mpsc::Receiver<ScanResult>, within: Duration) -> ScanResult {
    tokio::time::timeout(within, rx.recv())
        .await
        .expect("no scan arrived in time")
        .expect("watcher stopped")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_reports_add_edit_delete() {
    let d = TempDir::new().unwrap();
    let dir = d.path().to_path_buf();
    let mut rx = watch(dir.clone(), NODE.to_string(), Duration::from_secs(3600));
    let first = next(&mut rx, Duration::from_secs(2)).await;
    assert!(first.pods.is_empty() && first.errors.is_empty());

    // Write atomically (temp dotfile + rename), as editors and config tools do.
    let put = |content: &str| {
        let tmp = dir.join(".web.yaml.tmp");
        fs::write(&tmp, content).unwrap();
        fs::rename(&tmp, dir.join("web.yaml")).unwrap();
    };
    put(WEB);
    let added = next(&mut rx, Duration::from_secs(2)).await;
    assert_eq!(added.pods.len(), 1);
    let uid1 = added.pods[0].uid.clone();

    // In-place edit (CLOSE_WRITE).
    fs::write(dir.join("web.yaml"), WEB.replace("1.27", "1.28")).unwrap();
    let edited = next(&mut rx, Duration::from_secs(2)).await;
    assert_eq!(edited.pods.len(), 1);
    assert_ne!(edited.pods[0].uid, uid1);

    fs::remove_file(dir.join("web.yaml")).unwrap();
    let removed = next(&mut rx, Duration::from_secs(2)).await;
    assert!(removed.pods.is_empty());
    assert!(removed.errors.is_empty());
}

/// A manifest created and written in several steps (no temp file) is read once it is
/// closed: the short quiet time does not cut the write in half, which would report a
/// broken manifest (and, for a pod already running, remove it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_waits_for_a_created_file_to_be_closed() {
    use std::io::Write;
    let d = TempDir::new().unwrap();
    let dir = d.path().to_path_buf();
    let mut rx = watch(dir.clone(), NODE.to_string(), Duration::from_secs(3600));
    let first = next(&mut rx, Duration::from_secs(2)).await;
    assert!(first.pods.is_empty() && first.errors.is_empty());

    let (head, tail) = WEB.split_at(WEB.len() / 2);
    let mut f = fs::File::create(dir.join("web.yaml")).unwrap();
    f.write_all(head.as_bytes()).unwrap();
    // Far longer than the quiet time, shorter than the one-second cap.
    let early = tokio::time::timeout(Duration::from_millis(200), rx.recv()).await;
    f.write_all(tail.as_bytes()).unwrap();
    drop(f);
    assert!(
        early.is_err(),
        "a scan was sent while the manifest was half written: {early:?}"
    );
    let written = next(&mut rx, Duration::from_secs(2)).await;
    assert_eq!(written.pods.len(), 1, "{:?}", written.errors);
    assert!(written.errors.is_empty(), "{:?}", written.errors);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_sends_only_changes() {
    let d = TempDir::new().unwrap();
    write(d.path(), "web.yaml", WEB);
    let mut rx = watch(
        d.path().to_path_buf(),
        NODE.to_string(),
        Duration::from_millis(100),
    );
    let first = next(&mut rx, Duration::from_secs(2)).await;
    assert_eq!(first.pods.len(), 1);
    // Rescans keep happening, but nothing changed: nothing is sent.
    assert!(
        tokio::time::timeout(Duration::from_millis(500), rx.recv())
            .await
            .is_err()
    );
    // A touch (ATTRIB) of a dotfile or an unchanged rewrite sends nothing either.
    write(d.path(), ".ignored", "x");
    write(d.path(), "web.yaml", WEB);
    assert!(
        tokio::time::timeout(Duration::from_millis(300), rx.recv())
            .await
            .is_err()
    );
}

/// The periodic rescan alone picks up changes inotify cannot see (here: the watched
/// directory is a symlink that is switched to another directory).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_rescan_picks_up_unwatched_changes() {
    let d = TempDir::new().unwrap();
    let v1 = d.path().join("v1");
    let v2 = d.path().join("v2");
    fs::create_dir(&v1).unwrap();
    fs::create_dir(&v2).unwrap();
    write(&v2, "web.yaml", WEB);
    let link = d.path().join("manifests");
    std::os::unix::fs::symlink(&v1, &link).unwrap();

    let mut rx = watch(link.clone(), NODE.to_string(), Duration::from_millis(300));
    assert!(next(&mut rx, Duration::from_secs(2)).await.pods.is_empty());
    let tmp = d.path().join("manifests.tmp");
    std::os::unix::fs::symlink(&v2, &tmp).unwrap();
    fs::rename(&tmp, &link).unwrap();
    let r = next(&mut rx, Duration::from_secs(2)).await;
    assert_eq!(r.pods.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_waits_for_missing_dir_and_survives_its_removal() {
    let d = TempDir::new().unwrap();
    let dir = d.path().join("manifests");
    let mut rx = watch(dir.clone(), NODE.to_string(), Duration::from_secs(3600));
    let first = next(&mut rx, Duration::from_secs(2)).await;
    assert!(first.pods.is_empty());
    assert!(matches!(
        first.errors[..],
        [ManifestError::DirMissing { .. }]
    ));

    // Created with a manifest already in it: found by the 1 s watch retry.
    let staging = d.path().join("staging");
    fs::create_dir(&staging).unwrap();
    write(&staging, "web.yaml", WEB);
    fs::rename(&staging, &dir).unwrap();
    let r = next(&mut rx, Duration::from_secs(3)).await;
    assert_eq!(r.pods.len(), 1);
    assert!(r.errors.is_empty());

    // Now watched by inotify.
    write(&dir, "other.yaml", &WEB.replace("name: web", "name: other"));
    let r = next(&mut rx, Duration::from_secs(2)).await;
    assert_eq!(r.pods.len(), 2);

    // Removed altogether: everything goes away.
    fs::remove_dir_all(&dir).unwrap();
    let r = loop {
        let r = next(&mut rx, Duration::from_secs(3)).await;
        if r.errors
            .iter()
            .any(|e| matches!(e, ManifestError::DirMissing { .. }))
        {
            break r;
        }
    };
    assert!(r.pods.is_empty());

    // And comes back.
    fs::create_dir(&dir).unwrap();
    write(&dir, "web.yaml", WEB);
    let r = loop {
        let r = next(&mut rx, Duration::from_secs(3)).await;
        if !r.pods.is_empty() {
            break r;
        }
    };
    assert_eq!(r.pods.len(), 1);

    // Emptied, then the (empty) directory itself removed: the first event is its own
    // deletion, and it is re-watched when it comes back.
    fs::remove_file(dir.join("web.yaml")).unwrap();
    assert!(next(&mut rx, Duration::from_secs(2)).await.pods.is_empty());
    fs::remove_dir(&dir).unwrap();
    let r = next(&mut rx, Duration::from_secs(2)).await;
    assert!(matches!(r.errors[..], [ManifestError::DirMissing { .. }]));
    fs::create_dir(&staging).unwrap();
    write(&staging, "web.yaml", WEB);
    fs::rename(&staging, &dir).unwrap();
    let r = next(&mut rx, Duration::from_secs(3)).await;
    assert_eq!(r.pods.len(), 1);
}

#[test]
fn a_name_too_long_with_the_node_appended_is_rejected() {
    // Dot-separated labels of at most 63: 192 + 54 + "-node-1" = 253.
    let name = format!(
        "{}.{}.{}.{}",
        "a".repeat(63),
        "b".repeat(63),
        "c".repeat(63),
        "d".repeat(54)
    );
    let fits = WEB.replace("name: web\n", &format!("name: {name}\n"));
    let (_d, r) = load_str(&fits);
    assert_eq!(r.unwrap().name.len(), 253);

    let long = WEB.replace("name: web\n", &format!("name: {name}b\n"));
    let (msg, file) = err_of(&long);
    assert!(msg.contains(&file), "{msg}");
    assert!(
        msg.contains("with the node name appended (<name>-<node>)"),
        "{msg}"
    );
    assert!(msg.contains("shorten metadata.name"), "{msg}");
}
