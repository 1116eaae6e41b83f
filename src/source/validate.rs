//! Validation of a static-pod manifest: the subset of the API server's
//! `ValidatePodCreate` that podhost depends on. Names become directory and log file
//! names, so they are checked strictly (DNS-1123), which also rules out `/` and `..`.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::Value;

use super::error::{ManifestError, ValueError};

/// Checks, before typed decoding, the fields whose absence would otherwise surface as
/// an opaque decode error: `metadata.name`, `spec.containers`, and every container's
/// `name` and `image`.
pub(crate) fn check_required(path: &Path, doc: &Value) -> Result<(), ManifestError> {
    let is_blank = |v: Option<&Value>| match v {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.trim().is_empty(),
        Some(_) => false,
    };
    if is_blank(doc.pointer("/metadata/name")) {
        return Err(ManifestError::MissingName {
            path: path.to_path_buf(),
        });
    }
    match doc.pointer("/spec/containers") {
        None | Some(Value::Null) => {
            return Err(ManifestError::NoContainers {
                path: path.to_path_buf(),
            });
        }
        Some(Value::Array(a)) if a.is_empty() => {
            return Err(ManifestError::NoContainers {
                path: path.to_path_buf(),
            });
        }
        _ => {}
    }
    for list in ["containers", "initContainers"] {
        let Some(Value::Array(items)) = doc.get("spec").and_then(|s| s.get(list)) else {
            continue;
        };
        for (i, c) in items.iter().enumerate() {
            if !c.is_object() {
                continue; // the typed decode reports the wrong type
            }
            let missing = |field, hint| ManifestError::MissingContainerField {
                path: path.to_path_buf(),
                container: format!("spec.{list}[{i}]"),
                field,
                hint,
            };
            if is_blank(c.get("name")) {
                return Err(missing("name", "give the container a unique name"));
            }
            if is_blank(c.get("image")) {
                return Err(missing("image", "add the image to run"));
            }
        }
    }
    Ok(())
}

/// Validates a decoded pod (before defaults and identity are applied).
pub(crate) fn validate(path: &Path, pod: &Pod) -> Result<(), ManifestError> {
    let invalid = |field: &str, value: &str, reason: ValueError| ManifestError::InvalidValue {
        path: path.to_path_buf(),
        field: field.to_string(),
        value: value.to_string(),
        reason,
    };
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    if let Err(why) = dns1123_subdomain(name) {
        return Err(invalid("metadata.name", name, why));
    }
    if let Some(ns) = pod.metadata.namespace.as_deref()
        && !ns.is_empty()
        && let Err(why) = dns1123_label(ns)
    {
        return Err(invalid("metadata.namespace", ns, why));
    }
    let Some(spec) = pod.spec.as_ref() else {
        return Err(ManifestError::NoContainers {
            path: path.to_path_buf(),
        });
    };
    if spec.containers.is_empty() {
        return Err(ManifestError::NoContainers {
            path: path.to_path_buf(),
        });
    }
    if let Some(rp) = spec.restart_policy.as_deref() {
        one_of(rp, &["Always", "OnFailure", "Never"])
            .map_err(|why| invalid("spec.restartPolicy", rp, why))?;
    }
    if let Some(tgps) = spec.termination_grace_period_seconds
        && tgps < 0
    {
        return Err(invalid(
            "spec.terminationGracePeriodSeconds",
            &tgps.to_string(),
            ValueError::NegativeGracePeriod,
        ));
    }

    if spec.share_process_namespace == Some(true) && spec.host_pid == Some(true) {
        return Err(invalid(
            "spec.shareProcessNamespace",
            "true",
            ValueError::ShareProcessNamespaceWithHostPid,
        ));
    }

    let init = spec.init_containers.as_deref().unwrap_or_default();
    let all = spec
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| (format!("spec.containers[{i}]"), c))
        .chain(
            init.iter()
                .enumerate()
                .map(|(i, c)| (format!("spec.initContainers[{i}]"), c)),
        );
    for (i, c) in spec.containers.iter().enumerate() {
        crate::model::security::container_security(pod, c, i).map_err(|source| {
            ManifestError::SecurityContext {
                path: path.to_path_buf(),
                source,
            }
        })?;
    }
    let mut seen: HashMap<&str, String> = HashMap::new();
    for (at, c) in all {
        validate_container(&at, c).map_err(|e| invalid(&e.field, &e.value, e.reason))?;
        if let Some(first) = seen.get(c.name.as_str()) {
            return Err(ManifestError::DuplicateContainer {
                path: path.to_path_buf(),
                container: at,
                first: first.clone(),
                name: c.name.clone(),
            });
        }
        seen.insert(&c.name, at);
    }
    Ok(())
}

/// A refused field inside a container: its path (relative until prefixed), value and
/// reason; [`validate`] turns it into [`ManifestError::InvalidValue`].
struct FieldError {
    field: String,
    value: String,
    reason: ValueError,
}

impl FieldError {
    fn new(field: impl Into<String>, value: impl Into<String>, reason: ValueError) -> Self {
        Self {
            field: field.into(),
            value: value.into(),
            reason,
        }
    }

    /// The same error with its field path under `at` (`spec.containers[0]`).
    fn under(self, at: &str) -> Self {
        Self {
            field: format!("{at}.{}", self.field),
            ..self
        }
    }
}

fn validate_container(at: &str, c: &Container) -> Result<(), FieldError> {
    let bad = |field: &str, value: &str, reason: ValueError| {
        FieldError::new(format!("{at}.{field}"), value, reason)
    };
    dns1123_label(&c.name).map_err(|why| bad("name", &c.name, why))?;
    let image = c.image.as_deref().unwrap_or_default();
    if image.trim() != image {
        return Err(bad("image", image, ValueError::ImageWhitespace));
    }
    if let Some(p) = c.image_pull_policy.as_deref() {
        one_of(p, &["Always", "IfNotPresent", "Never"])
            .map_err(|why| bad("imagePullPolicy", p, why))?;
    }
    if let Some(p) = c.termination_message_policy.as_deref() {
        one_of(p, &["File", "FallbackToLogsOnError"])
            .map_err(|why| bad("terminationMessagePolicy", p, why))?;
    }
    validate_resources(c).map_err(|e| e.under(at))?;
    validate_ports(c).map_err(|e| e.under(at))?;
    for (i, e) in c.env.iter().flatten().enumerate() {
        // As the API server (RelaxedEnvironmentVariableValidation): "NAME=x" would set
        // another variable than the one written.
        if e.name.is_empty()
            || e.name.contains('=')
            || !e.name.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(bad(&format!("env[{i}].name"), &e.name, ValueError::EnvName));
        }
    }
    Ok(())
}

/// Every resource quantity must parse, none may be negative, and a request may not
/// exceed its limit: a quantity that does not parse would otherwise run the container
/// without the limit the user wrote.
fn validate_resources(c: &Container) -> Result<(), FieldError> {
    let Some(r) = c.resources.as_ref() else {
        return Ok(());
    };
    let mut parsed: HashMap<(&str, &str), i64> = HashMap::new();
    for (kind, map) in [("requests", &r.requests), ("limits", &r.limits)] {
        for (name, q) in map.iter().flatten() {
            let field = format!("resources.{kind}.{name}");
            let value = if name == "cpu" {
                crate::model::quantity::cpu_millis(&q.0)
            } else {
                crate::model::quantity::bytes(&q.0)
            };
            let Some(value) = value else {
                return Err(FieldError::new(field, q.0.clone(), ValueError::Quantity));
            };
            if value < 0 {
                return Err(FieldError::new(
                    field,
                    q.0.clone(),
                    ValueError::NegativeQuantity,
                ));
            }
            parsed.insert((kind, name.as_str()), value);
        }
    }
    for ((kind, name), request) in &parsed {
        if *kind == "requests"
            && let Some(limit) = parsed.get(&("limits", *name))
            && request > limit
        {
            let written = |map: &Option<BTreeMap<String, Quantity>>| {
                map.as_ref()
                    .and_then(|m| m.get(*name))
                    .map(|q| q.0.clone())
                    .unwrap_or_default()
            };
            return Err(FieldError::new(
                format!("resources.requests.{name}"),
                written(&r.requests),
                ValueError::RequestAboveLimit {
                    resource: name.to_string(),
                    limit: written(&r.limits),
                },
            ));
        }
    }
    Ok(())
}

/// Port numbers in range and known protocols, as the API server checks them.
fn validate_ports(c: &Container) -> Result<(), FieldError> {
    for (i, p) in c.ports.iter().flatten().enumerate() {
        if !(1..=65535).contains(&p.container_port) {
            return Err(FieldError::new(
                format!("ports[{i}].containerPort"),
                p.container_port.to_string(),
                ValueError::PortRange { min: 1 },
            ));
        }
        if let Some(h) = p.host_port
            && !(0..=65535).contains(&h)
        {
            return Err(FieldError::new(
                format!("ports[{i}].hostPort"),
                h.to_string(),
                ValueError::PortRange { min: 0 },
            ));
        }
        if let Some(proto) = p.protocol.as_deref() {
            one_of(proto, &["TCP", "UDP", "SCTP"])
                .map_err(|why| FieldError::new(format!("ports[{i}].protocol"), proto, why))?;
        }
    }
    Ok(())
}

fn one_of(value: &str, allowed: &'static [&'static str]) -> Result<(), ValueError> {
    if allowed.contains(&value) {
        Ok(())
    } else {
        Err(ValueError::NotOneOf { allowed })
    }
}

/// A DNS-1123 label: 1–63 of `[a-z0-9-]`, starting and ending alphanumeric.
pub(crate) fn dns1123_label(s: &str) -> Result<(), ValueError> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(ValueError::NotDns1123Label)
    }
}

/// A DNS-1123 subdomain: at most 253 characters, dot-separated DNS-1123 labels.
pub(crate) fn dns1123_subdomain(s: &str) -> Result<(), ValueError> {
    let ok = !s.is_empty() && s.len() <= 253 && s.split('.').all(|l| dns1123_label(l).is_ok());
    if ok {
        Ok(())
    } else {
        Err(ValueError::NotDns1123Subdomain)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_names() {
        assert!(dns1123_label("web-1").is_ok());
        assert!(dns1123_label("Web").is_err());
        assert!(dns1123_label("-a").is_err());
        assert!(dns1123_label(&"a".repeat(64)).is_err());
        assert!(dns1123_subdomain("web.example-1").is_ok());
        assert!(dns1123_subdomain("../etc").is_err());
        assert!(dns1123_subdomain("a/b").is_err());
        assert!(dns1123_subdomain("a..b").is_err());
    }
}
