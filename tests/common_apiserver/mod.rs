//! A real Kubernetes control plane for a test suite: etcd (Debian's etcd-server) and
//! the kube-apiserver of the release pinned in tests/cluster/controlplane/go.mod (built
//! or found cached by scripts/cluster/build-control-plane.sh), with `Node,RBAC`
//! authorization and the NodeRestriction admission, plus kube-controller-manager when
//! the suite needs it (CSR approval and signing, podCIDRs, service accounts) —
//! started by scripts/cluster/control-plane-up.sh, which picks free ports, writes the
//! PKI and one kubeconfig per node (`system:node:NODE`).
//!
//! One control plane per set of options (in practice, per suite: each asks with its own
//! nodes), started by the first test that asks for it; the tests that ask alike share
//! it, each with its own node names and namespace so that they can run in parallel.
//! Every suite of the integration binary asks differently, so none sees another's
//! nodes or controller-manager. Statics are never dropped, so the
//! teardown is a watchdog process of its own process group, started before the control
//! plane: it waits for the test process to end — passed, failed, panicked or killed —
//! then runs scripts/cluster/control-plane-down.sh.
//!
//! Nothing here skips: a missing binary, etcd or a control plane that does not come up
//! fails every test that asks for it with what went wrong.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::Api;
use kube::api::PostParams;
use podhost::cluster::record::Exchange;

/// What a control plane runs with. The tests of one suite ask with the same options
/// (they name the suite's nodes) and share its control plane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The nodes that get a kubeconfig (`system:node:NODE`, in `system:nodes`).
    pub nodes: &'static [&'static str],
    /// Runs kube-controller-manager too.
    pub controller_manager: bool,
    /// kube-controller-manager's `--cluster-cidr` (a /24 per Node in spec.podCIDR).
    pub cluster_cidr: Option<&'static str>,
    /// A bootstrap token (`abcdef.0123456789abcdef`) with kubeadm's RBAC bindings and
    /// auto-approval of its nodes' client certificates.
    pub bootstrap_token: Option<&'static str>,
}

impl Options {
    /// The API server alone, with kubeconfigs for `nodes`.
    pub const fn api_server(nodes: &'static [&'static str]) -> Self {
        Self {
            nodes,
            controller_manager: false,
            cluster_cidr: None,
            bootstrap_token: None,
        }
    }
}

/// A running control plane (see the module's documentation).
#[derive(Debug)]
pub struct ControlPlane {
    /// control-plane-up.sh's directory: PKI, kubeconfigs, logs.
    pub dir: PathBuf,
    /// The API server's URL.
    pub server: String,
    options: Options,
    /// The process that stops the control plane once this one has ended (kept, never
    /// waited for: it outlives the test process).
    _watchdog: Mutex<Child>,
}

type PlaneSlot = OnceLock<Result<ControlPlane, String>>;

/// The control planes started so far, by their options. A slot is leaked so that its
/// plane lives as long as the process (the watchdog stops it after).
static PLANES: Mutex<Vec<(Options, &'static PlaneSlot)>> = Mutex::new(Vec::new());

/// The control plane for `options`, started on first use. Only the slot is looked up
/// under the lock, so suites with different options start theirs side by side.
pub fn control_plane(options: &Options) -> &'static ControlPlane {
    let slot: &'static PlaneSlot = {
        let mut planes = PLANES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match planes.iter().find(|(o, _)| o == options) {
            Some((_, slot)) => slot,
            None => {
                let slot: &'static PlaneSlot = Box::leak(Box::new(OnceLock::new()));
                planes.push((options.clone(), slot));
                slot
            }
        }
    };
    let plane = slot
        .get_or_init(|| start(options))
        .as_ref()
        .unwrap_or_else(|reason| panic!("the test control plane did not start: {reason}"));
    assert_eq!(&plane.options, options);
    plane
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The directory of the pinned control plane's binaries (built on a cold cache, which
/// takes minutes; a concurrent build is waited for under the script's lock).
fn binaries() -> Result<PathBuf, String> {
    let script = repo().join("scripts/cluster/build-control-plane.sh");
    let out = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!(
            "{} failed ({}):\n{stderr}",
            script.display(),
            out.status
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let dir = stdout
        .lines()
        .last()
        .map(PathBuf::from)
        .ok_or_else(|| format!("{} printed no directory:\n{stderr}", script.display()))?;
    for program in ["kube-apiserver", "kube-controller-manager"] {
        if !dir.join(program).is_file() {
            return Err(format!(
                "{} named {}, which has no {program}",
                script.display(),
                dir.display()
            ));
        }
    }
    Ok(dir)
}

fn start(options: &Options) -> Result<ControlPlane, String> {
    let bin = binaries()?;
    let base = tempfile::Builder::new()
        .prefix("podhost-apiserver-")
        .tempdir()
        .map_err(|e| format!("cannot make a temporary directory: {e}"))?
        .keep();
    let dir = base.join("cp");
    let down = repo().join("scripts/cluster/control-plane-down.sh");
    // Started first, so that a test process killed while the control plane comes up
    // still stops what came up: once the test process is gone, it waits for a
    // control-plane-up.sh still running (its pid in `base/up.pid`) to end, then runs
    // `down`, which removes `dir` (it carries up's marker); the empty `base` goes last.
    let watchdog = Command::new("sh")
        .arg("-c")
        .arg(
            "while kill -0 \"$0\" 2>/dev/null; do sleep 1; done; \
             up=$(cat \"$3/up.pid\" 2>/dev/null); \
             while [ -n \"$up\" ] && kill -0 \"$up\" 2>/dev/null; do sleep 1; done; \
             \"$1\" \"$2\" >/dev/null 2>&1; rm -f \"$3/up.pid\"; rmdir \"$3\" 2>/dev/null",
        )
        .arg(std::process::id().to_string())
        .arg(&down)
        .arg(&dir)
        .arg(&base)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Its own process group: a Ctrl-C of the test run does not kill it with the tests.
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start the control plane's watchdog: {e}"))?;

    let up = repo().join("scripts/cluster/control-plane-up.sh");
    let mut command = Command::new("bash");
    command
        .arg(&up)
        .arg(&dir)
        .args(options.nodes)
        // Only what is set here: no KUBE_CONTROLLER_MANAGER, CLUSTER_CIDR, … of the
        // environment the tests run in.
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env(
            "HOME",
            std::env::var_os("HOME").unwrap_or_else(|| "/root".into()),
        )
        .env("KUBE_APISERVER", bin.join("kube-apiserver"))
        .stdin(Stdio::null());
    if options.controller_manager {
        command.env(
            "KUBE_CONTROLLER_MANAGER",
            bin.join("kube-controller-manager"),
        );
    } else {
        command.env("WITH_KCM", "0");
    }
    if let Some(cidr) = options.cluster_cidr {
        command.env("CLUSTER_CIDR", cidr);
    }
    if let Some(token) = options.bootstrap_token {
        command.env("BOOTSTRAP_TOKEN", token);
    }
    let child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", up.display()))?;
    std::fs::write(base.join("up.pid"), child.id().to_string())
        .map_err(|e| format!("cannot write {}: {e}", base.join("up.pid").display()))?;
    let out = child
        .wait_with_output()
        .map_err(|e| format!("waiting for {}: {e}", up.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} {} failed ({}):\n{}",
            up.display(),
            dir.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let env = exports(&String::from_utf8_lossy(&out.stdout));
    let server = env.get("KUBE_APISERVER_URL").cloned().ok_or_else(|| {
        format!(
            "{} printed no KUBE_APISERVER_URL:\n{}",
            up.display(),
            String::from_utf8_lossy(&out.stdout)
        )
    })?;
    Ok(ControlPlane {
        dir,
        server,
        options: options.clone(),
        _watchdog: Mutex::new(watchdog),
    })
}

/// The `export NAME=VALUE` lines of control-plane-up.sh's env.sh.
fn exports(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("export "))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

impl ControlPlane {
    /// The pinned release's kubectl, built with the control plane.
    pub fn kubectl(&self) -> PathBuf {
        let dir = binaries().unwrap_or_else(|why| panic!("{why}"));
        let kubectl = dir.join("kubectl");
        assert!(kubectl.is_file(), "{} has no kubectl", dir.display());
        kubectl
    }

    /// The administrator's kubeconfig (`system:masters`).
    pub fn admin_kubeconfig(&self) -> PathBuf {
        self.dir.join("admin.kubeconfig")
    }

    /// The kubeconfig of `node` (one of the plane.s nodes).
    pub fn node_kubeconfig(&self, node: &str) -> PathBuf {
        assert!(
            self.options.nodes.contains(&node),
            "{node} is not one of this control plane.s nodes {:?}",
            self.options.nodes
        );
        self.dir.join(format!("node-{node}.kubeconfig"))
    }

    /// The bootstrap token's kubeconfig.
    pub fn bootstrap_kubeconfig(&self) -> PathBuf {
        assert!(
            self.options.bootstrap_token.is_some(),
            "this control plane has no bootstrap token"
        );
        self.dir.join("bootstrap.kubeconfig")
    }

    /// The cluster CA's certificate (PEM).
    pub fn ca_pem(&self) -> String {
        std::fs::read_to_string(self.dir.join("pki/ca.crt")).expect("the cluster CA")
    }

    /// A client as the administrator, built as podhost builds its own.
    pub async fn admin(&self) -> kube::Client {
        client(&self.admin_kubeconfig(), None).await
    }

    /// A podhost daemon started as `node` of this plane (`--kubeconfig`, the kubelet
    /// API on a free port), on the machine's network, with `extra_args`.
    pub fn node_daemon(&self, node: &str, extra_args: &[&str]) -> crate::common::TestDaemon {
        let kubeconfig = self.node_kubeconfig(node);
        let port = crate::common_registry::free_port().to_string();
        let mut args = vec![
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--port",
            &port,
        ];
        args.extend_from_slice(extra_args);
        let mut d = crate::common::TestDaemon::prepare_on_machine_network(&args);
        d.node = node.to_string();
        d.spawn_daemon();
        d
    }

    /// A client as `node`, built as the daemon builds it from `--kubeconfig`.
    pub async fn node(&self, node: &str) -> kube::Client {
        client(&self.node_kubeconfig(node), None).await
    }

    /// As [`Self::node`], every exchange recorded into `record` (`--kube-record`): what
    /// the node sent, and the live server's answers.
    pub async fn node_recorded(&self, node: &str, record: &Path) -> kube::Client {
        client(&self.node_kubeconfig(node), Some(record)).await
    }

    /// A kubeconfig in the control plane's directory that authenticates with the
    /// bearer `token` (a service account's, a second bootstrap token).
    pub fn token_kubeconfig(&self, name: &str, token: &str) -> PathBuf {
        let path = self.dir.join(format!("token-{name}.kubeconfig"));
        let ca = base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            self.ca_pem().as_bytes(),
        );
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    \
             server: {}\n    certificate-authority-data: {ca}\nusers:\n- name: {name}\n  \
             user:\n    token: {token}\ncontexts:\n- name: {name}@local\n  context:\n    \
             cluster: local\n    user: {name}\ncurrent-context: {name}@local\n",
            self.server
        );
        std::fs::write(&path, text).expect("write a token kubeconfig");
        path
    }
}

/// A client from `kubeconfig` through podhost's own constructor (`--kubeconfig`,
/// `--kube-record`).
pub async fn client(kubeconfig: &Path, record: Option<&Path>) -> kube::Client {
    podhost::cluster::client::from_kubeconfig(kubeconfig, record)
        .await
        .unwrap_or_else(|e| panic!("a client from {}: {e}", kubeconfig.display()))
}

/// Creates the namespace `name` and its `default` ServiceAccount (which the
/// ServiceAccount admission needs for a pod; kube-controller-manager, when it runs,
/// may have made it first).
pub async fn namespace(admin: &kube::Client, name: &str) {
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap_or_else(|e| panic!("create namespace {name}: {e}"));
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), name);
    let sa: ServiceAccount =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "default"}})).unwrap();
    match accounts.create(&PostParams::default(), &sa).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("create the default ServiceAccount of {name}: {e}"),
    }
}

/// A token of the ServiceAccount `namespace/name` (a TokenRequest as the administrator,
/// as `kubectl create token` makes one).
pub async fn service_account_token(admin: &kube::Client, namespace: &str, name: &str) -> String {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec::default()),
        ..TokenRequest::default()
    };
    accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .unwrap_or_else(|e| panic!("a token of {namespace}/{name}: {e}"))
        .status
        .and_then(|s| s.token)
        .unwrap_or_else(|| panic!("a token of {namespace}/{name}: none issued"))
}

/// The exchanges `--kube-record` wrote so far into `path`.
pub fn recorded(path: &Path) -> Vec<Exchange> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

/// The request bodies of the recorded `method` requests whose path ends with `path_end`.
pub fn sent(path: &Path, method: &str, path_end: &str) -> Vec<serde_json::Value> {
    recorded(path)
        .into_iter()
        .filter(|e| e.method == method && e.path.ends_with(path_end))
        .map(|e| e.request.unwrap_or_default())
        .collect()
}

/// Polls `check` every 100 ms until it gives a value, for at most `limit`.
pub async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not seen within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits (20 s at most) until the value of `rx` is one for which `done` holds.
pub async fn until<T: Clone>(
    rx: &mut tokio::sync::watch::Receiver<T>,
    what: &str,
    done: impl Fn(&T) -> bool,
) -> T {
    tokio::time::timeout(Duration::from_secs(20), rx.wait_for(|v| done(v)))
        .await
        .unwrap_or_else(|_| panic!("{what}: not seen within 20 s"))
        .unwrap_or_else(|_| panic!("{what}: the sender is gone"))
        .clone()
}

/// A file for a client's `--kube-record`, in a fresh temporary directory.
pub fn record_file(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join(format!("{name}.jsonl"));
    (dir, path)
}

/// The facts of a test node named `hostname` at `ip`: a small amd64 Debian machine
/// (capacity the tests do not compare with the host's own).
pub fn host_facts(hostname: &str, ip: &str) -> podhost::model::node::HostFacts {
    podhost::model::node::HostFacts {
        cpus: 2,
        memory_bytes: 4 << 30,
        ephemeral_storage_bytes: 20 << 30,
        machine_id: "0123456789abcdef0123456789abcdef".into(),
        system_uuid: String::new(),
        boot_id: "00000000-0000-4000-8000-000000000000".into(),
        kernel_version: "6.1.0".into(),
        os_image: "Debian GNU/Linux 12 (bookworm)".into(),
        architecture: "amd64".into(),
        hostname: hostname.into(),
        internal_ips: vec![ip.into()],
    }
}
