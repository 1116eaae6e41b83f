//! The downward API: a pod's own fields (`fieldRef`) and its containers' resources
//! (`resourceFieldRef`) as the strings the kubelet hands to env vars and volume files.
//!
//! Formats follow the kubelet (pkg/fieldpath, pkg/api/v1/resource): a whole label or
//! annotation map is `key="value"` lines sorted by key, values quoted as Go's `%q`
//! does, no trailing newline; resources are divided by `divisor` and rounded up.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, ObjectFieldSelector, Pod, ResourceFieldSelector};

use super::quantity;

/// What the downward API reports that is not in the pod spec: the node's capacity (the
/// limit of a container that sets none, as the kubelet's node allocatable) and the IPs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DownwardInputs {
    /// `spec.nodeName` when the pod has none set.
    pub node_name: String,
    /// The pod's IPs (`status.podIP(s)`): the host's for hostNetwork pods; empty for
    /// others until pods get a network of their own.
    pub pod_ips: Vec<String>,
    /// The node's IPs (`status.hostIP(s)`), preferred family first.
    pub host_ips: Vec<String>,
    pub capacity: NodeCapacity,
}

impl DownwardInputs {
    /// The inputs for one pod: a hostNetwork pod's IPs are the host's (as the kubelet
    /// reports them); any other pod has none yet.
    pub fn for_pod(
        node_name: &str,
        host_network: bool,
        host_ips: &[String],
        capacity: NodeCapacity,
    ) -> Self {
        Self {
            node_name: node_name.to_string(),
            pod_ips: if host_network {
                host_ips.to_vec()
            } else {
                Vec::new()
            },
            host_ips: host_ips.to_vec(),
            capacity,
        }
    }
}

/// The node's resources, used where a container sets no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeCapacity {
    pub cpu_millis: i64,
    pub memory_bytes: i64,
    pub ephemeral_storage_bytes: i64,
}

/// A field or resource the downward API cannot give.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DownwardError {
    /// A fieldPath the kubelet does not support (in this place).
    #[error("unsupported fieldPath: {path}")]
    UnsupportedField { path: String },
    /// `metadata.labels['k']` with a key that is not a qualified name.
    #[error("invalid key subscript in {path}: {reason}")]
    BadSubscript { path: String, reason: String },
    /// A resource name other than limits/requests of cpu, memory, ephemeral-storage, hugepages-*.
    #[error("unsupported container resource: {resource}")]
    UnsupportedResource { resource: String },
    /// resourceFieldRef names a container the pod does not have.
    #[error(
        "resourceFieldRef: container {container:?} is not in the pod; set containerName to one of its containers"
    )]
    NoSuchContainer { container: String },
    /// A divisor that is not a positive quantity.
    #[error(
        "resourceFieldRef {resource}: divisor {divisor:?} must be a positive quantity (e.g. 1, 1m, 1Mi)"
    )]
    BadDivisor { resource: String, divisor: String },
    /// A request or limit that is not a quantity.
    #[error("resourceFieldRef {resource}: the container's value {value:?} is not a quantity")]
    BadQuantity { resource: String, value: String },
}

/// Where a fieldRef is resolved: volumes only see `metadata.*` (the API server's rule
/// for downwardAPI volume items); env vars also see spec and status fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldScope {
    Env,
    Volume,
}

/// The value of a `fieldRef`, as the kubelet's podFieldSelectorRuntimeValue (env) or
/// ExtractFieldPathAsString (volumes).
pub fn field_value(
    sel: &ObjectFieldSelector,
    pod: &Pod,
    inputs: &DownwardInputs,
    scope: FieldScope,
) -> Result<String, DownwardError> {
    let path = sel.field_path.as_str();
    if scope == FieldScope::Env {
        let spec = pod.spec.as_ref();
        match path {
            "spec.nodeName" => {
                return Ok(spec
                    .and_then(|s| s.node_name.clone())
                    .filter(|n| !n.is_empty())
                    .unwrap_or_else(|| inputs.node_name.clone()));
            }
            "spec.serviceAccountName" => {
                return Ok(spec
                    .and_then(|s| s.service_account_name.clone())
                    .unwrap_or_default());
            }
            "status.hostIP" => return Ok(inputs.host_ips.first().cloned().unwrap_or_default()),
            "status.hostIPs" => return Ok(inputs.host_ips.join(",")),
            "status.podIP" => return Ok(inputs.pod_ips.first().cloned().unwrap_or_default()),
            "status.podIPs" => return Ok(inputs.pod_ips.join(",")),
            _ => {}
        }
    }
    metadata_value(path, pod)
}

/// `metadata.*` fields, whole or subscripted (`metadata.labels['app']`).
fn metadata_value(path: &str, pod: &Pod) -> Result<String, DownwardError> {
    let meta = &pod.metadata;
    let empty = BTreeMap::new();
    let labels = meta.labels.as_ref().unwrap_or(&empty);
    let annotations = meta.annotations.as_ref().unwrap_or(&empty);
    if let Some((field, key)) = split_subscript(path) {
        let map = match field {
            "metadata.labels" => labels,
            "metadata.annotations" => annotations,
            _ => {
                return Err(DownwardError::UnsupportedField { path: path.into() });
            }
        };
        // The kubelet lowercases annotation keys before checking them (their prefix may
        // carry capitals); label keys are checked as written.
        let checked = if field == "metadata.annotations" {
            key.to_ascii_lowercase()
        } else {
            key.to_string()
        };
        if let Some(reason) = qualified_name_problem(&checked) {
            return Err(DownwardError::BadSubscript {
                path: path.into(),
                reason,
            });
        }
        return Ok(map.get(key).cloned().unwrap_or_default());
    }
    match path {
        "metadata.name" => Ok(meta.name.clone().unwrap_or_default()),
        "metadata.namespace" => Ok(meta.namespace.clone().unwrap_or_else(|| "default".into())),
        "metadata.uid" => Ok(meta.uid.clone().unwrap_or_default()),
        "metadata.labels" => Ok(format_map(labels)),
        "metadata.annotations" => Ok(format_map(annotations)),
        _ => Err(DownwardError::UnsupportedField { path: path.into() }),
    }
}

/// `path['key']` → (path, key), as the kubelet's SplitMaybeSubscriptedPath.
fn split_subscript(path: &str) -> Option<(&str, &str)> {
    let inner = path.strip_suffix("']")?;
    let (field, key) = inner.split_once("['")?;
    (!field.is_empty()).then_some((field, key))
}

/// A Kubernetes qualified name: `[prefix/]name`, the name at most 63 characters of
/// `[-._a-zA-Z0-9]` starting and ending alphanumeric, the prefix a DNS subdomain.
/// What is wrong with `key`, if anything.
fn qualified_name_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let alnum = |c: char| c.is_ascii_alphanumeric();
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(alnum)
        && name.ends_with(alnum)
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !name_ok {
        return Some(format!(
            "name part {name:?} must be at most 63 characters of [-._a-zA-Z0-9], starting and ending with an alphanumeric character"
        ));
    }
    if let Some(p) = prefix {
        let lower = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
        let ok = !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|label| {
                !label.is_empty()
                    && label.starts_with(lower)
                    && label.ends_with(lower)
                    && label.chars().all(|c| lower(c) || c == '-')
            });
        if !ok {
            return Some(format!("prefix part {p:?} must be a DNS-1123 subdomain"));
        }
    }
    None
}

/// A label or annotation map as the kubelet writes it: sorted `key="value"` lines.
pub fn format_map(map: &BTreeMap<String, String>) -> String {
    map.iter()
        .map(|(k, v)| format!("{k}={}", go_quote(v)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Go's `strconv.Quote`: printable characters as they are, the usual backslash escapes,
/// then `\xNN`, `\uNNNN` or `\UNNNNNNNN`.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if go_printable(c) => out.push(c),
            c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// Go's `unicode.IsPrint`, close enough: not a control, format, separator (other than
/// the ASCII space) or private-use character. Unassigned code points count as
/// printable here (Go escapes them; Rust has no table of them).
fn go_printable(c: char) -> bool {
    let u = c as u32;
    !(c.is_control()
        || matches!(u,
            0xA0 | 0xAD | 0x600..=0x605 | 0x61C | 0x6DD | 0x70F | 0x1680 | 0x180E
            | 0x2000..=0x200F | 0x2028..=0x202F | 0x205F..=0x2064 | 0x2066..=0x206F
            | 0x3000 | 0xFEFF | 0xFFF9..=0xFFFB | 0xE000..=0xF8FF
            | 0x110BD | 0x1D173..=0x1D17A | 0xE0001 | 0xE0020..=0xE007F
            | 0xF0000..=0x10FFFF))
}

/// The value of a `resourceFieldRef` for `container` (its `containerName` when set),
/// as the kubelet's ExtractContainerResourceValue: unset limits are the node's
/// capacity, unset requests are the limit the manifest sets (API defaulting) or 0;
/// the quotient by `divisor` (default 1) is rounded up.
pub fn resource_value(
    sel: &ResourceFieldSelector,
    pod: &Pod,
    container: Option<&str>,
    inputs: &DownwardInputs,
) -> Result<String, DownwardError> {
    let wanted = sel
        .container_name
        .as_deref()
        .filter(|n| !n.is_empty())
        .or(container)
        .unwrap_or_default();
    let c = find_container(pod, wanted).ok_or_else(|| DownwardError::NoSuchContainer {
        container: wanted.to_string(),
    })?;
    let resource = sel.resource.as_str();
    let (kind, name) = resource
        .split_once('.')
        .filter(|(k, _)| matches!(*k, "limits" | "requests"))
        .ok_or_else(|| DownwardError::UnsupportedResource {
            resource: resource.into(),
        })?;
    let is_cpu = name == "cpu";
    if !(is_cpu
        || name == "memory"
        || name == "ephemeral-storage"
        || name.starts_with("hugepages-"))
    {
        return Err(DownwardError::UnsupportedResource {
            resource: resource.into(),
        });
    }
    let res = c.resources.as_ref();
    let declared = |which: &str| {
        res.and_then(|r| {
            if which == "limits" {
                r.limits.as_ref()
            } else {
                r.requests.as_ref()
            }
        })
        .and_then(|m| m.get(name))
        .map(|q| q.0.clone())
    };
    let parse = |q: &str| {
        let v = if is_cpu {
            quantity::cpu_millis(q)
        } else {
            quantity::bytes(q)
        };
        v.ok_or_else(|| DownwardError::BadQuantity {
            resource: resource.into(),
            value: q.into(),
        })
    };
    let node_default = match name {
        "cpu" => inputs.capacity.cpu_millis,
        "memory" => inputs.capacity.memory_bytes,
        "ephemeral-storage" => inputs.capacity.ephemeral_storage_bytes,
        _ => 0,
    };
    let value = match (kind, declared("limits"), declared("requests")) {
        ("limits", Some(l), _) => parse(&l)?,
        ("limits", None, _) => node_default,
        (_, _, Some(r)) => parse(&r)?,
        (_, Some(l), None) => parse(&l)?,
        (_, None, None) => 0,
    };
    let divisor_text = sel
        .divisor
        .as_ref()
        .map(|d| d.0.clone())
        .filter(|d| !d.is_empty() && d != "0")
        .unwrap_or_else(|| "1".into());
    let divisor = parse(&divisor_text)
        .ok()
        .filter(|d| *d > 0)
        .ok_or_else(|| DownwardError::BadDivisor {
            resource: resource.into(),
            divisor: divisor_text.clone(),
        })?;
    Ok(ceil_div(value, divisor).to_string())
}

/// ⌈value / divisor⌉ for a positive divisor.
fn ceil_div(value: i64, divisor: i64) -> i64 {
    let q = value.div_euclid(divisor);
    if value.rem_euclid(divisor) == 0 {
        q
    } else {
        q + 1
    }
}

fn find_container<'a>(pod: &'a Pod, name: &str) -> Option<&'a Container> {
    let spec = pod.spec.as_ref()?;
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == name)
}

#[cfg(test)]
mod tests;
