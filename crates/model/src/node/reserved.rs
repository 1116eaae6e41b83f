//! `--kube-reserved` / `--system-reserved` (`kubeReserved`, `systemReserved` in the
//! KubeletConfiguration): what is held back from pods when the node's allocatable is
//! computed.

use std::collections::BTreeMap;

use crate::quantity::Quantity;

/// Resources held back, by the resource's name: cpu in millicores, the others in their
/// unit (bytes for memory and ephemeral-storage, a count for pid).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reserved {
    pub cpu_millis: i64,
    pub memory_bytes: i64,
    pub ephemeral_storage_bytes: i64,
    pub pids: i64,
}

/// A reservation that cannot be parsed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReservedError {
    /// An item is not `name=quantity`.
    #[error("{flag}: `{item}` is not NAME=QUANTITY (e.g. cpu=100m,memory=256Mi)")]
    Syntax { flag: String, item: String },
    /// A resource the kubelet does not reserve.
    #[error(
        "{flag}: cannot reserve `{name}`; the kubelet reserves cpu, memory, ephemeral-storage and pid"
    )]
    UnknownResource { flag: String, name: String },
    /// The quantity is not a Kubernetes quantity, or negative.
    #[error("{flag}: `{value}` for {name} is not a non-negative quantity")]
    Quantity {
        flag: String,
        name: String,
        value: String,
    },
}

impl Reserved {
    /// Parses the flag form `cpu=100m,memory=256Mi,ephemeral-storage=1Gi,pid=1000`
    /// (empty: nothing reserved). `flag` names the flag or field in errors.
    pub fn parse(flag: &str, text: &str) -> Result<Self, ReservedError> {
        let mut map = BTreeMap::new();
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (name, value) = item.split_once('=').ok_or_else(|| ReservedError::Syntax {
                flag: flag.to_string(),
                item: item.to_string(),
            })?;
            map.insert(name.trim().to_string(), value.trim().to_string());
        }
        Self::from_map(flag, &map)
    }

    /// From the KubeletConfiguration's map form (`kubeReserved: {cpu: 100m}`).
    pub fn from_map(flag: &str, map: &BTreeMap<String, String>) -> Result<Self, ReservedError> {
        let mut reserved = Self::default();
        for (name, value) in map {
            let bad = || ReservedError::Quantity {
                flag: flag.to_string(),
                name: name.clone(),
                value: value.clone(),
            };
            let quantity = Quantity::parse(value).map_err(|_| bad())?;
            let amount = match name.as_str() {
                "cpu" => quantity.milli_value(),
                "memory" | "ephemeral-storage" | "pid" => quantity.value(),
                _ => {
                    return Err(ReservedError::UnknownResource {
                        flag: flag.to_string(),
                        name: name.clone(),
                    });
                }
            }
            .map_err(|_| bad())?;
            if amount < 0 {
                return Err(bad());
            }
            match name.as_str() {
                "cpu" => reserved.cpu_millis = amount,
                "memory" => reserved.memory_bytes = amount,
                "ephemeral-storage" => reserved.ephemeral_storage_bytes = amount,
                _ => reserved.pids = amount,
            }
        }
        Ok(reserved)
    }

    /// Both reservations together (the kubelet subtracts kube + system reserved).
    pub fn plus(&self, other: &Reserved) -> Reserved {
        Reserved {
            cpu_millis: self.cpu_millis.saturating_add(other.cpu_millis),
            memory_bytes: self.memory_bytes.saturating_add(other.memory_bytes),
            ephemeral_storage_bytes: self
                .ephemeral_storage_bytes
                .saturating_add(other.ephemeral_storage_bytes),
            pids: self.pids.saturating_add(other.pids),
        }
    }
}
