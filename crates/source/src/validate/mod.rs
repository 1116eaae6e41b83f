//! Validation of a static-pod manifest as the API server's `ValidatePodCreate` does it,
//! for everything that matters to a static pod. Every refused field is reported (not
//! only the first), each with its JSON path, the value and what is accepted. Names
//! become directory and log file names, so they are checked strictly (DNS-1123), which
//! also rules out `/` and `..`.
//!
//! One file per concern: `pod` (metadata and pod-level fields), `container` (each
//! container and its env), `resources`, `ports`, `probes` (probes and lifecycle
//! handlers), `volumes` (volumes and mounts), `downward` (downward API references),
//! `sysctls` (the pod's sysctls).

mod container;
mod dns;
mod downward;
mod names;
mod pod;
mod ports;
mod probes;
mod resources;
mod sysctls;
mod volumes;

#[cfg(test)]
mod tests;

use std::path::Path;

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use super::error::{FieldError, ManifestError, ValueError};

pub use names::dns1123_subdomain;

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

/// Validates a decoded pod (before defaults and identity are applied): every rule, in
/// spec order; empty when the pod is valid.
pub(crate) fn validate_pod(pod: &Pod) -> Vec<FieldError> {
    let mut errs = Errs::default();
    pod::validate(pod, &mut errs);
    errs.0
}

/// The field errors found so far.
#[derive(Default)]
pub(crate) struct Errs(pub(crate) Vec<FieldError>);

impl Errs {
    /// A refused value.
    fn invalid(&mut self, field: impl Into<String>, value: impl ToString, reason: ValueError) {
        self.0.push(FieldError::invalid(field, value, reason));
    }

    /// A problem with the field as a whole.
    fn bare(&mut self, field: impl Into<String>, reason: ValueError) {
        self.0.push(FieldError::bare(field, reason));
    }

    /// Records `check`'s verdict on `value` at `field`.
    fn check(&mut self, field: impl Into<String>, value: &str, check: Result<(), ValueError>) {
        if let Err(reason) = check {
            self.invalid(field, value, reason);
        }
    }

    /// An enum-like field: `value` must be one of `allowed`.
    fn one_of(&mut self, field: impl Into<String>, value: &str, allowed: &'static [&'static str]) {
        if !allowed.contains(&value) {
            self.invalid(field, value, ValueError::NotOneOf { allowed });
        }
    }

    /// A number that may not be negative.
    fn non_negative(&mut self, field: impl Into<String>, value: Option<i64>) {
        if let Some(v) = value
            && v < 0
        {
            self.invalid(field, v, ValueError::Negative);
        }
    }
}
