//! Pod networking through the standard CNI plugins (spec 1.0/1.1, as libcni and the
//! kubelet/containerd run them): the config list is the first `*.conflist`/`*.conf`/
//! `*.json` of `--cni-conf-dir` (read once, at daemon start: a changed config takes
//! effect at the next start), its plugins are exec'd from `--cni-bin-dir`, and each pod
//! has a record under `<root>/network/cni/pods/` so that DEL matches ADD even across a
//! daemon crash or a config change.
//!
//! - [`load`]: finding and validating the config list;
//! - [`exec`]: running one plugin (environment, stdin, timeout, errors);
//! - [`ops`]: ADD/CHECK/DEL/STATUS/VERSION over the list;
//! - [`record`]: the per-pod records;
//! - this file: the backend the worker calls (setup, teardown, recovery).

pub mod exec;
pub mod load;
pub mod ops;
pub mod record;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{PodNetRequest, PodNetStatus};
use exec::PodEnv;
use ops::{Runner, netns_for_del};
use podhost_model::cni::CniFormatError;
use podhost_model::cni::config::{ConfigList, parse_config_file};
use podhost_model::cni::input::{PodArgs, PortMapping, RuntimeArgs};
use podhost_model::cni::result::CniResult;
use podhost_model::cni::version::SpecVersion;
use record::PodRecord;

/// The pod's interface name (CNI_IFNAME).
pub const POD_IFNAME: &str = "eth0";

/// Where the CNI backend finds its config and plugins and keeps its records.
#[derive(Debug, Clone)]
pub struct CniConfig {
    /// `--cni-conf-dir` (default `/etc/cni/net.d`).
    pub conf_dir: PathBuf,
    /// `--cni-bin-dir`, searched in order (default `/opt/cni/bin`, then Debian's
    /// `/usr/lib/cni`).
    pub bin_dirs: Vec<PathBuf>,
    /// `<root>/network/cni`.
    pub state_dir: PathBuf,
}

impl CniConfig {
    /// The default conf dir.
    pub const DEFAULT_CONF_DIR: &str = "/etc/cni/net.d";
    /// The default bin dirs.
    pub const DEFAULT_BIN_DIRS: [&str; 2] = ["/opt/cni/bin", "/usr/lib/cni"];
}

/// Why a CNI operation failed. The message names the plugin (or file) and carries a
/// plugin's own `msg`/`details` verbatim: it becomes the pod's event.
#[derive(Debug, thiserror::Error)]
pub enum CniError {
    #[error(
        "no CNI network config (*.conflist, *.conf, *.json) in {dir}: add one, or choose \
         another pod network"
    )]
    NoConfig { dir: PathBuf },
    #[error("cannot read CNI config {path}: {source}")]
    ReadConfig {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Format(#[from] CniFormatError),
    #[error(
        "CNI plugin {plugin:?} is in none of the CNI bin dirs {bin_dirs:?}: install it \
         (Debian: containernetworking-plugins) or pass --cni-bin-dir"
    )]
    PluginNotFound {
        plugin: String,
        bin_dirs: Vec<PathBuf>,
    },
    #[error("cannot run CNI plugin {plugin:?} ({path}): {source}")]
    Spawn {
        plugin: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("CNI plugin {plugin:?} ({command}) did not finish within {seconds} s and was killed")]
    Timeout {
        plugin: String,
        command: &'static str,
        seconds: u64,
    },
    #[error("CNI plugin {plugin:?} failed ({command}): {message}")]
    Plugin {
        plugin: String,
        command: &'static str,
        /// The error object's `code`, when the plugin printed one.
        code: Option<u32>,
        message: String,
    },
    #[error(
        "CNI config {file}: plugin {plugin:?} does not speak cniVersion {version} (it speaks \
         {supported:?}); set cniVersion to one of those"
    )]
    UnsupportedVersion {
        file: PathBuf,
        plugin: String,
        version: String,
        supported: Vec<String>,
    },
    #[error("pod uid {uid:?} cannot name a CNI record (not a plain file name)")]
    BadUid { uid: String },
    #[error("CNI pod record: {0}")]
    Record(#[source] podhost_disk::DiskError),
    #[error("cannot remove CNI pod record {path}: {source}")]
    RemoveRecord {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read CNI state dir {path}: {source}")]
    ReadState {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("pod {uid} has no finished CNI setup to CHECK")]
    NotSetUp { uid: String },
    #[error("CNI: {0}")]
    Internal(String),
}

/// Whether `conf_dir` holds a config file the CNI backend would load. A file that is
/// there but invalid counts: [`CniNetwork::new`] then says what is wrong with it,
/// rather than the node silently falling back to another network.
pub fn has_config(conf_dir: &Path) -> bool {
    matches!(load::config_file(conf_dir), Ok(Some(_)))
}

/// The CNI network of the node.
#[derive(Debug)]
pub struct CniNetwork {
    // Boxed: the network is one variant of `PodNetwork`, kept small.
    cfg: Box<CniConfig>,
    list: Box<ConfigList>,
    /// The list as read, stored in each pod's record.
    list_json: serde_json::Value,
    timeout: Duration,
}

impl CniNetwork {
    /// Loads the config list, checks that every plugin is installed and speaks the
    /// list's cniVersion (VERSION), and asks each whether it is ready (STATUS, when the
    /// version has it: 1.1.0 and later).
    pub async fn new(cfg: CniConfig) -> Result<Self, CniError> {
        let conf_dir = cfg.conf_dir.clone();
        let list = tokio::task::spawn_blocking(move || load::load_config_list(&conf_dir))
            .await
            .map_err(|e| CniError::Internal(e.to_string()))??;
        let list_json = serde_json::from_slice(&std::fs::read(&list.file).map_err(|source| {
            CniError::ReadConfig {
                path: list.file.clone(),
                source,
            }
        })?)
        .map_err(|source| CniFormatError::ConfigJson {
            file: list.file.clone(),
            source,
        })?;
        let net = Self {
            cfg: Box::new(cfg),
            list: Box::new(list),
            list_json,
            timeout: exec::PLUGIN_TIMEOUT,
        };
        let runner = net.runner();
        runner.check_versions(&net.list).await?;
        runner.status(&net.list).await?;
        tracing::info!(
            file = %net.list.file.display(),
            network = %net.list.name,
            cni_version = %net.list.cni_version,
            plugins = ?net.list.plugins.iter().map(|p| p.plugin_type.as_str()).collect::<Vec<_>>(),
            "CNI network loaded"
        );
        Ok(net)
    }

    /// Sets a plugin's time limit (default [`exec::PLUGIN_TIMEOUT`]).
    pub fn with_plugin_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The loaded config list.
    pub fn config_list(&self) -> &ConfigList {
        &self.list
    }

    fn runner(&self) -> Runner<'_> {
        Runner {
            bin_dirs: &self.cfg.bin_dirs,
            timeout: self.timeout,
        }
    }

    /// ADD the pod to the network. A pod that already has a complete record for the
    /// same netns and ports (a daemon restart) keeps its attachment and addresses: it is
    /// CHECKed, and a failed CHECK is logged, not repaired — a new ADD would change the
    /// addresses under running containers (and Debian's portmap 1.1.1 fails CHECK for
    /// dual-stack hostPorts on an intact pod); [`CniNetwork::check`] reports it. A
    /// record from an ADD that never finished, or for another netns or other ports, is
    /// DELeted and the pod ADDed afresh. When an ADD fails midway, the plugins that ran
    /// are DELeted before the error returns, so nothing half-made stays.
    pub async fn setup(&self, req: &PodNetRequest) -> Result<PodNetStatus, CniError> {
        if let Some(rec) = record::read(&self.cfg.state_dir, &req.uid).await? {
            let rt = runtime_args(req);
            let same =
                rec.complete && rec.netns == req.netns && rec.port_mappings == rt.port_mappings;
            if let (true, Some(cached)) = (same, rec.result.as_ref()) {
                if let Err(e) = self.check_record(&rec).await {
                    tracing::warn!(
                        pod = %format!("{}/{}", req.namespace, req.name),
                        error = %e,
                        "the pod's CNI network from before fails its CHECK; it is kept as it is"
                    );
                }
                let typed: CniResult = serde_json::from_value(cached.clone()).map_err(|e| {
                    CniError::Internal(format!("the recorded CNI result of pod {}: {e}", rec.uid))
                })?;
                return Ok(status_of(&typed, &rec.ifname));
            }
            self.teardown(&req.uid).await?;
        }
        self.add_fresh(req).await
    }

    /// CHECK of a set-up pod's attachment with its recorded result: `Ok` when every
    /// plugin finds it intact, or when the list's version has no CHECK or disables it.
    pub async fn check(&self, uid: &str) -> Result<(), CniError> {
        match record::read(&self.cfg.state_dir, uid).await? {
            Some(rec) if rec.complete => self.check_record(&rec).await,
            _ => Err(CniError::NotSetUp {
                uid: uid.to_string(),
            }),
        }
    }

    async fn check_record(&self, rec: &PodRecord) -> Result<(), CniError> {
        let list = record_list(rec)?;
        let Some(cached) = rec.result.as_ref() else {
            return Err(CniError::NotSetUp {
                uid: rec.uid.clone(),
            });
        };
        if !list.cni_version.at_least(SpecVersion::CHECK) || list.disable_check {
            return Ok(());
        }
        let env = PodEnv {
            container_id: &rec.uid,
            netns: &rec.netns,
            ifname: &rec.ifname,
            cni_args: &rec.cni_args,
        };
        let rt = RuntimeArgs {
            port_mappings: rec.port_mappings.clone(),
        };
        self.runner().check(&list, &env, &rt, cached).await
    }

    async fn add_fresh(&self, req: &PodNetRequest) -> Result<PodNetStatus, CniError> {
        let rt = runtime_args(req);
        let args = PodArgs {
            namespace: req.namespace.clone(),
            name: req.name.clone(),
            uid: req.uid.clone(),
        };
        let rec = PodRecord {
            uid: req.uid.clone(),
            namespace: req.namespace.clone(),
            name: req.name.clone(),
            netns: req.netns.clone(),
            ifname: POD_IFNAME.to_string(),
            cni_args: args.cni_args(),
            port_mappings: rt.port_mappings.clone(),
            config_file: self.list.file.clone(),
            config: self.list_json.clone(),
            result: None,
            complete: false,
        };
        // Before any plugin runs: a crash from here on leaves what a DEL needs. After
        // each plugin, the record gets its result: the prevResult the next plugin's
        // DEL needs if the daemon dies while that plugin runs.
        record::write(&self.cfg.state_dir, &rec).await?;
        let env = PodEnv {
            container_id: &rec.uid,
            netns: &rec.netns,
            ifname: &rec.ifname,
            cni_args: &rec.cni_args,
        };
        let state_dir = &self.cfg.state_dir;
        let progress = |partial: serde_json::Value| {
            let mut rec = rec.clone();
            rec.result = Some(partial);
            async move { record::write(state_dir, &rec).await }
        };
        match self.runner().add(&self.list, &env, &rt, progress).await {
            Ok((raw, typed)) => {
                let mut done = rec.clone();
                done.result = Some(raw);
                done.complete = true;
                record::write(state_dir, &done).await?;
                Ok(status_of(&typed, &done.ifname))
            }
            Err(failure) => {
                // Undo what the plugins up to the failing one made (libcni's callers
                // do too), with the last result there is; the record goes only if
                // that DEL succeeds.
                let rolled_back = self
                    .del_record(
                        &rec,
                        failure.failed_index + 1,
                        failure.partial.as_ref(),
                        Some(&failure.error),
                    )
                    .await;
                if let Err(del_error) = rolled_back {
                    tracing::warn!(
                        pod = %format!("{}/{}", req.namespace, req.name),
                        error = %del_error,
                        "DEL after a failed CNI ADD failed; the record stays for a retry"
                    );
                }
                Err(failure.error)
            }
        }
    }

    /// DEL the pod from the network with the config it was ADDed with, then forget it.
    /// Fine when the pod has no record (never set up, or already torn down). Call it
    /// while the pod's network namespace is still pinned: without it, Debian's bridge
    /// plugin 1.1.1 cannot find the addresses whose masquerade rules it made
    /// (containernetworking/plugins#810) and leaves them.
    pub async fn teardown(&self, uid: &str) -> Result<(), CniError> {
        let Some(rec) = record::read(&self.cfg.state_dir, uid).await? else {
            return Ok(());
        };
        self.del_record(&rec, usize::MAX, rec.result.as_ref(), None)
            .await
    }

    /// DEL of the first `upto` plugins of a record's list, then the record's removal.
    async fn del_record(
        &self,
        rec: &PodRecord,
        upto: usize,
        prev: Option<&serde_json::Value>,
        rejected: Option<&CniError>,
    ) -> Result<(), CniError> {
        let list = record_list(rec)?;
        let netns = netns_for_del(&rec.netns);
        let env = PodEnv {
            container_id: &rec.uid,
            netns: &netns,
            ifname: &rec.ifname,
            cni_args: &rec.cni_args,
        };
        let rt = RuntimeArgs {
            port_mappings: rec.port_mappings.clone(),
        };
        self.runner()
            .del(&list, upto, &env, &rt, prev, rejected)
            .await?;
        record::remove(&self.cfg.state_dir, &rec.uid).await
    }

    /// DEL every pod that has a record but is not in `live` (a daemon killed during a
    /// setup or teardown); returns what could not be released (the record then stays,
    /// for the next try). Call it before the pods' pinned namespaces are released.
    pub async fn reconcile(&self, live: &HashSet<String>) -> Vec<CniError> {
        let uids = match record::uids(&self.cfg.state_dir).await {
            Ok(u) => u,
            Err(e) => return vec![e],
        };
        let mut errors = Vec::new();
        for uid in uids.into_iter().filter(|u| !live.contains(u)) {
            tracing::info!(pod_uid = %uid, "releasing the CNI network of a pod that is gone");
            if let Err(e) = self.teardown(&uid).await {
                errors.push(e);
            }
        }
        errors
    }
}

fn runtime_args(req: &PodNetRequest) -> RuntimeArgs {
    RuntimeArgs {
        port_mappings: req
            .host_ports
            .iter()
            .map(PortMapping::from_host_port)
            .collect(),
    }
}

/// The config list a record was made with.
fn record_list(rec: &PodRecord) -> Result<ConfigList, CniError> {
    let bytes = serde_json::to_vec(&rec.config).map_err(|e| {
        CniError::Internal(format!("the recorded CNI config of pod {}: {e}", rec.uid))
    })?;
    Ok(parse_config_file(&rec.config_file, &bytes)?)
}

fn status_of(result: &CniResult, ifname: &str) -> PodNetStatus {
    PodNetStatus {
        ips: result.pod_ips(),
        interface: result
            .pod_interface(ifname)
            .unwrap_or_else(|| ifname.to_string()),
    }
}
