//! Per-pod records, `<state>/pods/<uid>.json`: what a pod's network is made of (host
//! veth, addresses, host ports). Written atomically before the first side effect of a
//! setup and again when it is complete, deleted last by teardown: whatever a daemon
//! killed mid-way leaves, the record names it.
//!
//! Why these files (and the IPAM entries) are renamed into place but not fsynced: they
//! describe kernel objects — veths, addresses, nftables rules — that do not survive
//! the power loss or kernel crash an fsync protects against, while a killed daemon
//! loses nothing that reached the page cache. After a power loss a record may be
//! missing or torn; its veth and rules are gone with the old kernel, a torn record is
//! dropped when loaded and the IPAM entries of pods that are gone are released by
//! reconcile. An fsync per file costs 2–5 ms on this kind of disk, and a pod's setup
//! writes four files: flushing them would cost more than the whole setup (goal < 5 ms).

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use super::BridgeError;
use podhost_disk::read_json;
use podhost_model::host_ports::{HostPort, Protocol};
use podhost_model::net::nft::PodPorts;

/// A published port as recorded (the model's `HostPort` has no serde form).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct RecordedPort {
    pub host_ip: Option<IpAddr>,
    pub host_port: u16,
    pub container_port: u16,
    pub protocol: String,
    pub container_index: usize,
}

impl RecordedPort {
    pub(super) fn from_host_port(p: &HostPort) -> Self {
        Self {
            host_ip: p.host_ip,
            host_port: p.host_port,
            container_port: p.container_port,
            protocol: p.protocol.as_str().into(),
            container_index: p.container_index,
        }
    }

    fn to_host_port(&self) -> Option<HostPort> {
        Some(HostPort {
            host_ip: self.host_ip,
            host_port: self.host_port,
            container_port: self.container_port,
            protocol: Protocol::from_spec(Some(&self.protocol))?,
            container_index: self.container_index,
        })
    }
}

/// One pod's network.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct PodRecord {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub host_veth: String,
    /// IPv4 first.
    pub ips: Vec<IpAddr>,
    pub host_ports: Vec<RecordedPort>,
    /// Every step of the setup is done.
    pub complete: bool,
}

impl PodRecord {
    /// What the nftables ruleset needs of this pod.
    pub(super) fn pod_ports(&self) -> PodPorts {
        PodPorts {
            uid: self.uid.clone(),
            ips: self.ips.clone(),
            ports: self
                .host_ports
                .iter()
                .filter_map(RecordedPort::to_host_port)
                .collect(),
        }
    }
}

fn dir(state_dir: &Path) -> PathBuf {
    state_dir.join("pods")
}

fn path(state_dir: &Path, uid: &str) -> PathBuf {
    dir(state_dir).join(format!("{uid}.json"))
}

/// Writes `record` atomically (temp, rename; no fsync, see above).
pub(super) fn save(state_dir: &Path, record: &PodRecord) -> Result<(), BridgeError> {
    let dest = path(state_dir, &record.uid);
    let dir = dir(state_dir);
    std::fs::create_dir_all(&dir).map_err(|e| BridgeError::io("create", &dir, e))?;
    let tmp = dir.join(format!(".{}.json.tmp.{}", record.uid, std::process::id()));
    let bytes = serde_json::to_vec_pretty(record).map_err(|e| BridgeError::Io {
        what: "serialize",
        path: dest.clone(),
        source: e.into(),
    })?;
    std::fs::write(&tmp, bytes).map_err(|e| BridgeError::io("write", &tmp, e))?;
    std::fs::rename(&tmp, &dest).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        BridgeError::io("rename into", &dest, e)
    })
}

/// `uid`'s record, if it has one.
pub(super) fn load(state_dir: &Path, uid: &str) -> Result<Option<PodRecord>, BridgeError> {
    read_json(&path(state_dir, uid)).map_err(BridgeError::State)
}

/// Every record; temp files of an interrupted write are skipped (and removed), and so
/// is a torn record (a power loss; see above), with a warning naming it.
pub(super) fn load_all(state_dir: &Path) -> Result<Vec<PodRecord>, BridgeError> {
    let dir = dir(state_dir);
    std::fs::create_dir_all(&dir).map_err(|e| BridgeError::io("create", &dir, e))?;
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(|e| BridgeError::io("list", &dir, e))? {
        let entry = entry.map_err(|e| BridgeError::io("list", &dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            let _ = std::fs::remove_file(entry.path());
            continue;
        }
        let Some(uid) = name.strip_suffix(".json") else {
            continue;
        };
        match load(state_dir, uid) {
            Ok(Some(record)) => out.push(record),
            Ok(None) => {}
            Err(BridgeError::State(e)) => {
                tracing::warn!("pod network: dropping a torn record: {e}");
                let _ = std::fs::remove_file(entry.path());
            }
            Err(e) => return Err(e),
        }
    }
    out.sort_by(|a, b| a.uid.cmp(&b.uid));
    Ok(out)
}

/// Deletes `uid`'s record; fine when there is none.
pub(super) fn remove(state_dir: &Path, uid: &str) -> Result<(), BridgeError> {
    let p = path(state_dir, uid);
    match std::fs::remove_file(&p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(BridgeError::io("delete the pod network record", &p, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(uid: &str) -> PodRecord {
        PodRecord {
            uid: uid.into(),
            namespace: "default".into(),
            name: "web".into(),
            host_veth: "veth00000000".into(),
            ips: vec!["10.86.0.2".parse().unwrap()],
            host_ports: vec![RecordedPort {
                host_ip: None,
                host_port: 8080,
                container_port: 80,
                protocol: "UDP".into(),
                container_index: 1,
            }],
            complete: false,
        }
    }

    #[test]
    fn records_round_trip_list_and_delete_twice() {
        let dir = tempfile::tempdir().unwrap();
        save(dir.path(), &record("b")).unwrap();
        save(dir.path(), &record("a")).unwrap();
        std::fs::write(dir.path().join("pods/.a.json.tmp.1.0"), "{").unwrap();
        std::fs::write(dir.path().join("pods/torn.json"), "{").unwrap();
        let all = load_all(dir.path()).unwrap();
        assert_eq!(
            all.iter().map(|r| r.uid.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert!(!dir.path().join("pods/.a.json.tmp.1.0").exists());
        assert!(!dir.path().join("pods/torn.json").exists());
        let ports = all[0].pod_ports();
        assert_eq!(ports.ports[0].protocol, Protocol::Udp);
        assert_eq!(ports.ports[0].host_port, 8080);
        remove(dir.path(), "a").unwrap();
        remove(dir.path(), "a").unwrap();
        assert_eq!(load(dir.path(), "a").unwrap(), None);
    }
}
