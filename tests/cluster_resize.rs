//! In-place pod resize in cluster mode, end to end: a podhost node against a live
//! kube-apiserver (tests/common_apiserver) runs a Guaranteed pod of two containers; an
//! administrator resizes it through the `pods/resize` subresource, as `kubectl patch
//! --subresource resize` does. What the node made of it is read from the host's cgroup
//! files (v2, or the v1 memory and cpu hierarchies of a hybrid host) and from the pod's
//! status in the API server: each container's `resources` and `allocatedResources`,
//! `observedGeneration`, the resize conditions gone, the restart counts (`resizePolicy:
//! RestartContainer` restarts its container, `NotRequired` does not), and a
//! resize refused by the node (a memory limit below usage) shown as `PodResizeInProgress`
//! with its error, and applied by the node's retry once the usage is below it; a resize
//! that does not fit beside another pod `Deferred` until that pod is gone.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::TestDaemon;
use crate::common_apiserver::{self, ControlPlane, Options, control_plane, eventually};
use crate::common_registry::require_root;

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const NODE: &str = "resize-node";
const NODES: &[&str] = &[NODE];
const NAMESPACE: &str = "resize";
const POD: &str = "sized";
const WAIT: Duration = Duration::from_secs(90);

/// app holds 40 MiB of tmpfs (charged to its cgroup, not reclaimable), then sleeps.
const FILL: &str = "dd if=/dev/zero of=/dev/shm/fill bs=1048576 count=40 && sleep 3600";

fn plane() -> &'static ControlPlane {
    control_plane(&Options::api_server(NODES))
}

fn resources(cpu: &str, memory: &str) -> Value {
    json!({"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}})
}

/// The pod: `app` resized in place, `re` restarted for a memory change.
fn pod() -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": POD},
        "spec": {
            "nodeName": NODE,
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {"name": "app", "image": "localhost/busybox:latest", "imagePullPolicy": "Never",
                 "command": ["sh", "-c", FILL], "resources": resources("100m", "64Mi")},
                {"name": "re", "image": "localhost/busybox:latest", "imagePullPolicy": "Never",
                 "command": ["sh", "-c", "sleep 3600"], "resources": resources("100m", "64Mi"),
                 "resizePolicy": [{"resourceName": "memory", "restartPolicy": "RestartContainer"}]}
            ]
        }
    }))
    .unwrap()
}

/// The cgroup directory of the pod's container `name` in `hierarchy` (`""` on a pure v2
/// host, `memory` or `cpu` on a hybrid one), found under the daemon's cgroup root.
fn container_cgroup(d: &TestDaemon, uid: &str, hierarchy: &str, name: &str) -> PathBuf {
    let base = PathBuf::from("/sys/fs/cgroup")
        .join(hierarchy)
        .join(d.cgroup_root.trim_start_matches('/'))
        .join("kubepods");
    // Guaranteed: the pod's cgroup is right under kubepods.
    base.join(format!("pod{uid}")).join(name)
}

fn v2() -> bool {
    std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
}

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .to_string()
}

/// The container's memory limit and CPU quota (µs per 100 ms) as the host has them.
fn limits(d: &TestDaemon, uid: &str, name: &str) -> (String, String) {
    if v2() {
        let dir = container_cgroup(d, uid, "", name);
        let cpu_max = read(dir.join("cpu.max"));
        let quota = cpu_max.split_whitespace().next().unwrap_or("").to_string();
        (read(dir.join("memory.max")), quota)
    } else {
        (
            read(container_cgroup(d, uid, "memory", name).join("memory.limit_in_bytes")),
            read(container_cgroup(d, uid, "cpu", name).join("cpu.cfs_quota_us")),
        )
    }
}

fn status_of(pod: &Pod, name: &str) -> Value {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.clone());
    let s = statuses
        .unwrap_or_default()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap();
    serde_json::to_value(s).unwrap()
}

fn resize_conditions(pod: &Pod) -> Vec<Value> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.type_.starts_with("PodResize"))
        .map(|c| serde_json::to_value(c).unwrap())
        .collect()
}

async fn resize(pods: &Api<Pod>, containers: Value) -> Pod {
    let patch = json!({"spec": {"containers": containers}});
    pods.patch_subresource(
        "resize",
        POD,
        &PatchParams::default(),
        &Patch::Strategic(patch),
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_pod_resized_through_the_api_gets_its_new_limits_in_place() {
    require_root();
    let cp = plane();
    let admin = cp.admin().await;
    common_apiserver::namespace(&admin, NAMESPACE).await;
    let d = cp.node_daemon(NODE, &[]);
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NAMESPACE);
    let created = pods.create(&PostParams::default(), &pod()).await.unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    eventually("both containers running", WAIT, || async {
        let p = pods.get(POD).await.ok()?;
        let all = p.status?.container_statuses?;
        (all.len() == 2 && all.iter().all(|s| s.ready)).then_some(())
    })
    .await;
    let p = pods.get(POD).await.unwrap();
    let app = status_of(&p, "app");
    assert_eq!(app["resources"], resources("100m", "64Mi"), "{app}");
    assert_eq!(
        app["allocatedResources"],
        json!({"cpu": "100m", "memory": "64Mi"})
    );
    assert_eq!(
        limits(&d, &uid, "app"),
        ((64u64 << 20).to_string(), "10000".to_string())
    );

    // app: more CPU and memory, in place; re: more memory, by a restart.
    let patched = resize(
        &pods,
        json!([
            {"name": "app", "resources": resources("200m", "128Mi")},
            {"name": "re", "resources": resources("100m", "96Mi")}
        ]),
    )
    .await;
    let generation = patched.metadata.generation.unwrap();
    assert_eq!(generation, 2);
    let p = eventually("the resize done", WAIT, || async {
        let p = pods.get(POD).await.ok()?;
        let s = p.status.as_ref()?;
        let done = s.observed_generation == Some(generation)
            && resize_conditions(&p).is_empty()
            && status_of(&p, "re")["resources"] == resources("100m", "96Mi")
            && status_of(&p, "re")["ready"] == json!(true);
        done.then_some(p)
    })
    .await;
    let app = status_of(&p, "app");
    assert_eq!(app["resources"], resources("200m", "128Mi"), "{app}");
    assert_eq!(
        app["allocatedResources"],
        json!({"cpu": "200m", "memory": "128Mi"})
    );
    assert_eq!(app["restartCount"], 0, "resized in place: {app}");
    assert_eq!(status_of(&p, "re")["restartCount"], 1);
    assert_eq!(
        limits(&d, &uid, "app"),
        ((128u64 << 20).to_string(), "20000".to_string())
    );
    assert_eq!(limits(&d, &uid, "re").0, (96u64 << 20).to_string());
    if v2() {
        // The pod cgroup holds both containers' limits (grown before them).
        let pod_dir = container_cgroup(&d, &uid, "", "");
        assert_eq!(read(pod_dir.join("memory.max")), (224u64 << 20).to_string());
        assert_eq!(read(pod_dir.join("cpu.max")), "30000 100000");
    }
    let allocated: Value = serde_json::from_slice(
        &std::fs::read(
            d.root
                .join("pods")
                .join(&uid)
                .join("resized-resources.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        allocated["app"]["limits"],
        json!({"cpu": "200m", "memory": "128Mi"})
    );

    // A memory limit below what app uses (40 MiB of tmpfs, not reclaimable): refused
    // by the node, the resize stays in progress with the error; nothing is written.
    // (More than the node's allocatable is refused by the API server itself.)
    let patched = resize(
        &pods,
        json!([{"name": "app", "resources": resources("200m", "32Mi")}]),
    )
    .await;
    let generation = patched.metadata.generation.unwrap();
    let stuck = eventually("the resize in progress with an error", WAIT, || async {
        let p = pods.get(POD).await.ok()?;
        resize_conditions(&p).into_iter().next()
    })
    .await;
    assert_eq!(stuck["type"], "PodResizeInProgress", "{stuck}");
    assert_eq!(stuck["reason"], "Error");
    assert_eq!(stuck["observedGeneration"], generation);
    assert!(
        stuck["message"].as_str().unwrap().starts_with(
            "attempting to set container memory limit (33554432) below current usage ("
        ),
        "{stuck}"
    );
    assert_eq!(limits(&d, &uid, "app").0, (128u64 << 20).to_string());
    let p = pods.get(POD).await.unwrap();
    let app = status_of(&p, "app");
    assert_eq!(
        app["allocatedResources"],
        json!({"cpu": "200m", "memory": "32Mi"})
    );
    assert_eq!(
        app["resources"],
        resources("200m", "128Mi"),
        "still applied: {app}"
    );

    // Once app's usage is below it, the node's retry applies it.
    let out = d.cli(&["exec", POD, "-c", "app", "--", "rm", "/dev/shm/fill"]);
    assert!(
        out.status.success(),
        "exec: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let p = eventually("the refused resize applied on retry", WAIT, || async {
        let p = pods.get(POD).await.ok()?;
        let app = status_of(&p, "app");
        (resize_conditions(&p).is_empty() && app["resources"] == resources("200m", "32Mi"))
            .then_some(p)
    })
    .await;
    assert_eq!(status_of(&p, "app")["restartCount"], 0);
    assert_eq!(limits(&d, &uid, "app").0, (32u64 << 20).to_string());

    // A resize that fits the node but not beside another pod is deferred until that pod
    // is gone (the API server refuses only what exceeds the node's allocatable).
    let cpus = std::thread::available_parallelism().unwrap().get() as i64;
    let hog_cpu = format!("{}m", cpus * 1000 - 300 - 100);
    let hog: Pod = serde_json::from_value(json!({
        "metadata": {"name": "hog"},
        "spec": {"nodeName": NODE, "automountServiceAccountToken": false,
                 "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "h", "image": "localhost/busybox:latest",
                                 "imagePullPolicy": "Never", "command": ["sleep", "3600"],
                                 "resources": {"requests": {"cpu": hog_cpu}}}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &hog).await.unwrap();
    eventually("the hog running", WAIT, || async {
        let p = pods.get("hog").await.ok()?;
        p.status?.container_statuses?.first()?.ready.then_some(())
    })
    .await;
    let patched = resize(
        &pods,
        json!([{"name": "app", "resources": resources("600m", "32Mi")}]),
    )
    .await;
    let generation = patched.metadata.generation.unwrap();
    let deferred = eventually("the resize deferred", WAIT, || async {
        let p = pods.get(POD).await.ok()?;
        resize_conditions(&p).into_iter().next()
    })
    .await;
    assert_eq!(deferred["type"], "PodResizePending", "{deferred}");
    assert_eq!(deferred["reason"], "Deferred");
    assert_eq!(deferred["observedGeneration"], generation);
    assert!(
        deferred["message"]
            .as_str()
            .unwrap()
            .starts_with("Node didn't have enough resource: cpu, requested: 700,"),
        "{deferred}"
    );
    assert_eq!(limits(&d, &uid, "app").1, "20000");
    pods.delete("hog", &Default::default()).await.unwrap();
    eventually(
        "the deferred resize applied once the hog is gone",
        WAIT,
        || async {
            let p = pods.get(POD).await.ok()?;
            (resize_conditions(&p).is_empty()
                && status_of(&p, "app")["resources"] == resources("600m", "32Mi"))
            .then_some(())
        },
    )
    .await;
    assert_eq!(limits(&d, &uid, "app").1, "60000");
    pods.delete(POD, &Default::default()).await.unwrap();
}
