//! podhost's cgroup tree on this node: where pods and shims go, and whether limits are
//! enforced (pure cgroup v2) or not (v1/hybrid: degraded mode, said plainly at start).
//!
//! Full mode layout, under the daemon's delegated subtree `<root>` (its own cgroup, or
//! `--cgroup-root`): `<root>/daemon` (the daemon, a leaf), `<root>/shims` (every shim, a
//! leaf), `<root>/kubepods[/burstable|/besteffort]/pod<uid>/<container>`. cgroup v2 forbids
//! processes in a cgroup whose children have controllers enabled, hence the leaves.

use std::collections::HashMap;
use std::sync::Mutex;

use super::cgroup_root::{CgroupMode, choose_root, detect_mode};
use super::cgroup_v2::{CgroupV2, REQUIRED};
use crate::model::qos::QosClass;
use crate::model::resources::{PodCgroupConfig, burstable_qos_weight};

/// Whether limits are enforced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enforcement {
    Full,
    /// The reason, as told to the user.
    Degraded(String),
}

/// The node's cgroup tree.
#[derive(Debug)]
pub struct NodeCgroups {
    pub enforcement: Enforcement,
    /// Parent of `kubepods` (and, in full mode, `daemon` and `shims`).
    pub root: String,
    pub pod_pids_limit: Option<i64>,
    v2: CgroupV2,
    /// CPU requests of the Burstable pods, for the Burstable QoS cgroup's weight.
    burstable: Mutex<HashMap<String, i64>>,
}

impl NodeCgroups {
    /// Inspects the host and sets the tree up. Never fails: whatever cannot be done turns
    /// into degraded mode with the reason.
    pub fn setup(flag_root: Option<String>, pod_pids_limit: Option<i64>) -> Self {
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let v2 = CgroupV2::default();
        let degraded = |root: String, reason: String| Self {
            enforcement: Enforcement::Degraded(reason),
            root,
            pod_pids_limit,
            v2: v2.clone(),
            burstable: Mutex::new(HashMap::new()),
        };
        if detect_mode() == CgroupMode::Legacy {
            let root = flag_root.unwrap_or_else(|| choose_root(&own).0);
            return degraded(
                root,
                "this host has no pure cgroup v2 hierarchy (v1 or hybrid)".into(),
            );
        }
        let own_path = own
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .unwrap_or("/")
            .trim_end_matches('/')
            .to_string();
        let root = match flag_root {
            Some(r) => {
                // An explicit root that does not exist yet is created (with controllers
                // enabled on the way down), as systemd creates a service's cgroup.
                let r = r.trim_end_matches('/').to_string();
                if let Err(e) = v2.ensure("", &r) {
                    return degraded(r.clone(), format!("cannot create --cgroup-root {r}: {e}"));
                }
                r
            }
            None => {
                // Leave our own cgroup free of processes: the daemon moves to a leaf.
                if !own_path.is_empty() {
                    let leaf = format!("{own_path}/daemon");
                    if let Err(e) = v2.move_self(&leaf) {
                        return degraded(
                            own_path,
                            format!("cannot move the daemon into {leaf}: {e}"),
                        );
                    }
                    if v2.has_processes(&own_path) {
                        return degraded(
                            own_path.clone(),
                            format!(
                                "the daemon's cgroup {own_path} holds other processes, so it cannot \
                                 delegate controllers; run podhost in a cgroup of its own (e.g. a \
                                 systemd service with Delegate=yes) or pass --cgroup-root"
                            ),
                        );
                    }
                }
                own_path
            }
        };
        let node = Self {
            enforcement: Enforcement::Full,
            root,
            pod_pids_limit,
            v2: v2.clone(),
            burstable: Mutex::new(HashMap::new()),
        };
        let kubepods = node.kubepods();
        for rel in [
            format!("{kubepods}/burstable"),
            format!("{kubepods}/besteffort"),
        ] {
            if let Err(e) = v2.ensure(&node.root, &rel) {
                return degraded(node.root.clone(), format!("cannot create {rel}: {e}"));
            }
        }
        if let Err(e) = v2
            .enable_controllers(&format!("{kubepods}/burstable"))
            .and_then(|_| v2.enable_controllers(&format!("{kubepods}/besteffort")))
        {
            return degraded(node.root.clone(), format!("cannot enable controllers: {e}"));
        }
        let missing: Vec<&str> = REQUIRED
            .iter()
            .copied()
            .filter(|c| {
                !v2.available(&format!("{kubepods}/besteffort"))
                    .iter()
                    .any(|a| a == c)
            })
            .collect();
        if !missing.is_empty() {
            return degraded(
                node.root.clone(),
                format!(
                    "cgroup controllers not delegated to podhost: {}",
                    missing.join(", ")
                ),
            );
        }
        let _ = v2.write(&format!("{kubepods}/besteffort"), "cpu.weight", "1");
        let _ = v2.ensure(&node.root, &node.shims());
        node
    }

    pub fn is_full(&self) -> bool {
        self.enforcement == Enforcement::Full
    }

    pub fn kubepods(&self) -> String {
        format!("{}/kubepods", self.root)
    }

    pub fn shims(&self) -> String {
        format!("{}/shims", self.root)
    }

    /// `/sys/fs/cgroup/<root>/shims`, where shims move themselves (full mode only).
    pub fn shims_dir(&self) -> Option<std::path::PathBuf> {
        self.is_full().then(|| self.v2.dir(&self.shims()))
    }

    /// The pod's cgroup: Guaranteed pods directly under kubepods, the others under their
    /// QoS class's cgroup (as the kubelet's cgroupfs driver).
    pub fn pod_path(&self, qos: QosClass, uid: &str) -> String {
        match qos {
            QosClass::Guaranteed => format!("{}/pod{uid}", self.kubepods()),
            QosClass::Burstable => format!("{}/burstable/pod{uid}", self.kubepods()),
            QosClass::BestEffort => format!("{}/besteffort/pod{uid}", self.kubepods()),
        }
    }

    pub fn container_path(&self, qos: QosClass, uid: &str, container: &str) -> String {
        format!("{}/{container}", self.pod_path(qos, uid))
    }

    /// The container cgroup's directory in the unified hierarchy (full mode only).
    pub fn container_dir(
        &self,
        qos: QosClass,
        uid: &str,
        container: &str,
    ) -> Option<std::path::PathBuf> {
        self.is_full()
            .then(|| self.v2.dir(&self.container_path(qos, uid, container)))
    }

    /// Creates the pod's cgroup with its values and updates the Burstable QoS weight.
    pub fn setup_pod(
        &self,
        qos: QosClass,
        uid: &str,
        cfg: &PodCgroupConfig,
        cpu_request_milli: i64,
    ) -> Result<(), super::RuntimeError> {
        if !self.is_full() {
            return Ok(());
        }
        let rel = self.pod_path(qos, uid);
        self.v2.ensure(&self.root, &rel)?;
        self.v2.enable_controllers(&rel)?;
        self.v2
            .write(&rel, "cpu.weight", &cfg.cpu_weight.to_string())?;
        if let Some((quota, period)) = cfg.cpu_max {
            self.v2
                .write(&rel, "cpu.max", &format!("{quota} {period}"))?;
        }
        if let Some(m) = cfg.memory_max {
            self.v2.write(&rel, "memory.max", &m.to_string())?;
        }
        if let Some(p) = self.pod_pids_limit.filter(|p| *p > 0) {
            self.v2.write(&rel, "pids.max", &p.to_string())?;
        }
        if qos == QosClass::Burstable {
            self.set_burstable(uid, Some(cpu_request_milli));
        }
        Ok(())
    }

    fn set_burstable(&self, uid: &str, request: Option<i64>) {
        let mut map = self.burstable.lock().unwrap_or_else(|p| p.into_inner());
        match request {
            Some(r) => map.insert(uid.to_string(), r),
            None => map.remove(uid),
        };
        let total: i64 = map.values().sum();
        let weight = burstable_qos_weight(total);
        if let Err(e) = self.v2.write(
            &format!("{}/burstable", self.kubepods()),
            "cpu.weight",
            &weight.to_string(),
        ) {
            tracing::warn!(error = %e, "cannot update the Burstable QoS cgroup");
        }
    }

    /// Removes the pod's cgroups (every hierarchy in degraded mode).
    pub fn remove_pod(&self, qos: QosClass, uid: &str) {
        let rel = self.pod_path(qos, uid);
        if self.is_full() {
            self.v2.remove_tree(&rel);
            if qos == QosClass::Burstable {
                self.set_burstable(uid, None);
            }
            return;
        }
        // Degraded on a pure v2 host (controllers not delegated): its one hierarchy is
        // /sys/fs/cgroup itself, whose subdirectories are cgroups, not hierarchies.
        if detect_mode() == CgroupMode::Unified {
            self.v2.remove_tree(&rel);
            return;
        }
        let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") else {
            return;
        };
        // Each directory under /sys/fs/cgroup is a hierarchy (v1 controllers, unified).
        for h in hierarchies.flatten() {
            CgroupV2::new(h.path()).remove_tree(&rel);
        }
    }
}
